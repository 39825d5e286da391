"""A thin GRPO trainer over pivot envs, readable top to bottom (docs: docs/training.md).

One step: draw P pivots -> sample G completions each with the generation backend -> score each
group through the env's verifier chain -> group-normalized advantages -> clipped importance-ratio
loss with a k3 KL penalty to the frozen reference, over completion tokens only -> optimizer step
-> one `log_metrics` call. The maths lives in `trainers/_advantages.py` and `trainers/_losses.py`;
this file wires it to a model, an env and a backend; the config is `trainers/grpo_config.py`,
the batch `trainers/_batch.py`.

Episode mode (`--set episodes=true`, `GRPOConfig.episode`, docs/episodes.md) changes only what a group is: G whole
episodes from one start in an episode env, one outcome reward each, every agent token of an
episode its "completion" with the observation tokens masked. The rollout strategy object
(`PivotGroups` here, `trainers.episodes.EpisodeGroups`) makes the groups; drawing, advantages,
loss, optimizer, checkpoints and logging are this file's, shared by both modes.
"""

from __future__ import annotations

import contextlib
import copy
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Protocol

import gymnasium as gym
import numpy as np
import torch

import pivot_envs  # noqa: F401  (registers the pivot/* env ids)
from pivot_core import Pivot, load_pivots
from pivot_envs import ScoringEnv
from trainers._advantages import ADVANTAGES, decided_advantages, zero_variance_groups
from trainers._batch import ScoredBatch, completion_logprobs, encode_prompt, pad_batch
from trainers._losses import LOSSES, LossTerms, batch_denominator, masked_mean
from trainers.backends._base import EncodingBackend, Generation, GenerationBackend, SamplingParams
from trainers.episodes import EpisodeGroups
from trainers.grpo_config import EPISODE_ENVS, GRPOConfig
from trainers.settings import StageSettings

__all__ = [
    "EPISODE_ENVS",
    "GRPOConfig",
    "GRPOTrainer",
    "PivotGroups",
    "Rollout",
    "make_backend",
    "make_env",
    "zero_variance_groups",
]


# ----------------------------------------------------------------------------------------------
# Setup helpers
# ----------------------------------------------------------------------------------------------


def make_env(cfg: GRPOConfig, pivot_file: str | None) -> gym.Env:
    """The scoring env over `pivot_file` (the env's bundled pivots when None).

    With `cfg.reward_cache`, verdicts are read from and written to that reward-cache file.
    """
    kwargs: dict[str, Any] = {}
    if cfg.reward_cache:
        kwargs["reward_cache"] = cfg.reward_cache
    if pivot_file is not None:
        kwargs["pivots"] = list(load_pivots(pivot_file))
    if cfg.verifiers is not None:
        kwargs["verifiers"] = list(cfg.verifiers)
    return gym.make(cfg.env_id, **kwargs)


