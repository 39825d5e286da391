"""GRPOTrainer's episode mode on the tiny local model in the real airline episode env (STYLE rule 20)."""

import math

import pytest
import torch

import pivot_envs  # noqa: F401
from pivot_core._formats import write_pivots
from pivot_envs.episodes import ToolUseEpisodeEnv
from trainers._advantages import decided_advantages, group_normalized
from trainers._batch import pad_batch
from trainers.episodes import (
    Episode,
    check_length,
    episode_batch,
    observation_text,
    run_episode,
    start_ids,
)
from trainers.grpo import GRPOTrainer
from trainers.grpo_config import GRPOConfig, end_to_end_config
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
        episodes=True,
        env_id="pivot/tool-use-episode-v0",
        output_dir=str(tmp_path / "run"),
        max_prompt_tokens=tiny_policy.max_prompt_tokens,  # the cut the tiny policy was fine-tuned with
        max_history_messages=tiny_policy.max_history_messages,  # idem
        max_new_tokens=24,  # a short tool call or sentence: enough to decide the turn, cheap on 2 cores
        max_observation_tokens=48,  # keeps 3-turn episodes inside the tiny model's 512 positions
        temperature=tiny_policy.temperature,  # the temperature at which its samples mix
        learning_rate=1e-3,  # a tiny model needs a large step to move measurably in one step
    )
    return GRPOConfig.from_flat(dict(**{**fields, **overrides}))


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
    env = ToolUseEpisodeEnv(max_turns=cfg.episode.max_turns)
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


def test_episode_batch_masks_observations_in_the_loss_tensors():
    # prompt (5, 6), turn 7, observation 8, turn 9 | prompt (5,), turns 6 7 with no observation between
    e1 = Episode("a", (5, 6, 7, 8, 9), (0, 0, 1, 0, 1), 1.0, 2, prompt_length=2)
    e2 = Episode("a", (5, 6, 7), (0, 1, 1), 0.0, 1, prompt_length=1)
    batch = episode_batch([[e1, e2]], group_normalized, 1e-4)
    assert batch.completion_ids == ((7, 8, 9), (6, 7)) and batch.completion_tokens == 4
    tensors = pad_batch(batch.prompt_ids, batch.completion_ids, 0, "cpu", batch.completion_masks)
    # left-padded prompts, right-padded completions: the loss sees the sampled tokens only
    assert tensors["input_ids"].tolist() == [[5, 6, 7, 8, 9], [0, 5, 6, 7, 0]]
    assert tensors["completion_mask"].tolist() == [[1, 0, 1], [1, 1, 0]]
    assert tensors["attention_mask"].tolist() == [[1, 1, 1, 1, 1], [0, 1, 1, 1, 0]]
    assert batch.advantages[0] > 0 > batch.advantages[1]
    with pytest.raises(ValueError, match="mask"):
        pad_batch(batch.prompt_ids, batch.completion_ids, 0, "cpu", ((1, 0), (1, 1)))


def test_an_undecided_outcome_gets_no_advantage_and_leaves_the_baseline_alone():
    ok, failed = (Episode("a", (1, 2), (0, 1), r, 1, prompt_length=1) for r in (1.0, 0.0))
    broken = Episode("a", (1, 2), (0, 1), 0.0, 1, prompt_length=1, outcome={"error": "user simulator: HTTP 500"})
    batch = episode_batch([[ok, failed, broken]], group_normalized, 1e-4)
    expected = group_normalized(torch.tensor([[1.0, 0.0]]), 1e-4)[0]
    assert torch.allclose(batch.advantages[:2], expected) and batch.advantages[2] == 0.0
    assert batch.verifier_errors == 1
    # a group left with one decided reward has nothing to compare against
    lone = episode_batch([[ok, broken]], group_normalized, 1e-4)
    assert lone.advantages.tolist() == [0.0, 0.0]
    # all decided: the estimator itself, untouched
    rewards = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    assert torch.equal(
        decided_advantages(group_normalized, rewards, torch.ones(2, 3, dtype=torch.bool), 1e-4),
        group_normalized(rewards, 1e-4),
    )


