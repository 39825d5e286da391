"""`ScoringEnv`: what trainers, the profiler, executors and adapters need of an env (a `PivotEnv` has it all)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import gymnasium as gym

from pivot_core import Pivot
from verifiers_plugins import ChainResult, RewardCache, Scorer


@runtime_checkable
class ScoringEnv(Protocol):
    """An env that holds pivots and turns completions at a pivot into chain results by the one scoring path.

    Attributes:
        pivots: the env's pivots, in order.
        chain: the default scorer (the verifier chain, wrapped by the reward cache when there is one).
        world_chain: the scorer of pivots that carry a tool world, when the domain has one.
        reward_cache: the cache `chain` reads and writes, or None.
    """

    pivots: Sequence[Pivot]
    chain: Scorer
    world_chain: Scorer | None
    reward_cache: RewardCache | None

    def pivot(self, pivot_id: str) -> Pivot:
        """The pivot with that id (`UnknownPivot` with a did-you-mean otherwise)."""
        ...

    def chain_for(self, pivot: Pivot) -> Scorer:
        """The scorer for that pivot (a tool-world pivot may get the world chain)."""
        ...

    def score(self, pivot: Pivot, completions: Sequence[str]) -> list[ChainResult]:
        """Parse each completion once and score the group at `pivot`."""
        ...


def as_scoring_env(env: object) -> ScoringEnv:
    """The pivot env under any Gymnasium wrappers, checked against `ScoringEnv`.

    Raises:
        TypeError: `env` is not a pivot env (the message names what it is).
    """
    inner = env.unwrapped if isinstance(env, gym.Env) else env
    if not isinstance(inner, ScoringEnv):
        raise TypeError(f"expected a pivot env (gym.make('pivot/...')), got {type(inner).__name__}")
    return inner