def load_policy(cfg: GRPOConfig) -> tuple[Any, Any, Any]:
    """Policy, reference (None when beta == 0 or under LoRA) and tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(cfg.seed)
    tokenizer = AutoTokenizer.from_pretrained(cfg.model)
    policy = AutoModelForCausalLM.from_pretrained(cfg.model, dtype=torch.float32).to(cfg.device)
    ref = None
    if cfg.lora_rank is not None:
        from peft import LoraConfig, get_peft_model

        lora = LoraConfig(r=cfg.lora_rank, lora_alpha=2 * cfg.lora_rank, target_modules="all-linear")
        policy = get_peft_model(policy, lora)  # the reference is the base model, adapters disabled
    elif cfg.objective.beta > 0:
        ref = copy.deepcopy(policy).eval().requires_grad_(False)
    return policy, ref, tokenizer


def make_backend(cfg: GRPOConfig, policy: Any, tokenizer: Any) -> Any:
    """The generation backend, colocated with the policy (shares its weights: no sync needed)."""
    from trainers.backends._transformers import TransformersBackend, TransformersConfig

    tcfg = TransformersConfig(
        model=cfg.model,
        device=cfg.device,
        max_prompt_tokens=cfg.max_prompt_tokens,
        max_history_messages=cfg.max_history_messages,
        batch_size=cfg.pivots_per_step,
    )
    return TransformersBackend(tcfg, model=policy, tokenizer=tokenizer)


class MetricsLog:
    """Appends one JSON line per step to `metrics.jsonl`; mirrors to TensorBoard when installed."""

    def __init__(self, output_dir: Path) -> None:
        output_dir.mkdir(parents=True, exist_ok=True)
        self.path = output_dir / "metrics.jsonl"
        try:
            from torch.utils.tensorboard import SummaryWriter

            self.tb: Any = SummaryWriter(str(output_dir / "tb"))
        except ImportError:  # tensorboard is optional
            self.tb = None

    def log_hparams(self, cfg: GRPOConfig) -> None:
        """Record the config once, at the start."""
        (self.path.parent / "config.json").write_text(json.dumps(asdict(cfg), indent=2))

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        """One line `{"step": n, name: value, ...}`."""
        with self.path.open("a") as f:
            f.write(json.dumps({"step": step, **metrics}) + "\n")
        if self.tb is not None:
            for k, v in metrics.items():
                self.tb.add_scalar(k, v, step)


# ----------------------------------------------------------------------------------------------
# Rollout strategies: what one group is
# ----------------------------------------------------------------------------------------------


class Rollout(Protocol):
    """How a step turns P drawn starts into a scored batch (`PivotGroups`, `trainers.episodes.EpisodeGroups`)."""

    starts: Sequence[Pivot]
    """The pool each step draws its P starts from."""

    def generate(self, starts: Sequence[Pivot], seed: int) -> list[list[Any]]:
        """G rollouts per start."""
        ...

    def score(self, starts: Sequence[Pivot], groups: Sequence[Sequence[Any]]) -> ScoredBatch:
        """Rewards, advantages and token ids of the groups."""
        ...


class PivotGroups:
    """PivotRL's rollout: G completions sampled at each pivot, each scored by the env's verifier chain.

    Args:
        env: the scoring env whose pivots are the pool and whose chain scores the completions.
        generate: `(pivots, seed) -> G generations per pivot` at the training temperature.
        score: `(env, pivots, groups) -> ScoredBatch`.
    """

    def __init__(
        self,
        env: ScoringEnv,
        generate: Callable[[Sequence[Pivot], int], list[list[Generation]]],
        score: Callable[[ScoringEnv, Sequence[Pivot], Sequence[Sequence[Generation]]], ScoredBatch],
    ) -> None:
        self.env, self._generate, self._score = env, generate, score
        self.starts: Sequence[Pivot] = env.pivots

    def generate(self, starts: Sequence[Pivot], seed: int) -> list[list[Generation]]:
        """G completions per pivot."""
        return self._generate(starts, seed)

    def score(self, starts: Sequence[Pivot], groups: Sequence[Sequence[Generation]]) -> ScoredBatch:
        """Each group through the env's chain."""
        return self._score(self.env, starts, groups)


# ----------------------------------------------------------------------------------------------
# The trainer
# ----------------------------------------------------------------------------------------------


