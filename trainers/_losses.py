"""GRPO policy losses: pure tensor functions over completion tokens.

Every tensor is `[B, T]` over the completion tokens of B sequences (prompt tokens are not in it,
padding is masked out by `mask`), except `advantages`, which is `[B]`. The loss per token is the
clipped importance-ratio objective (PPO) plus `beta` times the k3 estimate of KL(policy || ref).
Variants differ only in how per-token terms are averaged into one number; pick one once with
`LOSSES[name]`.
"""

from __future__ import annotations

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


def _terms(
    aggregate: Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor],
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
    name: str = "grpo",
) -> LossTerms:
    mask = mask.to(logp.dtype)
    denom = float(denominator) if denominator is not None else batch_denominator(name, mask, max_tokens)
    total, policy, kl, clipped = per_token_terms(
        logp, old_logp, ref_logp, advantages, clip_low=clip_low, clip_high=clip_high, beta=beta
    )
    return LossTerms(
        loss=aggregate(total, mask, denom),
        policy=aggregate(policy, mask, denom).detach(),
        kl=masked_mean(kl, mask).detach(),
        clip_fraction=masked_mean(clipped, mask).detach(),
    )


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
    if name == "grpo":
        return float(mask.shape[0])
    if name == "dapo":
        return max(float(mask.sum()), 1.0)
    if name == "dr_grpo":
        if max_tokens is None:
            # the longest completion of the batch would make the normaliser vary from batch to batch
            raise ValueError("dr_grpo_loss: expected max_tokens (the completion budget, a constant), got None")
        return float(mask.shape[0] * max_tokens)
    raise ValueError(f"batch_denominator: expected one of {sorted(LOSSES)}, got {name!r}")


def _sequence_mean(x: torch.Tensor, mask: torch.Tensor, denom: float) -> torch.Tensor:
    # Each sequence weighs the same whatever its length (the original GRPO); denom = sequences.
    return (x * mask).sum(dim=1).div(mask.sum(dim=1).clamp(min=1)).sum() / denom


def _token_mean(x: torch.Tensor, mask: torch.Tensor, denom: float) -> torch.Tensor:
    # Each token weighs the same, so long completions are not down-weighted (DAPO); denom = tokens.
    return (x * mask).sum() / denom


def _constant_norm(x: torch.Tensor, mask: torch.Tensor, denom: float) -> torch.Tensor:
    # A length-independent constant (B * completion budget) removes GRPO's length bias (Dr. GRPO).
    return (x * mask).sum() / denom


def grpo_loss(logp, old_logp, ref_logp, advantages, mask, **kw) -> LossTerms:  # noqa: D417 (see LossFn)
    """Per-sequence token mean, then mean over sequences (DeepSeekMath GRPO)."""
    return _terms(_sequence_mean, logp, old_logp, ref_logp, advantages, mask, name="grpo", **kw)


def dapo_loss(logp, old_logp, ref_logp, advantages, mask, **kw) -> LossTerms:  # noqa: D417 (see LossFn)
    """Mean over every completion token of the batch (DAPO's token-level loss)."""
    return _terms(_token_mean, logp, old_logp, ref_logp, advantages, mask, name="dapo", **kw)


def dr_grpo_loss(logp, old_logp, ref_logp, advantages, mask, **kw) -> LossTerms:  # noqa: D417 (see LossFn)
    """Sum over tokens divided by `B * max_tokens` (Dr. GRPO: no per-length normalization)."""
    return _terms(_constant_norm, logp, old_logp, ref_logp, advantages, mask, name="dr_grpo", **kw)


LOSSES: dict[str, LossFn] = {"grpo": grpo_loss, "dapo": dapo_loss, "dr_grpo": dr_grpo_loss}
"""Loss variants by name; the trainer picks one at construction."""
