"""Episode GRPO on the tiny local model in the real airline episode env (STYLE rule 20)."""

import pytest
import torch

import pivot_envs  # noqa: F401
from pivot_core._formats import write_pivots
from pivot_envs.episodes import ToolUseEpisodeEnv
from trainers.episodes import (
    Episode,
    EpisodeConfig,
    EpisodeTrainer,
    check_length,
    observation_text,
    pad_episodes,
    run_episode,
)
from verifiers_plugins import hookimpl
from verifiers_plugins.builtin.user_simulators import UserReply

# The last agent turn of a successful airline trajectory, all its writes already in the history: an
# episode the user ends there is a success by tau-bench's rule (1), one still open when the one-turn
# budget runs out is not (0).
LAST_TURN = "tau_bench/airline/gpt-4o/task12/trial3#8"


class ParityUser:
    """A user who ends every other conversation after the agent's reply: the group's outcomes mix
    whatever the tiny policy writes (its replies may all be alike, and then all end the same way)."""

    calls = 0

    def reply(self, conversation, *, task, recorded):
        ParityUser.calls += 1
        if ParityUser.calls % 2 == 0:
            return UserReply("Thanks! ###STOP###", True, "every other")
        return UserReply("Tell me more.")


class ParityUserPlugin:
    @hookimpl
    def register_user_simulators(self, register):
        register("parity", ParityUser)


def small(tiny_policy, tmp_path, **overrides):
    fields = dict(
        model=str(tiny_policy.path),
        output_dir=str(tmp_path / "run"),
        max_prompt_tokens=tiny_policy.max_prompt_tokens,  # the cut the tiny policy was fine-tuned with
        max_history_messages=tiny_policy.max_history_messages,  # idem
        max_new_tokens=24,  # a short tool call or sentence: enough to decide the turn, cheap on 2 cores
        max_observation_tokens=48,  # keeps 3-turn episodes inside the tiny model's 512 positions
        temperature=tiny_policy.temperature,  # the temperature at which its samples mix
        learning_rate=1e-3,  # a tiny model needs a large step to move measurably in one step
    )
    return EpisodeConfig(**{**fields, **overrides})


def runs(mask):
    """`[(value, start, end)]` runs of equal mask values."""
    out, start = [], 0
    for i in range(1, len(mask) + 1):
        if i == len(mask) or mask[i] != mask[start]:
            out.append((mask[start], start, i))
            start = i
    return out


def test_episode_sequence_masks_prompt_and_observations(tiny_policy, tmp_path):
    cfg = small(tiny_policy, tmp_path, max_turns=3)
    env = ToolUseEpisodeEnv(max_turns=cfg.max_turns)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(cfg.model)
    model = AutoModelForCausalLM.from_pretrained(cfg.model)
    start = env.pivots[1].id
    episode = run_episode(env, model, tok, start, cfg, seed=3)
    ids, mask = list(episode.token_ids), list(episode.agent_mask)
    assert len(ids) == len(mask) and episode.turns == len(episode.completions) >= 1
    parts = runs(mask)
    assert parts[0][0] == 0, "the prompt is never trained on"
    sampled = [p for p in parts if p[0] == 1]
    assert len(sampled) == episode.turns and sum(mask) == episode.generated_tokens
    for (_, a, b), text in zip(sampled, episode.completions, strict=True):
        assert tok.decode(ids[a:b], skip_special_tokens=True) == text
    # Between two agent turns: the observation the env returned, framed up to the next assistant header.
    observed = [p for p in parts[1:] if p[0] == 0]
    assert len(observed) == episode.turns - 1
    after_pivot = env.conversation[len(env.pivot(start).history) :]
    replies = [m for m in after_pivot if m.role != "assistant"]
    for _, a, b in observed:
        text = tok.decode(ids[a:b])
        assert text.rstrip().endswith("<|im_start|>assistant")
        assert any((m.content or "")[:12] in text for m in replies)


def test_observation_text_frames_new_messages_like_the_template(tiny_policy):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_policy.path))
    text = observation_text(tok, [{"role": "tool", "content": "42", "tool_call_id": "c"}])
    assert text == "\n<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>\n<|im_start|>assistant\n"


def test_pad_episodes_loss_mask_marks_tokens_the_policy_sampled():
    e1 = Episode("a", (5, 6, 7, 8, 9), (0, 0, 1, 0, 1), 1.0, 2)
    e2 = Episode("a", (5, 6, 7), (0, 1, 1), 0.0, 1)
    batch = pad_episodes([e1, e2], pad=0, device="cpu")
    assert batch["loss_mask"].tolist() == [[0, 1, 0, 1], [1, 1, 0, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]


@pytest.mark.parametrize("loss", ["grpo", "dr_grpo"])  # dr_grpo needs the episode's token budget as its constant
def test_episode_grpo_step_changes_parameters_on_a_mixed_group(tiny_policy, tmp_path, fresh_host, loss):
    fresh_host.register_plugin(ParityUserPlugin(), name="parity-user")
    env = ToolUseEpisodeEnv(max_turns=1, user_simulator="parity")
    starts = tmp_path / "start.jsonl"
    write_pivots([env.pivot(LAST_TURN)], starts)
    cfg = small(
        tiny_policy, tmp_path, starts=str(starts), starts_per_step=1, group_size=6, max_turns=1, steps=1, loss=loss
    )
    trainer = EpisodeTrainer(cfg, env=env)
    before = {k: v.detach().clone() for k, v in trainer.policy.named_parameters()}
    metrics = trainer.step()
    assert metrics["rollout/zero_var_share"] == 0.0, f"the group did not mix outcomes: {metrics}"
    assert torch.isfinite(torch.tensor(metrics["loss/total"]))
    changed = [k for k, v in trainer.policy.named_parameters() if not torch.equal(v, before[k])]
    assert changed, "a step on a mixed group must move the weights"
    assert 0.0 < metrics["loss/agent_token_share"] < 1.0


def test_budgets_past_the_models_positions_are_refused():
    cfg = EpisodeConfig(model="m", max_prompt_tokens=96, max_turns=4, max_new_tokens=64, max_observation_tokens=64)
    check_length(cfg, 1024)  # 96 + 4 * 129 = 612 fits
    with pytest.raises(ValueError, match="612 tokens"):
        check_length(cfg, 512)


def test_config_rejects_bad_values(tmp_path):
    with pytest.raises(ValueError, match="group_size"):
        EpisodeConfig(model="m", group_size=1)
    with pytest.raises(ValueError, match="starts"):
        EpisodeConfig(model="m", starts="nowhere.jsonl")


def test_pivot_train_episodes_cli_runs_end_to_end(tiny_policy, tmp_path):
    from typer.testing import CliRunner

    from pivot_cli import app

    out = tmp_path / "cli"
    sets = [
        "starts_per_step=1",  # one group: the CLI path, not the maths, is under test here
        "group_size=2",  # the smallest group
        "max_turns=1",  # one agent turn per episode
        "max_new_tokens=8",  # a few tokens: cheap on 2 cores
        f"max_prompt_tokens={tiny_policy.max_prompt_tokens}",  # the tiny policy's own cuts
        f"max_history_messages={tiny_policy.max_history_messages}",
    ]
    args = ["train", "--episodes", "--model", str(tiny_policy.path), "--steps", "1", "--out", str(out), "--json"]
    result = CliRunner().invoke(app, args + [a for s in sets for a in ("--set", s)])
    assert result.exit_code == 0, result.output
    assert (out / "final" / "model.safetensors").is_file() and (out / "metrics.jsonl").is_file()
    assert '"rollout/turns_mean": 1.0' in result.output
