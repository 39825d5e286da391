"""Train / held-out splits of pivots that never put one task (or one trajectory) on both sides.

Pivots of one trajectory share their history, and tau-bench runs several trials of one task
(same user, same reservations, same request): a held-out pivot whose task, or whose trajectory,
also feeds training measures memory, not competence. A split therefore assigns whole groups:
tasks where every pivot names one (`context["task_id"]`), else trajectories. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pivot_core._model import Pivot

SPLIT_BY = ("auto", "task", "trajectory")


@dataclass(frozen=True)
class Split:
    """A split of pivots by group.

    Attributes:
        train: training pivots, in input order.
        heldout: held-out pivots, in input order.
        by: the grouping used ("task" or "trajectory"; "auto" resolved).
        heldout_groups: the held-out group keys, sorted.
        train_groups: the training group keys, sorted.
    """

    train: tuple[Pivot, ...]
    heldout: tuple[Pivot, ...]
    by: str
    heldout_groups: tuple[str, ...]
    train_groups: tuple[str, ...]

    def summary(self) -> dict[str, object]:
        """Counts, JSON-ready."""
        return {
            "by": self.by,
            "train": len(self.train),
            "heldout": len(self.heldout),
            "train_groups": len(self.train_groups),
            "heldout_groups": len(self.heldout_groups),
        }


def trajectory_key(pivot: Pivot) -> str:
    """The trajectory a pivot comes from (`context["trajectory_id"]`, else the id before `#`)."""
    return str(pivot.context.get("trajectory_id") or pivot.id.rsplit("#", 1)[0])


def task_key(pivot: Pivot) -> str | None:
    """The task a pivot's trajectory ran, or None when the pivot names none.

    Task ids are numbers within one benchmark and domain (tau-bench airline task 0 is not retail
    task 0), so the key carries both.
    """
    task = pivot.context.get("task_id")
    if task is None or task == "":
        return None
    benchmark = pivot.context.get("benchmark") or "-"
    domain = pivot.context.get("tau_domain") or pivot.domain
    return f"{benchmark}/{domain}/task{task}"


def group_key(pivot: Pivot, by: str) -> str:
    """The group a pivot is assigned with: its task (`by="task"`) or its trajectory.

    Raises:
        ValueError: `by="task"` and the pivot names no task (its id is in the message).
    """
    if by == "trajectory":
        return trajectory_key(pivot)
    key = task_key(pivot)
    if key is None:
        raise ValueError(f"split --by task: pivot {pivot.id!r} has no context.task_id (use --by trajectory)")
    return key


def resolve_by(pivots: Sequence[Pivot], by: str) -> str:
    """`"auto"` becomes "task" when every pivot names a task, else "trajectory"."""
    if by not in SPLIT_BY:
        raise ValueError(f"split: expected by in {list(SPLIT_BY)}, got {by!r}")
    if by != "auto":
        return by
    return "task" if pivots and all(task_key(p) is not None for p in pivots) else "trajectory"


def split_pivots(pivots: Sequence[Pivot], heldout: float = 0.2, by: str = "auto", seed: int = 0) -> Split:
    """Hold out a share `heldout` of the groups (at least one when there are two or more).

    Groups are sorted by key and shuffled with `seed`, so a split is repeatable and does not
    depend on the input order; the held-out share counts groups, not pivots.

    Args:
        pivots: the pivots to split.
        heldout: share of groups held out, in [0, 1).
        by: "task", "trajectory" or "auto" (task when every pivot names one).
        seed: seeds the shuffle of the groups.

    Raises:
        ValueError: `heldout` outside [0, 1), an unknown `by`, or a pivot without a task under "task".
    """
    if not 0.0 <= heldout < 1.0:
        raise ValueError(f"split: expected a held-out share in [0, 1), got {heldout}")
    by = resolve_by(pivots, by)
    keys = [group_key(p, by) for p in pivots]
    groups = sorted(set(keys))
    order = np.random.default_rng(seed).permutation(len(groups))
    n_held = int(round(heldout * len(groups)))
    if heldout > 0 and len(groups) > 1:
        n_held = min(max(n_held, 1), len(groups) - 1)
    held = {groups[int(i)] for i in order[:n_held]}
    return Split(
        train=tuple(p for p, k in zip(pivots, keys, strict=True) if k not in held),
        heldout=tuple(p for p, k in zip(pivots, keys, strict=True) if k in held),
        by=by,
        heldout_groups=tuple(sorted(held)),
        train_groups=tuple(g for g in groups if g not in held),
    )
