"""GRPO policy losses: pure tensor functions over completion tokens.

Every tensor is `[B, T]` over the completion tokens of B sequences (prompt tokens are not in it,
padding is masked out by `mask`), except `advantages`, which is `[B]`. The loss per token is the
clipped importance-ratio objective (PPO) plus `beta` times the k3 estimate of KL(policy || ref).
Variants differ only in how per-token terms are averaged into one number; pick one once with
`LOSSES[name]`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class LossTerms:
    """One loss evaluation.

    Attributes:
        loss: the scalar to backpropagate.
        policy: the clipped policy term alone (detached), aggregated like `loss`.
        kl: masked token mean of the k3 KL estimate (detached).
        clip_fraction: share of completion tokens whose ratio was clipped (detached).
    """

    loss: torch.Tensor
    policy: torch.Tensor
    kl: torch.Tensor
    clip_fraction: torch.Tensor


LossFn = Callable[..., LossTerms]
"""`fn(logp, old_logp, ref_logp, advantages, mask, *, clip_low, clip_high, beta, denominator, max_tokens)`.

`denominator` (optional) is the whole batch's `batch_denominator` when the batch is split into
micro-batches; `max_tokens` (the completion budget) is required by `dr_grpo`.
"""


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of `x` over positions where `mask` is 1 (0 when the mask is empty)."""
    return (x * mask).sum() / mask.sum().clamp(min=1)


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimator of KL(policy || ref): `exp(d) - d - 1` with `d = ref_logp - logp`.

    Unbiased for samples drawn from the policy, always >= 0, and 0 exactly where the two agree.
    """
    d = ref_logp - logp
    return torch.exp(d) - d - 1


def token_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Per-position entropy (nats) of the categorical distribution given by `logits` `[..., V]`."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(dim=-1)


def per_token_terms(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    ref_logp: torch.Tensor | None,
    advantages: torch.Tensor,
    *,
    clip_low: float,
    clip_high: float,
    beta: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Clipped policy term, KL term, and clipped flags per token (`[B, T]` each), before masking.

    Returns:
        `(total, policy, kl, clipped)` where `total = policy + beta * kl`.
    """
    adv = advantages.unsqueeze(1)
    ratio = torch.exp(logp - old_logp)
    unclipped = -adv * ratio
    clipped = -adv * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    policy = torch.maximum(unclipped, clipped)
    # A token counts as clipped when the clamp, not the ratio, set the objective.
    was_clipped = ((ratio < 1.0 - clip_low) & (adv < 0)) | ((ratio > 1.0 + clip_high) & (adv > 0))
    kl = k3_kl(logp, ref_logp) if ref_logp is not None else torch.zeros_like(logp)
    return policy + beta * kl, policy, kl, was_clipped.to(logp.dtype)


@dataclass(frozen=True)
class Aggregation:
    """How one loss variant turns per-token terms into the batch's loss.

    Attributes:
        per_sequence: average each sequence's tokens first, so every sequence weighs the same
            (the original GRPO); otherwise the masked terms are summed over the whole batch.
        denominator: `(mask, max_tokens) -> float`, what the batch's sum is divided by.
    """

    per_sequence: bool
    denominator: Callable[[torch.Tensor, int | None], float]


def _sequences(mask: torch.Tensor, max_tokens: int | None) -> float:
    return float(mask.shape[0])


def _tokens(mask: torch.Tensor, max_tokens: int | None) -> float:
    # each token weighs the same, so long completions are not down-weighted (DAPO)
    return max(float(mask.sum()), 1.0)


def _budget(mask: torch.Tensor, max_tokens: int | None) -> float:
    # a length-independent constant (B * completion budget) removes GRPO's length bias (Dr. GRPO)
    if max_tokens is None:
        # the longest completion of the batch would make the normaliser vary from batch to batch
        raise ValueError("dr_grpo_loss: expected max_tokens (the completion budget, a constant), got None")
    return float(mask.shape[0] * max_tokens)


AGGREGATIONS: dict[str, Aggregation] = {
    "grpo": Aggregation(per_sequence=True, denominator=_sequences),  # DeepSeekMath GRPO
    "dapo": Aggregation(per_sequence=False, denominator=_tokens),  # DAPO's token-level loss
    "dr_grpo": Aggregation(per_sequence=False, denominator=_budget),  # Dr. GRPO: no per-length normalisation
}
"""The one table of loss variants: each name's aggregation; `LOSSES` and `batch_denominator` read it."""


def batch_denominator(name: str, mask: torch.Tensor, max_tokens: int | None = None) -> float:
    """What loss `name` divides the batch's summed terms by, from the whole batch's `[B, T]` mask.

    A trainer that splits a batch into micro-batches passes this (computed once on the whole
    batch) as `denominator` to every micro-batch's loss and sums the micro-batch losses: the sum
    is then exactly the loss of the whole batch, not a mean of per-chunk means. Sequences whose
    group had equal rewards (advantage 0) count too: they still carry the KL term, and counting
    them is what TRL and DeepSeekMath do, so the wasted share of a batch shows as a smaller step.

    Args:
        name: a key of `LOSSES`.
        mask: `[B, T]` completion mask of the whole batch.
        max_tokens: the completion budget (Dr. GRPO's constant); required for "dr_grpo".

    Raises:
        ValueError: an unknown loss, or "dr_grpo" without `max_tokens`.
    """
    if name not in AGGREGATIONS:
        raise ValueError(f"batch_denominator: expected one of {sorted(AGGREGATIONS)}, got {name!r}")
    return AGGREGATIONS[name].denominator(mask, max_tokens)


def policy_loss(
    name: str,
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    ref_logp: torch.Tensor | None,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    beta: float = 0.0,
    denominator: float | None = None,
    max_tokens: int | None = None,
) -> LossTerms:
    """The loss of variant `name` (a key of `AGGREGATIONS`); see `LossFn` for the arguments."""
    how = AGGREGATIONS[name]
    mask = mask.to(logp.dtype)
    denom = float(denominator) if denominator is not None else how.denominator(mask, max_tokens)
    total, policy, kl, clipped = per_token_terms(
        logp, old_logp, ref_logp, advantages, clip_low=clip_low, clip_high=clip_high, beta=beta
    )

    def aggregate(x: torch.Tensor) -> torch.Tensor:
        if how.per_sequence:
            return (x * mask).sum(dim=1).div(mask.sum(dim=1).clamp(min=1)).sum() / denom
        return (x * mask).sum() / denom

    return LossTerms(
        loss=aggregate(total),
        policy=aggregate(policy).detach(),
        kl=masked_mean(kl, mask).detach(),
        clip_fraction=masked_mean(clipped, mask).detach(),
    )


LOSSES: dict[str, LossFn] = {name: functools.partial(policy_loss, name) for name in AGGREGATIONS}
"""Loss variants by name; the trainer picks one at construction."""