@pytest.mark.parametrize("loss", ["grpo", "dr_grpo"])  # dr_grpo needs the episode's token budget as its constant
def test_episode_grpo_step_changes_parameters_on_a_mixed_group(tiny_policy, tmp_path, fresh_host, loss):
    fresh_host.register_plugin(ParityUserPlugin(), name="parity-user")
    env = ToolUseEpisodeEnv(max_turns=1, user_simulator="parity")
    starts = tmp_path / "start.jsonl"
    write_pivots([env.pivot(LAST_TURN)], starts)
    cfg = small(
        tiny_policy, tmp_path, pivots=str(starts), pivots_per_step=1, group_size=6, max_turns=1, steps=1, loss=loss
    )
    trainer = GRPOTrainer(cfg, env=env)
    assert [p.id for p in trainer.rollout.starts] == [LAST_TURN]
    before = {k: v.detach().clone() for k, v in trainer.policy.named_parameters()}
    metrics = trainer.step()
    assert metrics["rollout/zero_var_share"] == 0.0, f"the group did not mix outcomes: {metrics}"
    assert torch.isfinite(torch.tensor(metrics["loss/total"]))
    changed = [k for k, v in trainer.policy.named_parameters() if not torch.equal(v, before[k])]
    assert changed, "a step on a mixed group must move the weights"
    assert 0.0 < metrics["rollout/agent_token_share"] < 1.0
    assert metrics["rollout/turns_mean"] == 1.0 and metrics["rollout/verifier_errors"] == 0.0


def test_episode_mode_step_trains_on_sampled_tokens_only(tiny_policy, tmp_path, fresh_host):
    # three-turn episodes: the loss tensors of a real step hold 1 on each sampled turn, 0 on every observation
    fresh_host.register_plugin(ParityUserPlugin(), name="parity-user")
    env = ToolUseEpisodeEnv(max_turns=3, user_simulator="parity")
    every = tmp_path / "every.jsonl"
    write_pivots(env.pivots, every)
    cfg = small(tiny_policy, tmp_path, pivots=str(every), pivots_per_step=2, group_size=2, max_turns=3, steps=1)
    trainer = GRPOTrainer(cfg, env=env)
    assert len(trainer.rollout.starts) == len(env.pivots)
    starts = trainer.draw_pivots(0)
    groups = trainer.rollout.generate(starts, seed=1)
    batch = trainer.rollout.score(starts, groups)
    tensors = pad_batch(batch.prompt_ids, batch.completion_ids, 0, "cpu", batch.completion_masks)
    episodes = [e for g in groups for e in g]
    assert any(e.turns > 1 for e in episodes), "no episode had an observation between two turns"
    for row, e in zip(tensors["completion_mask"].tolist(), episodes, strict=True):
        after_prompt = runs(list(e.agent_mask[e.prompt_length :]))
        assert [v for v, *_ in after_prompt][::2] == [1] * e.turns  # turn, observation, turn, ...
        for value, a, b in after_prompt:
            assert row[a:b] == [value] * (b - a)
        assert sum(row) == e.generated_tokens
    assert batch.completion_tokens == sum(e.generated_tokens for e in episodes)
    assert math.isfinite(trainer.update(batch)["loss/total"])


def test_budgets_past_the_models_positions_are_refused():
    cfg = GRPOConfig.from_flat(
        dict(
            model="m",
            episodes=True,
            env_id="pivot/tool-use-episode-v0",
            max_prompt_tokens=96,
            max_turns=4,
            max_new_tokens=64,
            max_observation_tokens=64,
        )
    )
    check_length(cfg, 1024)  # 96 + 4 * 129 = 612 fits
    with pytest.raises(ValueError, match="612 tokens"):
        check_length(cfg, 512)


