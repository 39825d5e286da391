"""GRPO trainer: smoke runs on the tiny local model (STYLE rule 20), resume, LoRA, log-prob consistency."""

import json
import math
from dataclasses import replace

import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

import pivot_envs  # noqa: F401
from pivot_cli import app
from pivot_cli._train import config_from_overrides
from trainers._batch import completion_logprobs, pad_batch
from trainers.backends._base import Generation
from trainers.grpo import GRPOConfig, GRPOTrainer
from verifiers_plugins import Verdict, get_host
from verifiers_plugins.hookspecs import hookimpl

# Shrunk for CPU CI, each on purpose:
SMALL = dict(
    pivots_per_step=2,  # P: two groups are enough to exercise per-group advantages
    group_size=4,  # G: the smallest group that usually mixes rewards on the tiny model
    max_new_tokens=12,  # a few tokens of a tool call: enough to score, short enough for 2 cores
    max_prompt_tokens=96,  # the cut the tiny_policy fixture was fine-tuned with
    max_history_messages=2,  # idem
    learning_rate=1e-3,  # a tiny model needs a large step to move measurably in two steps
)


class Parity:
    """Accepts completions of even length: on random text this mixes rewards inside almost every group."""

    role = "acceptor"

    def verify(self, pivot, action):
        return Verdict.accept("even") if len(action.text) % 2 == 0 else Verdict.reject("odd")


class ParityPlugin:
    @hookimpl
    def register_verifiers(self, register):
        register("parity", Parity)


def _weights(folder):
    return load_file(str(folder / "model.safetensors"))


