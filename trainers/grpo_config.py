"""What a GRPO run is configured with: `GRPOConfig`, its objective and its episode mode.

The objective (loss, advantage, clipping, KL, optimizer) and episode mode are groups of their
own, so that no config class grows past a screen. `pivot train --set` reaches every field by its
own name (`--set beta=0`, `--set max_turns=6`) or its dotted path (`--set objective.beta=0`):
see `GRPOConfig.from_flat`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from trainers._advantages import ADVANTAGES
from trainers._losses import LOSSES

EPISODE_ENVS = {"pivot/tool-use-v0": "pivot/tool-use-episode-v0", "pivot/terminal-v0": "pivot/terminal-episode-v0"}
"""Pivot env id -> the episode env over the same tasks (`pivot train --episodes` maps its `--env` through it)."""


@dataclass(frozen=True)
class ObjectiveConfig:
    """The loss, the advantage estimator and the optimizer step."""

    loss: str = "grpo"
    """Loss aggregation, a key of `LOSSES`: grpo | dapo | dr_grpo."""
    advantage: str = "group_norm"
    """Advantage estimator, a key of `ADVANTAGES`: group_norm | leave_one_out."""
    clip_eps: float = 0.2
    """PPO clip range for the importance ratio (symmetric)."""
    max_grad_norm: float = 1.0
    """Gradients are clipped to this global norm before each optimizer step."""
    advantage_eps: float = 1e-4
    """Added to a group's reward std by the normalised advantage, so that near-constant groups stay finite."""
    beta: float = 0.04
    """Weight of the k3 KL penalty to the frozen reference (0: no reference model is kept)."""
    learning_rate: float = 1e-5
    """AdamW learning rate."""
    epochs_per_batch: int = 1
    """Optimizer passes over each rollout batch (mu in the GRPO paper); > 1 makes clipping matter."""
    grad_accum: int = 1
    """Micro-batches per optimizer step: the P*G sequences are split into this many chunks."""

    def __post_init__(self) -> None:
        if self.loss not in LOSSES:
            raise ValueError(f"GRPOConfig.loss: expected one of {sorted(LOSSES)}, got {self.loss!r}")
        if self.advantage not in ADVANTAGES:
            raise ValueError(f"GRPOConfig.advantage: expected one of {sorted(ADVANTAGES)}, got {self.advantage!r}")
        for name in ("epochs_per_batch", "grad_accum"):
            if getattr(self, name) < 1:
                raise ValueError(f"GRPOConfig.{name}: expected >= 1, got {getattr(self, name)}")


