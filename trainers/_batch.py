"""The batch handed from scoring to the loss: token ids, rewards, advantages, and the padded tensors."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from pivot_core import Pivot
from trainers._losses import token_entropy
from trainers.grpo_config import GRPOConfig


@dataclass(frozen=True)
class ScoredBatch:
    """One rollout batch, scored: what `loss` consumes (sequences are pivot-major, G per pivot).

    Attributes:
        pivot_ids: the P pivots, in draw order.
        prompt_ids: per sequence, the prompt token ids.
        completion_ids: per sequence, the sampled token ids (end-of-turn included when sampled).
        rewards: `[P, G]` chain rewards.
        accepted: `[P, G]` 1.0 where the chain accepted the completion.
        advantages: `[P * G]` advantages.
        acceptance: per verifier, the share of its verdicts that accepted.
        verifier_errors: completions whose decision rests on a verifier that could not decide (episode
            mode: episodes whose outcome could not be decided); their advantage is 0.
        completion_masks: per sequence, 1 on the completion tokens the policy sampled and 0 on the
            others (episode mode: observations); None when every completion token was sampled.
        stats: statistics of this rollout strategy, logged as they are (episode mode: turns per episode).
    """

    pivot_ids: tuple[str, ...]
    prompt_ids: tuple[tuple[int, ...], ...]
    completion_ids: tuple[tuple[int, ...], ...]
    rewards: torch.Tensor
    accepted: torch.Tensor
    advantages: torch.Tensor
    acceptance: dict[str, float] = field(default_factory=dict)
    verifier_errors: int = 0
    completion_masks: tuple[tuple[int, ...], ...] | None = None
    stats: Mapping[str, float] = field(default_factory=dict)

    @property
    def completion_tokens(self) -> int:
        """Tokens sampled in this batch."""
        if self.completion_masks is not None:
            return sum(sum(m) for m in self.completion_masks)
        return sum(len(c) for c in self.completion_ids)


def pad_batch(
    prompts: Sequence[Sequence[int]],
    completions: Sequence[Sequence[int]],
    pad: int,
    device: str,
    masks: Sequence[Sequence[int]] | None = None,
) -> dict[str, torch.Tensor]:
    """Left-pad prompts and right-pad completions so every completion starts at the same column.

    Args:
        prompts: per sequence, the prompt token ids.
        completions: per sequence, the token ids after the prompt.
        pad: the padding token id.
        device: torch device.
        masks: per sequence, which completion tokens count in the loss (episode mode: 0 on
            observations); every completion token when None.

    Returns:
        `input_ids`, `attention_mask`, `position_ids` (`[B, Lp + Lc]`) and `completion_mask` (`[B, Lc]`).
    """
    lp = max(len(p) for p in prompts)
    lc = max(max(len(c) for c in completions), 1)
    ids, attn, cmask = [], [], []
    for i, (p, c) in enumerate(zip(prompts, completions, strict=True)):
        mask = [1] * len(c) if masks is None else list(masks[i])
        if len(mask) != len(c):
            raise ValueError(f"pad_batch: sequence {i} has {len(c)} completion tokens but a mask of {len(mask)}")
        ids.append([pad] * (lp - len(p)) + list(p) + list(c) + [pad] * (lc - len(c)))
        attn.append([0] * (lp - len(p)) + [1] * (len(p) + len(c)) + [0] * (lc - len(c)))
        cmask.append(mask + [0] * (lc - len(c)))
    attention = torch.tensor(attn, device=device)
    return {
        "input_ids": torch.tensor(ids, device=device),
        "attention_mask": attention,
        # positions count real tokens only, as generate() did with the left-padded prompt
        "position_ids": (attention.cumsum(-1) - 1).clamp(min=0),
        "completion_mask": torch.tensor(cmask, device=device, dtype=torch.float32),
    }


def completion_logprobs(
    model: Any, batch: dict[str, torch.Tensor], temperature: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token log-probabilities and entropies of the completion tokens, `[B, Lc]` each.

    Args:
        model: a causal LM.
        batch: `pad_batch`'s tensors.
        temperature: the sampling temperature: the logits are divided by it, so that the
            log-probs are those of the distribution the completions were sampled from (the ratio
            and the KL are on-policy at any temperature); 0 (greedy) counts as 1.
    """
    lc = batch["completion_mask"].shape[1]
    out = model(
        input_ids=batch["input_ids"],
        attention_mask=batch["attention_mask"],
        position_ids=batch["position_ids"],
        logits_to_keep=lc + 1,
    )
    logits = out.logits[:, :-1].float()  # the logit at column t predicts the token at t + 1
    if temperature > 0 and temperature != 1.0:
        logits = logits / temperature
    targets = batch["input_ids"][:, -lc:]
    logp = torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return logp, token_entropy(logits.detach())


def encode_prompt(tokenizer: Any, pivot: Pivot, cfg: GRPOConfig) -> list[int]:
    """A pivot's prompt token ids: its history rendered with the generation prompt, cut as `cfg` says."""
    from trainers.backends._chat import render_prompt

    text = render_prompt(tokenizer, pivot, cfg.max_history_messages)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return ids[-cfg.max_prompt_tokens :] if cfg.max_prompt_tokens else ids