class GRPOTrainer:
    """GRPO on pivot envs, or on whole episodes (episode mode); see the module docstring for one step.

    Args:
        cfg: the run's configuration.
        backend: a generation backend sharing the policy's weights, or one with
            `update_weights(model)` (vLLM); the colocated transformers backend when None. Episode
            mode samples with the policy itself (token in, token out) and takes none.
        env: the env to use instead of `gym.make(cfg.env_id, ...)`: a scoring env, or in episode
            mode an episode env (e.g. one with a user simulator of its own).
    """

    def __init__(
        self, cfg: GRPOConfig, backend: GenerationBackend | None = None, env: gym.Env[Any, Any] | None = None
    ) -> None:
        self.cfg = cfg
        self.policy, self.ref, self.tokenizer = load_policy(cfg)
        self.rollout: Rollout
        self.loss_fn = LOSSES[cfg.objective.loss]  # variants are picked once, here
        self.advantage_fn = ADVANTAGES[cfg.objective.advantage]
        if cfg.episode.enabled:
            if backend is not None:
                raise ValueError("GRPOTrainer: episode mode samples with the policy itself; expected backend=None")
            self.backend = None
            self.rollout = EpisodeGroups(cfg, self.policy, self.tokenizer, self.autocast, self.advantage_fn, env)
            self.env = self.rollout.env
        else:
            self.backend = backend or make_backend(cfg, self.policy, self.tokenizer)
            self.env = env.unwrapped if env is not None else make_env(cfg, cfg.pivots).unwrapped
            self.rollout = PivotGroups(self.env, self.generate, self.score)
        # held-out pivots are always scored with the env's default (functional) chain
        self.eval_env = make_env(replace(cfg, verifiers=None), cfg.eval_pivots).unwrapped if cfg.eval_pivots else None
        params = [p for p in self.policy.parameters() if p.requires_grad]
        # no weight decay: a step with zero advantages and zero KL must leave the weights alone
        self.optimizer = torch.optim.AdamW(params, lr=cfg.objective.learning_rate, weight_decay=0.0)
        self.out = Path(cfg.output_dir)
        self.metrics = MetricsLog(self.out)
        self.step_count = 0
        self.last: dict[str, float] = {}

    # -- one step ---------------------------------------------------------------------------

    def step(self) -> dict[str, float]:
        """One GRPO step; returns the metrics it logged."""
        cfg, t0 = self.cfg, time.perf_counter()

        # ---- GENERATE: G completions at each of P pivots (episode mode: G episodes from each start)
        starts = self.draw_pivots(self.step_count)
        groups = self.rollout.generate(starts, seed=cfg.seed * cfg.rollout_seed_stride + self.step_count)
        t_gen = time.perf_counter()

        # ---- VERIFY: the chain's reward at each pivot (episode mode: each task's outcome), advantages
        batch = self.rollout.score(starts, groups)
        t_ver = time.perf_counter()

        # ---- LOSS + OPTIMIZER: clipped ratio + k3 KL over sampled tokens (observations masked) -
        terms = self.update(batch)
        self.sync_weights()
        t_upd = time.perf_counter()

        # ---- LOG ------------------------------------------------------------------------------
        self.step_count += 1
        metrics = {
            **self.rollout_metrics(batch),
            **terms,
            "perf/time_generate": t_gen - t0,
            "perf/time_verify": t_ver - t_gen,
            "perf/time_update": t_upd - t_ver,
            "perf/tokens_per_s": batch.completion_tokens / max(t_upd - t0, 1e-9),
        }
        if cfg.eval_every and self.step_count % cfg.eval_every == 0:
            metrics.update(self.evaluate() if self.eval_env is not None else {})
            self.save_checkpoint()
        self.metrics.log_metrics(self.step_count, metrics)
        self.last = metrics
        return metrics

    # -- phases -----------------------------------------------------------------------------

    def autocast(self) -> Any:
        """bf16 autocast on GPU when configured; a no-op otherwise."""
        if self.cfg.bf16:
            return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def draw_pivots(self, step: int) -> list[Pivot]:
        """P pivots, without replacement within a step; seeded by (seed, step) so a resume repeats it."""
        rng = np.random.default_rng([self.cfg.seed, step])
        pool = self.rollout.starts
        idx = rng.choice(len(pool), size=min(self.cfg.pivots_per_step, len(pool)), replace=False)
        return [pool[int(i)] for i in idx]

    def generate(self, pivots: Sequence[Pivot], seed: int, temperature: float | None = None) -> list[list[Generation]]:
        """G sampled completions per pivot from the current policy."""
        params = SamplingParams(
            max_new_tokens=self.cfg.max_new_tokens,
            seed=seed,
            temperature=self.cfg.temperature if temperature is None else temperature,
        )
        self.policy.eval()
        with self.autocast():
            return self.backend.generate(list(pivots), self.cfg.group_size, params)

    def score(self, env: ScoringEnv, pivots: Sequence[Pivot], groups: Sequence[Sequence[Generation]]) -> ScoredBatch:
        """Verify every group at its pivot (one batched chain call per group) and compute advantages.

        A reward resting on a verifier error is no evidence about its completion: its advantage is
        0 and it does not move its group's baseline (`decided_advantages`).
        """
        rewards, accepts, decided, accepted = [], [], [], {}
        for pivot, group in zip(pivots, groups, strict=True):
            results = env.score(pivot, [g.text for g in group])
            rewards.append([r.reward for r in results])
            accepts.append([float(r.accepted) for r in results])
            decided.append([r.error is None for r in results])
            for r in results:
                for name, verdict in r.verdicts.items():
                    accepted.setdefault(name, []).append(float(verdict.accepted))
        reward_t, decided_t = torch.tensor(rewards, dtype=torch.float32), torch.tensor(decided)
        prompt_ids = tuple(tuple(self.encode(p)) for p in pivots)
        return ScoredBatch(
            pivot_ids=tuple(p.id for p in pivots),
            prompt_ids=tuple(prompt_ids[i] for i, group in enumerate(groups) for _ in group),
            completion_ids=tuple(tuple(g.token_ids) for group in groups for g in group),
            rewards=reward_t,
            accepted=torch.tensor(accepts, dtype=torch.float32),
            advantages=decided_advantages(
                self.advantage_fn, reward_t, decided_t, self.cfg.objective.advantage_eps
            ).flatten(),
            acceptance={k: sum(v) / len(v) for k, v in sorted(accepted.items())},
            verifier_errors=int((~decided_t).sum()),
        )

    def encode(self, pivot: Pivot) -> list[int]:
        """Prompt token ids as the backend saw them (its own `encode`, else the same cuts here)."""
        if isinstance(self.backend, EncodingBackend):
            return self.backend.encode(pivot)
        return encode_prompt(self.tokenizer, pivot, self.cfg)

    def update(self, batch: ScoredBatch) -> dict[str, float]:
        """`epochs_per_batch` passes of `grad_accum` micro-batches; returns loss metrics."""
        cfg, obj, dev = self.cfg, self.cfg.objective, self.cfg.device
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        tensors = pad_batch(batch.prompt_ids, batch.completion_ids, pad, dev, batch.completion_masks)
        advantages = batch.advantages.to(dev)
        with torch.no_grad(), self.autocast():
            # one pass per batch: the weights have not moved yet, so old == current (ratio 1)
            old_logp = self.logprobs(self.policy, tensors)[0] if obj.epochs_per_batch > 1 else None
            ref_logp = self.reference_logprobs(tensors)
        # a pool smaller than P gives a smaller batch: split what was drawn, not P * G
        n = len(batch.completion_ids)
        chunks = np.array_split(np.arange(n), min(obj.grad_accum, n))
        # every chunk divides by the whole batch's denominator, so the chunk losses add up to the batch's loss
        denominator = batch_denominator(obj.loss, tensors["completion_mask"], cfg.completion_budget)
        sums: dict[str, float] = {}
        self.policy.train()
        for _ in range(obj.epochs_per_batch):
            self.optimizer.zero_grad(set_to_none=True)
            for idx in chunks:
                sel = torch.as_tensor(idx, device=dev)
                micro = {k: v[sel] for k, v in tensors.items()}
                with self.autocast():
                    logp, entropy = self.logprobs(self.policy, micro)
                old = logp.detach() if old_logp is None else old_logp[sel]
                ref = None if ref_logp is None else ref_logp[sel]
                terms: LossTerms = self.loss_fn(
                    logp,
                    old,
                    ref,
                    advantages[sel],
                    micro["completion_mask"],
                    clip_low=obj.clip_eps,
                    clip_high=obj.clip_eps,
                    beta=obj.beta,
                    denominator=denominator,
                    max_tokens=cfg.completion_budget,
                )
                terms.loss.backward()
                # loss and policy terms add up over chunks; the token means are averaged over them
                for k, v, share in (
                    ("loss/total", terms.loss, 1.0),
                    ("loss/policy", terms.policy, 1.0),
                    ("loss/kl", terms.kl, 1.0 / len(chunks)),
                    ("loss/clip_fraction", terms.clip_fraction, 1.0 / len(chunks)),
                    ("loss/entropy", masked_mean(entropy, micro["completion_mask"]), 1.0 / len(chunks)),
                ):
                    sums[k] = sums.get(k, 0.0) + float(v.detach()) * share / obj.epochs_per_batch
            params = [p for p in self.policy.parameters() if p.requires_grad]
            sums["loss/grad_norm"] = (
                float(torch.nn.utils.clip_grad_norm_(params, obj.max_grad_norm)) / obj.epochs_per_batch
            )
            self.optimizer.step()
        return sums

    def logprobs(self, model: Any, tensors: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """`completion_logprobs` at the rollout temperature (the distribution the tokens came from)."""
        return completion_logprobs(model, tensors, self.cfg.temperature)

    def reference_logprobs(self, tensors: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """Completion log-probs under the frozen reference (the base model when training LoRA)."""
        if self.cfg.objective.beta == 0:
            return None
        if self.ref is not None:
            return self.logprobs(self.ref, tensors)[0]
        with self.policy.disable_adapter():
            return self.logprobs(self.policy, tensors)[0]

    def sync_weights(self) -> None:
        """Hand the updated weights to a non-colocated engine (vLLM); shared-weight backends need nothing."""
        update = getattr(self.backend, "update_weights", None)
        if callable(update):
            update(self.policy)

    def rollout_metrics(self, batch: ScoredBatch) -> dict[str, float]:
        """Reward statistics of a scored batch (slash-namespaced)."""
        r = batch.rewards
        out = {
            "rollout/reward_mean": float(r.mean()),
            # the within-group std is what GRPO learns from: 0 means no signal (the paper's Fig. 3)
            "rollout/reward_std": float(r.std(dim=1).mean()),
            "rollout/zero_var_share": float(zero_variance_groups(r).float().mean()),
            "rollout/completion_tokens_mean": batch.completion_tokens / r.numel(),
            "rollout/verifier_errors": float(batch.verifier_errors),
        }
        out.update({f"reward/{name}/mean": v for name, v in batch.acceptance.items()})
        out.update(batch.stats)
        return out

    # -- evaluation, checkpoints, the loop ----------------------------------------------------

    def evaluate(self) -> dict[str, float]:
        """Held-out acceptance: G samples per held-out pivot at the training temperature."""
        assert self.eval_env is not None
        pivots = list(self.eval_env.pivots)
        groups = self.generate(pivots, seed=self.cfg.seed + self.cfg.eval_seed_offset)
        batch = self.score(self.eval_env, pivots, groups)
        return {
            "eval/accept": float(batch.accepted.mean()),
            "eval/zero_var_share": float(zero_variance_groups(batch.rewards).float().mean()),
        }

    def save_checkpoint(self) -> Path:
        """`checkpoint.pt`: trainable weights, optimizer state and the step count (resume with `resume()`)."""
        path = self.out / "checkpoint.pt"
        trainable = {k: v for k, v in self.policy.state_dict().items()}
        torch.save({"step": self.step_count, "model": trainable, "optimizer": self.optimizer.state_dict()}, path)
        return path

    def resume(self) -> int:
        """Load `checkpoint.pt` when present; returns the step to continue from."""
        path = self.out / "checkpoint.pt"
        if path.exists():
            state = torch.load(path, map_location=self.cfg.device, weights_only=True)
            self.policy.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
            self.step_count = int(state["step"])
        return self.step_count

    def train(self, on_step: Callable[[int, dict[str, float]], None] | None = None) -> dict[str, float]:
        """Run until `cfg.steps`, evaluate at the end, save the final model; returns the last metrics."""
        self.metrics.log_hparams(self.cfg)
        while self.step_count < self.cfg.steps:
            metrics = self.step()
            if on_step is not None:
                on_step(self.step_count, metrics)
        final = dict(self.last)
        if self.eval_env is not None:
            final.update(self.evaluate())
        self.save_checkpoint()
        # a merged copy, so that the trainer's own LoRA policy stays usable after train()
        model = copy.deepcopy(self.policy).merge_and_unload() if self.cfg.lora_rank is not None else self.policy
        model.save_pretrained(self.out / "final")
        self.tokenizer.save_pretrained(self.out / "final")
        self.settings().save(self.out / "final")
        # NaN metrics are returned as they are: the caller's guard must be able to see them
        return final

    def settings(self) -> StageSettings:
        """The stage settings this run sampled with (saved with `final/` for profile, train and eval)."""
        cfg = self.cfg
        return StageSettings(cfg.max_history_messages, cfg.max_prompt_tokens, cfg.max_new_tokens, cfg.temperature)