@dataclass(frozen=True)
class EpisodeConfig:
    """Episode mode: end-to-end RL, or episodes from D_adv pivots (docs/episodes.md)."""

    enabled: bool = False
    """A group is G whole episodes from one start in the episode env `env_id`, one outcome each."""
    dataset: str | None = None
    """The episode env's trajectory or pivot file (its bundled sample when None)."""
    max_turns: int = 4
    """The turn budget, agent turns per episode (the env also truncates at the task's time limit)."""
    max_observation_tokens: int = 128
    """Each observation is cut to its first N tokens (sampling and training see the cut one)."""

    def __post_init__(self) -> None:
        if not self.enabled and self.dataset is not None:
            raise ValueError(f"GRPOConfig.dataset: episode mode only (episodes=True), got {self.dataset!r}")
        for name in ("max_turns", "max_observation_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"GRPOConfig.{name}: expected >= 1, got {getattr(self, name)}")


@dataclass(frozen=True)
class GRPOConfig:
    """Everything a GRPO run needs; the `pivot train` CLI parses this same dataclass."""

    # -- model and data ---------------------------------------------------------------------
    model: str
    """Folder of the policy (a transformers causal LM with a chat template); also the reference."""
    pivots: str | None = None
    """Pivot file to train on (e.g. D_adv from `pivot select`); the env's bundled pivots when None.

    In episode mode: the pivots episodes start from (each one a pivot of `episode.dataset`, e.g.
    D_adv); each trajectory's first pivot when None, which is end-to-end RL."""
    eval_pivots: str | None = None
    """Held-out pivots scored every `eval_every` steps and at the end, always with the env's default chain."""
    env_id: str = "pivot/tool-use-v0"
    """Env whose parser and verifier chain score completions."""
    verifiers: tuple[str, ...] | None = None
    """Verifier names overriding the env's default chain (e.g. `("exact_match",)` for a strict reward)."""
    output_dir: str = "runs/grpo"
    """Where metrics.jsonl, checkpoints and the final model go."""

    # -- rollout ----------------------------------------------------------------------------
    pivots_per_step: int = 4
    """P: pivots drawn per step."""
    group_size: int = 8
    """G: completions sampled per pivot (a GRPO group)."""
    max_new_tokens: int = 96
    """Longest completion, in tokens."""
    max_prompt_tokens: int | None = 256
    """Prompts are cut to their last N tokens (None keeps all); match the SFT run's cut."""
    max_history_messages: int | None = 4
    """Prompts keep the system message and the last N history messages (None keeps all)."""
    temperature: float = 1.0
    """Sampling temperature for training rollouts and evaluation."""

    # -- run --------------------------------------------------------------------------------
    steps: int = 20
    """Optimizer steps (rollout batches) to run."""
    seed: int = 0
    """Seeds pivot draws, sampling and initialization of LoRA weights."""
    rollout_seed_stride: int = 1_000_003
    """Step t samples with seed `seed * rollout_seed_stride + t`: each run's steps draw apart from another seed's."""
    eval_seed_offset: int = 7_777_777
    """Held-out evaluation samples with seed `seed + eval_seed_offset`, apart from every training step."""
    reward_cache: str | None = None
    """The reward-cache SQLite file the scoring envs read and write (None: none; `pivot train` passes $PIVOT_CACHE)."""
    device: str = "cpu"
    """torch device: cpu, cuda, cuda:1."""
    bf16: bool = False
    """bfloat16 autocast for forward passes (GPU only: bf16 is slower on CPU)."""
    lora_rank: int | None = None
    """Train LoRA adapters of this rank (peft) instead of all weights; the reference is the base model."""
    eval_every: int | None = None
    """Every N steps: evaluate on `eval_pivots` and write a resumable checkpoint (None: only at the end)."""

    # -- groups -----------------------------------------------------------------------------
    objective: ObjectiveConfig = field(default_factory=ObjectiveConfig)
    """Loss, advantage estimator, clipping, KL weight and optimizer."""
    episode: EpisodeConfig = field(default_factory=EpisodeConfig)
    """Episode mode and its turn budget."""

    def __post_init__(self) -> None:
        for name in ("pivots_per_step", "group_size", "max_new_tokens", "steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"GRPOConfig.{name}: expected >= 1, got {getattr(self, name)}")
        if self.group_size < 2:
            raise ValueError(
                f"GRPOConfig.group_size: expected >= 2 (advantages compare within a group), got {self.group_size}"
            )
        if self.objective.grad_accum > self.batch_size:
            raise ValueError(
                f"GRPOConfig.grad_accum: expected <= pivots_per_step * group_size = {self.batch_size}, "
                f"got {self.objective.grad_accum}"
            )
        if self.bf16 and not self.device.startswith("cuda"):
            raise ValueError(f"GRPOConfig.bf16: needs a cuda device, got device={self.device!r}")
        if self.verifiers is not None:
            object.__setattr__(self, "verifiers", tuple(self.verifiers))
        if self.episode.enabled:
            self._check_episode_mode()

    def _check_episode_mode(self) -> None:
        if self.env_id in EPISODE_ENVS:
            raise ValueError(
                f"GRPOConfig.env_id: episode mode needs an episode env, got the pivot env {self.env_id!r} "
                f"(its episode env is {EPISODE_ENVS[self.env_id]!r})"
            )
        if self.pivots is not None and not Path(self.pivots).is_file():
            raise ValueError(f"GRPOConfig.pivots: expected a pivot file of starts, got {self.pivots!r}")
        # an episode's reward is the task's own outcome: a verifier chain, its cache and held-out
        # pivot acceptance belong to pivot mode (evaluate the trained model with `pivot eval`)
        for name in ("verifiers", "reward_cache", "eval_pivots"):
            if getattr(self, name) is not None:
                raise ValueError(f"GRPOConfig.{name}: pivot mode only (episode rewards are task outcomes)")

    @property
    def batch_size(self) -> int:
        """Sequences per rollout batch: P * G."""
        return self.pivots_per_step * self.group_size

    @property
    def completion_budget(self) -> int:
        """Most tokens the policy samples per sequence: a completion, or an episode's turns (Dr. GRPO's constant)."""
        return self.max_new_tokens * (self.episode.max_turns if self.episode.enabled else 1)

    @classmethod
    def from_flat(cls, values: Mapping[str, Any]) -> GRPOConfig:
        """A config from one flat mapping: each key a field's own name or its dotted path.

        `{"model": "m", "beta": 0, "episodes": True}` sets `objective.beta` and `episode.enabled`
        (`episodes` is the flag's name on the command line).
        """
        top, groups = _split_flat(values)
        return cls(**top, **{g: GROUPS[g](**v) for g, v in groups.items() if v})

    def with_values(self, **values: Any) -> GRPOConfig:
        """A copy with fields replaced, each named as in `from_flat`."""
        top, groups = _split_flat(values)
        return replace(self, **top, **{g: replace(getattr(self, g), **v) for g, v in groups.items() if v})


def end_to_end_config(pivot_arm: GRPOConfig, dataset: str, output_dir: str, max_turns: int | None = None) -> GRPOConfig:
    """The end-to-end twin of a PivotRL arm: episode GRPO from each training task's initial state.

    Everything but what a group is stays the pivot arm's (model, P, G, steps, sampling,
    objective, seed), so both arms draw the same number of samples, P x G per step: a
    completion at a pivot there, a whole episode (up to `max_turns` turns) here. The episodes'
    turn and token counts are logged (`rollout/turns_mean`, `rollout/generated_tokens`).

    Args:
        pivot_arm: the PivotRL arm's config (pivot mode, e.g. on D_adv).
        dataset: the training tasks' trajectories or pivots (every pivot of each training
            trajectory: the recorded user replays them); each trajectory's first pivot is a start.
        output_dir: where the arm writes.
        max_turns: the turn budget; the pivot arm's `max_turns` field when None.

    Raises:
        ValueError: `pivot_arm` is in episode mode, or its env has no episode env.
    """
    if pivot_arm.episode.enabled:
        raise ValueError("end_to_end_config: expected a pivot-mode arm, got episodes=True")
    if pivot_arm.env_id not in EPISODE_ENVS:
        raise ValueError(f"end_to_end_config: expected an env of {sorted(EPISODE_ENVS)}, got {pivot_arm.env_id!r}")
    episode = EpisodeConfig(
        enabled=True,
        dataset=dataset,
        max_turns=pivot_arm.episode.max_turns if max_turns is None else max_turns,
        max_observation_tokens=pivot_arm.episode.max_observation_tokens,
    )
    return replace(
        pivot_arm,
        episode=episode,
        env_id=EPISODE_ENVS[pivot_arm.env_id],
        pivots=None,
        verifiers=None,
        reward_cache=None,
        eval_pivots=None,
        output_dir=output_dir,
    )


GROUPS: dict[str, type] = {"objective": ObjectiveConfig, "episode": EpisodeConfig}
_ALIASES = {"episodes": ("episode", "enabled")}


def _split_flat(values: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    top: dict[str, Any] = {}
    groups: dict[str, dict[str, Any]] = {name: {} for name in GROUPS}
    for key, value in values.items():
        path = field_path(key)
        if len(path) == 1:
            top[key] = value
        else:
            groups[path[0]][path[1]] = value
    return top, groups


def field_types() -> dict[str, str]:
    """Every settable name -> its type's text: top-level fields, group fields by name and by dotted path."""
    out = {f.name: str(f.type) for f in fields(GRPOConfig) if f.name not in GROUPS}
    for group, kind in GROUPS.items():
        for f in fields(kind):
            out[f"{group}.{f.name}"] = str(f.type)
            out.setdefault(f.name, str(f.type))
    out["episodes"] = "bool"
    out.pop("enabled", None)  # `episodes` is that flag's name
    return out


def field_path(key: str) -> tuple[str, ...]:
    """`("beta",)` -> `("objective", "beta")`; a top-level field stays as it is.

    Raises:
        ValueError: no field has that name.
    """
    if key in _ALIASES:
        return _ALIASES[key]
    if "." in key:
        group, name = key.split(".", 1)
        if group in GROUPS and name in {f.name for f in fields(GROUPS[group])}:
            return group, name
    elif key in {f.name for f in fields(GRPOConfig)} and key not in GROUPS:
        return (key,)
    else:
        for group, kind in GROUPS.items():
            if key in {f.name for f in fields(kind)} and key != "enabled":
                return group, key
    raise ValueError(f"GRPOConfig has no field {key!r}; expected one of {sorted(field_types())}")
