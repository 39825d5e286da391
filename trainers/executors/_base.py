"""Where verification runs: in this process, or fanned out to workers (Ray).

An executor scores `VerifyTask`s (one pivot and a group of completions each, as a profiler or a
GRPO step produces them) and returns one list of `ChainResult`s per task, in task order. Every
executor builds its envs from the same `EnvSpec`, so a worker scores exactly as the driver's env
would; the in-process executor is the reference the others must equal.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pivot_core import Pivot
from pivot_envs import ScoringEnv, as_scoring_env
from verifiers_plugins import ChainResult


@dataclass(frozen=True)
class EnvSpec:
    """How to build the env whose verifiers score the tasks (picklable: shipped to workers).

    Attributes:
        env_id: a registered id, e.g. `pivot/terminal-v0`.
        kwargs: `gym.make` keyword arguments (dataset path, verifiers, verifier_config, ...).
    """

    env_id: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def make(self) -> ScoringEnv:
        """The unwrapped env."""
        import gymnasium as gym

        return as_scoring_env(gym.make(self.env_id, **dict(self.kwargs)))


@dataclass(frozen=True)
class VerifyTask:
    """One group to score: a pivot and K completions (texts, parsed by the env's parser)."""

    pivot: Pivot
    completions: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "completions", tuple(self.completions))


def score_group(env: ScoringEnv, pivot: Pivot, completions: Sequence[str]) -> list[ChainResult]:
    """The env's one scoring path (reward cache included), for a pivot given by value."""
    return env.score(pivot, completions)


def route_key(pivot: Pivot) -> str:
    """The key that decides which worker scores a pivot.

    Pivots that restore the same sandbox state share a key: the sandbox's own snapshot key
    (image, set-up, user, shell, workdir, env and the replayed history commands), so one worker's
    snapshot cache and warm container pool serve all of them. Any other pivot is keyed by its
    content hash.
    """
    # Plain-data modules of the sandbox: they import no docker.
    from pivot_core import history_commands
    from pivot_sandbox import SandboxError, SandboxSpec

    try:
        spec = SandboxSpec.from_context(pivot.context)
    except SandboxError:  # the verifier reports the bad context; any worker can do that
        spec = None
    if spec is None:
        return "pivot:" + pivot.content_hash()
    return "sandbox:" + spec.key(history_commands(pivot))


def worker_for(key: str, num_workers: int) -> int:
    """A stable worker index for a route key (the same on every host and run)."""
    return int(hashlib.sha256(key.encode()).hexdigest()[:16], 16) % num_workers


class Executor(Protocol):
    """Scores groups of completions; `verify` keeps task order."""

    name: str

    def verify(self, tasks: Sequence[VerifyTask]) -> list[list[ChainResult]]:
        """One result list per task, in task order."""
        ...

    def verify_iter(self, tasks: Sequence[VerifyTask]) -> Iterator[tuple[int, list[ChainResult]]]:
        """`(task index, results)` as they finish (a profiler writes each as it comes)."""
        ...

    def close(self) -> None:
        """Release workers."""
        ...


class InProcessExecutor:
    """Scores every task in this process with one env (the reference behaviour).

    Args:
        spec: the env to build; ignored when `env` is given.
        env: an already built (unwrapped) env to score with.
    """

    name = "in-process"

    def __init__(self, spec: EnvSpec | None = None, *, env: object = None) -> None:
        if env is None and spec is None:
            raise ValueError("InProcessExecutor: expected an EnvSpec or an env, got neither")
        self.env = as_scoring_env(env) if env is not None else spec.make()

    def verify(self, tasks: Sequence[VerifyTask]) -> list[list[ChainResult]]:
        """Score each task in order."""
        return [score_group(self.env, t.pivot, t.completions) for t in tasks]

    def verify_iter(self, tasks: Sequence[VerifyTask]) -> Iterator[tuple[int, list[ChainResult]]]:
        """Score each task in order, yielding as it goes."""
        for i, t in enumerate(tasks):
            yield i, score_group(self.env, t.pivot, t.completions)

    def close(self) -> None:
        """Nothing to release."""


__all__ = [
    "EnvSpec",
    "Executor",
    "InProcessExecutor",
    "VerifyTask",
    "route_key",
    "score_group",
    "worker_for",
]