def test_config_rejects_bad_values(tmp_path):
    mode = dict(model="m", episodes=True, env_id="pivot/tool-use-episode-v0")
    with pytest.raises(ValueError, match="group_size"):
        GRPOConfig.from_flat(dict(**mode, group_size=1))
    with pytest.raises(ValueError, match="pivots"):
        GRPOConfig.from_flat(dict(**mode, pivots="nowhere.jsonl"))
    with pytest.raises(ValueError, match="tool-use-episode-v0"):
        GRPOConfig.from_flat(dict(model="m", episodes=True))  # the pivot env: the error names its episode env
    for name, value in (("verifiers", ("exact_match",)), ("reward_cache", "c.sqlite"), ("eval_pivots", "e.jsonl")):
        with pytest.raises(ValueError, match=name):
            GRPOConfig.from_flat(dict(**mode, **{name: value}))
    with pytest.raises(ValueError, match="dataset"):
        GRPOConfig.from_flat(dict(model="m", dataset="d.jsonl"))  # pivot mode has no episode dataset


def test_end_to_end_starts_must_be_initial_states(tmp_path):
    env = ToolUseEpisodeEnv()
    firsts = start_ids(env)
    assert firsts and all(not any(m.role == "assistant" for m in env.pivot(i).history) for i in firsts)
    late = tmp_path / "late.jsonl"  # a split that kept only later pivots of each trajectory
    write_pivots([p for p in env.pivots if p.id not in set(firsts)], late)
    with pytest.raises(ValueError, match="initial state"):
        start_ids(ToolUseEpisodeEnv(late))


def test_end_to_end_arm_keeps_the_pivot_arms_budget(tmp_path):
    arm = GRPOConfig.from_flat(
        dict(model="m", pivots="d_adv.jsonl", verifiers=("exact_match",), steps=5, pivots_per_step=4, group_size=8)
    )
    e2e = end_to_end_config(arm, "train.jsonl", str(tmp_path / "e2e"), max_turns=6)
    assert (e2e.episode.enabled, e2e.env_id, e2e.episode.dataset) == (True, "pivot/tool-use-episode-v0", "train.jsonl")
    assert e2e.pivots is None  # each training task's first pivot: its initial state
    assert (e2e.steps, e2e.pivots_per_step, e2e.group_size, e2e.episode.max_turns) == (5, 4, 8, 6)
    assert e2e.verifiers is None and e2e.completion_budget == 6 * arm.max_new_tokens
    with pytest.raises(ValueError, match="pivot-mode"):
        end_to_end_config(e2e, "train.jsonl", str(tmp_path))


def test_run_e2e_arm_trains_from_each_tasks_initial_state(tiny_policy, tmp_path):
    from pivot_envs._env import bundled_paths

    arm = GRPOConfig.from_flat(
        dict(  # a PivotRL arm as the demo builds one, shrunk: one group of two, one step
            model=str(tiny_policy.path),
            output_dir=str(tmp_path / "pivotrl"),
            pivots_per_step=1,
            group_size=2,
            max_new_tokens=8,
            max_prompt_tokens=tiny_policy.max_prompt_tokens,
            max_history_messages=tiny_policy.max_history_messages,
            steps=1,
        )
    )
    data = str(bundled_paths(["tool_use_tau_airline_exec.jsonl"])[0])
    seen = []
    e2e = end_to_end_config(arm, data, str(tmp_path / "e2e"), max_turns=1)
    metrics = GRPOTrainer(e2e).train(lambda step, m: seen.append(step))
    assert seen == [1] and metrics["rollout/turns_mean"] == 1.0
    assert (tmp_path / "e2e" / "final" / "model.safetensors").is_file()


def test_pivot_train_episodes_cli_runs_end_to_end(tiny_policy, tmp_path):
    from typer.testing import CliRunner

    from pivot_cli import app

    out = tmp_path / "cli"
    sets = [
        "pivots_per_step=1",  # one group: the CLI path, not the maths, is under test here
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
