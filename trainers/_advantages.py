"""Group advantages for GRPO: pure tensor functions over a `[groups, group_size]` reward matrix.

Each row of `rewards` holds the G rewards of one pivot's group. A group whose rewards are all
equal carries no learning signal: its advantages are exactly 0 under every estimator here, which
is why PivotRL spends its rollout budget only on pivots with mixed outcomes.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

AdvantageFn = Callable[[torch.Tensor, float], torch.Tensor]
"""`fn(rewards [P, G], eps) -> advantages [P, G]`; every estimator keeps this signature."""


def _check(rewards: torch.Tensor) -> None:
    if rewards.ndim != 2:
        raise ValueError(f"expected rewards of shape [groups, group_size], got shape {tuple(rewards.shape)}")


def group_normalized(rewards: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
    """GRPO's advantage: `(r - mean_group) / (std_group + eps)`.

    The std is the unbiased sample std (as in DeepSeekMath and TRL); a group of one has std 0.

    Args:
        rewards: `[P, G]` rewards, one row per pivot group.
        eps: added to the std so that near-constant groups do not blow up.

    Returns:
        `[P, G]` advantages; rows with equal rewards are all zero.
    """
    _check(rewards)
    mean = rewards.mean(dim=1, keepdim=True)
    std = rewards.std(dim=1, keepdim=True) if rewards.shape[1] > 1 else torch.zeros_like(mean)
    return (rewards - mean) / (std + eps)


def leave_one_out(rewards: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
    """RLOO's advantage: each reward minus the mean of the other G-1 rewards of its group.

    Equal to `G / (G - 1) * (r - mean_group)`; not divided by the std (`eps` is unused and kept for
    the shared signature).

    Args:
        rewards: `[P, G]` rewards with G >= 2.
        eps: unused.

    Returns:
        `[P, G]` advantages.
    """
    _check(rewards)
    g = rewards.shape[1]
    if g < 2:
        raise ValueError(f"leave_one_out needs a group size >= 2, got {g}")
    others = (rewards.sum(dim=1, keepdim=True) - rewards) / (g - 1)
    return rewards - others


def decided_advantages(fn: AdvantageFn, rewards: torch.Tensor, decided: torch.Tensor, eps: float) -> torch.Tensor:
    """`fn`'s advantages among each group's decided rewards only; 0 where the reward was not decided.

    A reward that rests on an error (a verifier, or an episode's live state, could not decide)
    says nothing about its completion: it must neither be pushed down as a failure nor move its
    group's baseline. A group left with fewer than two decided rewards has no comparison (all 0).

    Args:
        fn: an estimator of `ADVANTAGES`.
        rewards: `[P, G]` rewards.
        decided: `[P, G]` bool, False where the reward rests on an error.
        eps: passed to `fn`.

    Returns:
        `[P, G]` advantages; equal to `fn(rewards, eps)` when every reward was decided.
    """
    _check(rewards)
    if decided.shape != rewards.shape:
        raise ValueError(f"expected decided of shape {tuple(rewards.shape)}, got {tuple(decided.shape)}")
    if bool(decided.all()):
        return fn(rewards, eps)
    out = torch.zeros_like(rewards)
    for i in range(rewards.shape[0]):
        keep = decided[i].nonzero().flatten()
        if len(keep) >= 2:
            out[i, keep] = fn(rewards[i, keep].unsqueeze(0), eps)[0]
    return out


def zero_variance_groups(rewards: torch.Tensor) -> torch.Tensor:
    """`[P]` bool: True for groups whose rewards are all equal (no learning signal)."""
    _check(rewards)
    return (rewards.max(dim=1).values - rewards.min(dim=1).values) == 0


ADVANTAGES: dict[str, AdvantageFn] = {
    "group_norm": group_normalized,
    "leave_one_out": leave_one_out,
}
"""Advantage estimators by name; the trainer picks one at construction."""
