"""Pivot extraction (D_cand) and selection (D_adv): pure functions over the data model."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from pivot_core._history import History
from pivot_core._model import Message, Pivot, Trajectory

SkipTurn = Callable[[Trajectory, int, Message], bool]


def extract_pivots(
    trajectory: Trajectory,
    *,
    successful_only: bool = False,
    min_reward: float = 1.0,
    skip: SkipTurn | None = None,
) -> Iterator[Pivot]:
    """Yield every assistant turn of a trajectory as a candidate pivot.

    Args:
        trajectory: the expert episode.
        successful_only: yield nothing unless `trajectory.reward >= min_reward` (a trajectory
            with no recorded reward counts as successful: demonstrations usually carry none).
        min_reward: the success threshold for `successful_only`.
        skip: predicate `(trajectory, index, message) -> bool`; True drops that turn.

    Yields:
        Pivots with id `"<trajectory id>#<index>"`, history = messages before the turn: a view of
        the trajectory's messages (`History.prefix`), so the pivots of a long chat cost no copies.
    """
    if successful_only and trajectory.reward is not None and trajectory.reward < min_reward:
        return
    for i, msg in enumerate(trajectory.messages):
        if msg.role != "assistant":
            continue
        if not msg.tool_calls and not (msg.content or "").strip():
            continue  # an empty turn demonstrates nothing
        if skip is not None and skip(trajectory, i, msg):
            continue
        ctx = dict(trajectory.context)
        ctx.setdefault("trajectory_id", trajectory.id)
        ctx["turn_index"] = i
        if trajectory.reward is not None:
            ctx.setdefault("trajectory_reward", trajectory.reward)
        if trajectory.source:
            ctx.setdefault("source", trajectory.source)
        yield Pivot(
            id=f"{trajectory.id}#{i}",
            domain=trajectory.domain,
            history=History.prefix(trajectory.messages, i),
            expert=msg,
            tools=trajectory.tools,
            context=ctx,
        )


@dataclass(frozen=True)
class Selection:
    """What `select_pivots` kept and why the others were dropped."""

    kept: list[Pivot]
    dropped: Counter = field(default_factory=Counter)

    def summary(self) -> dict[str, int]:
        """`{"kept": n, "<reason>": n, ...}`."""
        return {"kept": len(self.kept), **dict(self.dropped)}


# Why a group with no usable variance was dropped, by `Profile.outcome` (a mixed group below
# `min_variance` counts as "zero_variance").
_DROP_REASON = {"all_zero": "zero_variance_all_fail", "all_one": "zero_variance_all_pass", "constant": "zero_variance"}


def select_pivots(
    pivots: Iterable[Pivot], lam: float, min_variance: float = 0.0, keep_oracle_readable: bool = False
) -> Selection:
    """Keep profiled pivots with reward variance > `min_variance` and mean < `lam` (D_adv).

    Dropped pivots are counted under one reason each: "oracle_readable" (the task's answer is
    readable by the agent, `context.oracle_readable`: a policy would learn to copy it, so such
    pivots are no training data unless `keep_oracle_readable`), "unprofiled",
    "zero_variance_all_fail", "zero_variance_all_pass", "zero_variance", "mean_at_or_above_lambda".
    """
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"select_pivots: expected lam in [0, 1], got {lam!r}")
    kept: list[Pivot] = []
    dropped: Counter = Counter()
    for p in pivots:
        prof = p.profile
        outcome = "unprofiled" if prof is None else prof.outcome
        if p.context.get("oracle_readable") and not keep_oracle_readable:
            dropped["oracle_readable"] += 1
        elif prof is None or outcome == "unprofiled":
            dropped["unprofiled"] += 1
        elif outcome != "mixed" or prof.variance <= min_variance:
            dropped[_DROP_REASON.get(outcome, "zero_variance")] += 1
        elif prof.mean >= lam:
            dropped["mean_at_or_above_lambda"] += 1
        else:
            kept.append(p)
    return Selection(kept, dropped)