@pytest.mark.slow
def test_pivot_train_cli_two_steps_changes_parameters(tiny_policy, tmp_path):
    # the test's own verifier guarantees reward variance, so the update must move the weights;
    # the functional chain on an untrained model would mostly give all-0 groups (no gradient)
    get_host().register_plugin(ParityPlugin(), name="parity-test")
    out = tmp_path / "run"
    sets = [f"{k}={v}" for k, v in SMALL.items()] + ["beta=0.04", "verifiers=parity"]
    result = CliRunner().invoke(
        app,
        [
            "train",
            "--model",
            str(tiny_policy.path),
            "--steps",
            "2",
            "--out",
            str(out),
            "--json",
            *sum((["--set", s] for s in sets), []),
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["steps"] == 2
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [1, 2]
    for m in lines:
        assert math.isfinite(m["loss/total"]) and math.isfinite(m["loss/kl"])
        assert 0.0 <= m["rollout/zero_var_share"] <= 1.0
        assert {"perf/time_generate", "perf/time_verify", "perf/time_update", "perf/tokens_per_s"} <= set(m)
        assert any(k.startswith("reward/") and k.endswith("/mean") for k in m)
    assert any(m["rollout/zero_var_share"] < 1.0 for m in lines), "parity rewards should mix within a group"
    assert "reward/parity/mean" in lines[0]
    before, after = _weights(tiny_policy.path), _weights(out / "final")
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert changed, "two GRPO steps with mixed rewards left every parameter unchanged"
    assert json.loads((out / "config.json").read_text())["group_size"] == SMALL["group_size"]


@pytest.mark.slow
def test_checkpoint_resume_and_lora(tiny_policy, tmp_path):
    # eval_every=1 writes a checkpoint after every step; eval_pivots reuses the bundled data file
    # epochs_per_batch=2 and grad_accum=2 take the old-log-prob and micro-batch paths
    cfg = GRPOConfig.from_flat(
        dict(
            model=str(tiny_policy.path),
            steps=1,
            output_dir=str(tmp_path / "r"),
            eval_every=1,
            lora_rank=4,
            beta=0.1,
            epochs_per_batch=2,
            grad_accum=2,
            **SMALL,
        )
    )
    first = GRPOTrainer(cfg)
    lora_before = {k: v.clone() for k, v in first.policy.named_parameters() if v.requires_grad}
    first.train()
    assert (tmp_path / "r" / "checkpoint.pt").exists()
    assert all("lora" in k for k in lora_before)
    # resume: a new trainer with more steps continues from step 1
    second = GRPOTrainer(replace(cfg, steps=2))
    assert second.resume() == 1
    restored = dict(second.policy.named_parameters())
    trained = dict(first.policy.named_parameters())
    assert all(torch.equal(restored[k], trained[k]) for k in lora_before)
    metrics = second.step()
    assert second.step_count == 2 and math.isfinite(metrics["loss/kl"])
    assert 0.0 <= metrics["loss/clip_fraction"] <= 1.0


@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_training_logprobs_match_generation_logprobs(tiny_policy, tmp_path, temperature):
    # at T != 1 the sampler draws from softmax(logits / T): the trainer's log-probs (ratio, KL)
    # must be those of that distribution, not of T = 1
    cfg = GRPOConfig.from_flat(
        dict(model=str(tiny_policy.path), output_dir=str(tmp_path), beta=0.0, temperature=temperature, **SMALL)
    )
    trainer = GRPOTrainer(cfg)
    pivots = trainer.draw_pivots(0)
    groups = trainer.generate(pivots, seed=3)
    batch = trainer.score(trainer.env, pivots, groups)
    tensors = pad_batch(batch.prompt_ids, batch.completion_ids, trainer.tokenizer.pad_token_id, "cpu")
    with torch.no_grad():
        logp, entropy = trainer.logprobs(trainer.policy, tensors)
        if temperature != 1.0:  # the T = 1 log-probs differ: the comparison below can fail
            plain = completion_logprobs(trainer.policy, tensors)[0]
            assert not torch.allclose(plain, logp, atol=2e-3)
    gen = [g for group in groups for g in group]
    for i, g in enumerate(gen):
        n = len(g.token_ids)
        # padding, positions and the completion slice line up with what generate() sampled from
        assert torch.allclose(logp[i, :n], torch.tensor(g.logprobs), atol=2e-3), i
    assert batch.rewards.shape == (2, 4) and batch.advantages.shape == (8,)
    assert (entropy >= 0).all()
    # a pool smaller than P (a tiny D_adv) gives a smaller batch; grad_accum splits what there is
    one = trainer.score(trainer.env, pivots[:1], groups[:1])
    assert math.isfinite(GRPOTrainer.update(trainer, one)["loss/total"])


def test_config_rejects_bad_values_and_parses_overrides():
    with pytest.raises(ValueError, match="expected one of"):
        GRPOConfig.from_flat(dict(model="m", loss="ppo"))
    with pytest.raises(ValueError, match="group_size"):
        GRPOConfig.from_flat(dict(model="m", group_size=1))
    with pytest.raises(ValueError, match="bf16"):
        GRPOConfig.from_flat(dict(model="m", bf16=True))
    cfg = config_from_overrides({"model": "m"}, ["group_size=3", "lora_rank=none", "verifiers=a,b", "bf16=false"])
    assert cfg.group_size == 3 and cfg.lora_rank is None and cfg.verifiers == ("a", "b")
    with pytest.raises(ValueError, match="key=value"):
        config_from_overrides({"model": "m"}, ["nonsense=1"])
    # every knob a run depends on, and no more (episode mode: episodes, dataset, max_turns, max_observation_tokens)
    assert len(GRPOConfig.__dataclass_fields__) <= 34


def test_envs_use_the_configured_reward_cache(tmp_path):
    from trainers.grpo import make_env

    env = make_env(GRPOConfig.from_flat(dict(model="m", reward_cache=str(tmp_path / "rewards.sqlite"))), None).unwrapped
    pivot = env.pivots[0]
    first = env.score(pivot, ["a", "b"])
    again = env.score(pivot, ["a", "b"])
    assert [r.reward for r in first] == [r.reward for r in again]
    assert env.reward_cache.hits >= 2


def test_backend_without_encode_gets_weights_after_every_step(tiny_policy, tmp_path):
    from trainers._vllm_sync import policy_weights
    from trainers.grpo import make_backend

    class Recording:
        """A backend with its own copy of the weights (as vLLM has): no `encode`, takes `update_weights`."""

        def __init__(self, inner):
            self.inner, self.policy_id, self.synced = inner, inner.policy_id, []

        def generate(self, prompts, n, params):
            return self.inner.generate(prompts, n, params)

        def update_weights(self, model):
            self.synced.append(dict(policy_weights(model)))

    cfg = GRPOConfig.from_flat(dict(model=str(tiny_policy.path), output_dir=str(tmp_path), steps=1, **SMALL))
    trainer = GRPOTrainer(cfg)
    trainer.backend = Recording(make_backend(cfg, trainer.policy, trainer.tokenizer))
    pivot = trainer.env.pivots[0]
    # the trainer's own prompt encoding matches the transformers backend's
    assert trainer.encode(pivot) == trainer.backend.inner.encode(pivot)
    trainer.step()
    assert len(trainer.backend.synced) == 1
    synced = trainer.backend.synced[0]
    assert all(torch.equal(synced[k], v) for k, v in trainer.policy.state_dict().items())


def test_train_returns_nan_metrics_so_the_cli_guard_can_fire(tiny_policy, tmp_path):
    # train() used to drop NaN metrics, which made `pivot train`'s non-finite guard dead code
    cfg = GRPOConfig.from_flat(dict(model=str(tiny_policy.path), output_dir=str(tmp_path), steps=1, beta=0.0, **SMALL))
    trainer = GRPOTrainer(cfg)
    trainer.step_count, trainer.last = 1, {"loss/total": float("nan"), "rollout/reward_mean": 0.5}
    final = trainer.train()
    assert math.isnan(final["loss/total"]) and final["rollout/reward_mean"] == 0.5
    # the final model folder carries the stage settings the run sampled with
    from trainers.settings import StageSettings

    assert StageSettings.load(tmp_path / "final") == StageSettings(2, 96, 12, 1.0)


class Undecided:
    """Accepts even-length completions, and cannot decide on those of length 1 mod 4 (an error verdict)."""

    role = "acceptor"

    def verify(self, pivot, action):
        if len(action.text) % 4 == 1:
            raise RuntimeError("backend down")
        return Verdict.accept("even") if len(action.text) % 2 == 0 else Verdict.reject("odd")


class UndecidedPlugin:
    @hookimpl
    def register_verifiers(self, register):
        register("undecided", Undecided)


def test_a_verifier_error_gets_no_advantage_and_leaves_the_baseline_alone(tiny_policy, tmp_path, fresh_host):
    # an error verdict's reward (0) is no evidence: it used to be trained on as a failure
    from trainers._advantages import group_normalized

    fresh_host.register_plugin(UndecidedPlugin(), name="undecided-test")
    cfg = GRPOConfig.from_flat(
        dict(model=str(tiny_policy.path), output_dir=str(tmp_path), verifiers=("undecided",), **SMALL)
    )
    trainer = GRPOTrainer(cfg)
    pivots = trainer.draw_pivots(0)
    texts = [["ab", "abc", "a", "abcd"], ["abcde", "xy", "xyz", "z"]]  # lengths 1 mod 4: "a", "abcde", "z"
    groups = [[Generation(t, [1], [0.0]) for t in group] for group in texts]
    batch = trainer.score(trainer.env, pivots, groups)
    assert batch.verifier_errors == 3
    adv = batch.advantages.view(2, 4)
    assert adv[0, 2] == 0 and adv[1, 0] == 0 and adv[1, 3] == 0
    # the decided ones compare among themselves only
    assert torch.allclose(adv[0, [0, 1, 3]], group_normalized(torch.tensor([[1.0, 0.0, 1.0]]), 1e-4)[0])
    assert torch.allclose(adv[1, [1, 2]], group_normalized(torch.tensor([[1.0, 0.0]]), 1e-4)[0])


def test_config_groups_stay_small_and_set_reaches_every_field():
    from dataclasses import fields

    from trainers.grpo_config import GROUPS, EpisodeConfig, ObjectiveConfig, field_types

    for kind in (GRPOConfig, ObjectiveConfig, EpisodeConfig):
        assert len(fields(kind)) <= 25, kind.__name__
    names = field_types()
    for group, kind in GROUPS.items():
        for f in fields(kind):
            assert f"{group}.{f.name}" in names
    cfg = config_from_overrides(
        {"model": "m"}, ["beta=0", "objective.loss=dapo", "grad_accum=2", "learning_rate=0.5", "max_turns=6"]
    )
    assert (cfg.objective.beta, cfg.objective.loss, cfg.objective.grad_accum) == (0.0, "dapo", 2)
    assert cfg.objective.learning_rate == 0.5 and cfg.episode.max_turns == 6
    # every settable name really lands on a field of that name
    assert cfg.with_values(clip_eps=0.3).objective.clip_eps == 0.3
    with pytest.raises(ValueError, match="expected key=value"):
        config_from_overrides({"model": "m"}, ["objective.nonsense=1"])
    with pytest.raises(ValueError, match="no field"):
        GRPOConfig.from_flat({"model": "m", "objective.nonsense": 1})
