"""Episode GRPO: G whole episodes from one start, one outcome each, readable top to bottom (docs/episodes.md).

One step: draw P starts (pivots of an episode env; each trajectory's first pivot is end-to-end
RL) -> run G episodes from each, the policy sampling every agent turn from the token sequence so
far -> one outcome reward per episode -> trajectory-level group advantages -> the clipped ratio
loss with a k3 KL penalty over every agent token of the episode, observation tokens masked ->
optimizer step -> one `log_metrics` call. The maths is `trainers/_advantages.py` and
`trainers/_losses.py`, shared with the pivot trainer (`trainers/grpo.py`).

Token-in, token-out: an episode is one token sequence, the prompt, then per turn the sampled
tokens (mask 1) and the observation's tokens (mask 0: tool results, terminal output, the user's
reply, and the template's framing up to the next assistant header). The policy samples each
turn from exactly that sequence, so the log-probs the loss recomputes are those of the
distribution the tokens came from (no re-rendering between sampling and training).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

import pivot_envs  # noqa: F401  (registers the pivot/* env ids)
from pivot_core import Pivot
from trainers._advantages import ADVANTAGES, zero_variance_groups
from trainers._losses import LOSSES, masked_mean
from trainers.backends._base import template_messages
from trainers.backends._chat import render_prompt
from trainers.grpo import MetricsLog

STARTS = ("first", "all")


@dataclass(frozen=True)
class EpisodeConfig:
    """An episode-GRPO run; `pivot train --episodes` parses this same dataclass."""

    # -- model and data ---------------------------------------------------------------------
    model: str
    """Folder of the policy (a transformers causal LM with a chat template); also the reference."""
    env_id: str = "pivot/tool-use-episode-v0"
    """Episode env the episodes run in."""
    dataset: str | None = None
    """Trajectory or pivot file of the env; its bundled sample when None."""
    starts: str = "first"
    """Where episodes start: "first" (each trajectory's first pivot: end-to-end RL), "all", or a pivot file (D_adv)."""
    output_dir: str = "runs/episodes"
    """Where metrics.jsonl and the final model go."""

    # -- rollout ----------------------------------------------------------------------------
    starts_per_step: int = 2
    """P: starts drawn per step."""
    group_size: int = 4
    """G: episodes run from each start (one group)."""
    max_turns: int = 4
    """Turn budget: agent turns per episode (the env truncates there; a truncated episode keeps its outcome)."""
    max_new_tokens: int = 64
    """Longest agent turn, in tokens."""
    max_prompt_tokens: int | None = 256
    """The starting prompt is cut to its last N tokens (None keeps all)."""
    max_history_messages: int | None = 4
    """The starting prompt keeps the system message and the last N history messages (None keeps all)."""
    max_observation_tokens: int = 128
    """Each observation is cut to its first N tokens (the policy sees the cut one, in sampling and training)."""
    temperature: float = 1.0
    """Sampling temperature (the loss's log-probs use the same one)."""

    # -- objective --------------------------------------------------------------------------
    loss: str = "grpo"
    """Loss aggregation, a key of `LOSSES`: grpo | dapo | dr_grpo."""
    advantage: str = "group_norm"
    """Advantage estimator, a key of `ADVANTAGES`: group_norm | leave_one_out."""
    clip_eps: float = 0.2
    """PPO clip range for the importance ratio (symmetric)."""
    beta: float = 0.04
    """Weight of the k3 KL penalty to the frozen reference (0: no reference model is kept)."""
    learning_rate: float = 1e-5
    """AdamW learning rate."""

    # -- run --------------------------------------------------------------------------------
    steps: int = 10
    """Optimizer steps (rollout batches)."""
    seed: int = 0
    """Seeds start draws and sampling."""
    device: str = "cpu"
    """torch device: cpu, cuda, cuda:1."""

    def __post_init__(self) -> None:
        if self.loss not in LOSSES:
            raise ValueError(f"EpisodeConfig.loss: expected one of {sorted(LOSSES)}, got {self.loss!r}")
        if self.advantage not in ADVANTAGES:
            raise ValueError(f"EpisodeConfig.advantage: expected one of {sorted(ADVANTAGES)}, got {self.advantage!r}")
        for name in ("starts_per_step", "max_turns", "max_new_tokens", "max_observation_tokens", "steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"EpisodeConfig.{name}: expected >= 1, got {getattr(self, name)}")
        if self.group_size < 2:
            raise ValueError(
                f"EpisodeConfig.group_size: expected >= 2 (advantages compare episodes), got {self.group_size}"
            )
        if self.starts not in STARTS and not Path(self.starts).is_file():
            raise ValueError(f"EpisodeConfig.starts: expected one of {STARTS} or a pivot file, got {self.starts!r}")


@dataclass(frozen=True)
class Episode:
    """One finished episode as the loss sees it.

    Attributes:
        start_id: the pivot it started from.
        token_ids: prompt, then each turn's sampled tokens and observation tokens.
        agent_mask: 1 on the tokens the policy sampled, 0 on prompt and observation tokens.
        reward: the episode's outcome (`info["outcome"]["reward"]`).
        turns: agent turns taken.
        outcome: `info["outcome"]` of the last step.
        completions: each turn's completion text, as handed to `env.step`.
    """

    start_id: str
    token_ids: tuple[int, ...]
    agent_mask: tuple[int, ...]
    reward: float
    turns: int
    outcome: Mapping[str, Any] = field(default_factory=dict)
    completions: tuple[str, ...] = ()

    @property
    def generated_tokens(self) -> int:
        """Tokens the policy sampled in this episode."""
        return sum(self.agent_mask)


def check_length(cfg: EpisodeConfig, max_positions: int) -> None:
    """Refuse budgets whose longest episode would not fit the model (positions past it are garbage)."""
    if not max_positions or cfg.max_prompt_tokens is None:
        return
    # a turn is its tokens, the end-of-turn token the framing may add, and the observation after it
    longest = cfg.max_prompt_tokens + cfg.max_turns * (cfg.max_new_tokens + 1 + cfg.max_observation_tokens)
    if longest > max_positions:
        raise ValueError(
            f"EpisodeConfig: the longest episode is {longest} tokens (max_prompt_tokens + max_turns * "
            f"(max_new_tokens + 1 + max_observation_tokens)), expected <= the model's {max_positions} positions"
        )


def start_ids(env: Any, starts: str) -> list[str]:
    """The pivot ids episodes start from ("first": each trajectory's first pivot)."""
    if starts == "all":
        return [p.id for p in env.pivots]
    if starts == "first":
        seen: dict[str, str] = {}
        for p in env.pivots:
            seen.setdefault(str(p.context.get("trajectory_id") or p.id.rsplit("#", 1)[0]), p.id)
        return list(seen.values())
    from pivot_core import load_pivots

    known = {p.id for p in env.pivots}
    ids = [p.id for p in load_pivots(starts) if p.id in known]
    if not ids:
        raise ValueError(f"starts file {starts!r}: none of its pivots is a pivot of the episode env's dataset")
    return ids


def prompt_ids(tokenizer: Any, pivot: Pivot, cfg: EpisodeConfig) -> list[int]:
    """The starting prompt's token ids (the pivot's history with the generation prompt, cut)."""
    text = render_prompt(tokenizer, pivot, cfg.max_history_messages)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return ids[-cfg.max_prompt_tokens :] if cfg.max_prompt_tokens else ids


def observation_text(tokenizer: Any, new_messages: Sequence[Mapping[str, Any]]) -> str:
    """The template's text for `new_messages` up to the next assistant header.

    Rendered after a probe user message and cut at the probe's end, so a template that injects a
    default system message renders it in both and it cancels; what a template writes between an
    assistant's end-of-turn token and the next message (ChatML: a newline) comes first.
    """
    probe = [{"role": "user", "content": "."}]
    framed = [*probe, {"role": "assistant", "content": "."}]
    after_turn = tokenizer.apply_chat_template(template_messages(framed), tokenize=False)
    eos = tokenizer.eos_token or ""
    gap = after_turn[after_turn.rfind(eos) + len(eos) :] if eos and eos in after_turn else ""
    head = tokenizer.apply_chat_template(template_messages(probe), tokenize=False)
    body = tokenizer.apply_chat_template(
        template_messages([*probe, *new_messages]), tokenize=False, add_generation_prompt=True
    )
    return gap + (body[len(head) :] if body.startswith(head) else body)


@torch.no_grad()
def sample_turn(model: Any, tokenizer: Any, ids: Sequence[int], cfg: EpisodeConfig, seed: int) -> list[int]:
    """One agent turn sampled after `ids`: the new tokens, through the end-of-turn token when sampled."""
    torch.manual_seed(seed)
    inputs = torch.tensor([list(ids)], device=cfg.device)
    out = model.generate(
        input_ids=inputs,
        attention_mask=torch.ones_like(inputs),
        max_new_tokens=cfg.max_new_tokens,
        do_sample=cfg.temperature > 0,
        temperature=cfg.temperature if cfg.temperature > 0 else None,
        top_k=0,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id,
    )
    new = out[0, inputs.shape[1] :].tolist()
    eos = tokenizer.eos_token_id
    return new[: new.index(eos) + 1] if eos is not None and eos in new else new


def run_episode(env: Any, model: Any, tokenizer: Any, start: str, cfg: EpisodeConfig, seed: int) -> Episode:
    """One episode from `start`: sample a turn, step the env, append its observation, until it ends."""
    env.reset(seed=seed, options={"pivot_id": start})
    ids = prompt_ids(tokenizer, env.current, cfg)
    mask = [0] * len(ids)
    eos = tokenizer.eos_token_id
    completions: list[str] = []
    model.eval()
    while True:
        turn = sample_turn(model, tokenizer, ids, cfg, seed * 7919 + len(completions))
        ids += turn
        mask += [1] * len(turn)
        completions.append(tokenizer.decode(turn, skip_special_tokens=True))
        _, reward, terminated, truncated, info = env.step(completions[-1])
        if terminated or truncated:
            return Episode(
                start, tuple(ids), tuple(mask), float(reward), len(completions), info["outcome"], tuple(completions)
            )
        # a turn cut by max_new_tokens never sampled its end-of-turn token: the framing supplies it
        closing = [eos] if eos is not None and (not turn or turn[-1] != eos) else []
        seen = tokenizer(observation_text(tokenizer, info["new_messages"]), add_special_tokens=False)["input_ids"]
        observed = closing + seen[: cfg.max_observation_tokens]
        ids += observed
        mask += [0] * len(observed)


def pad_episodes(episodes: Sequence[Episode], pad: int, device: str) -> dict[str, torch.Tensor]:
    """Right-padded `input_ids`, `attention_mask` `[B, L]` and the loss mask `[B, L - 1]`.

    `loss_mask[b, t]` is 1 when token t + 1 was sampled by the policy: the logit at t predicts it.
    """
    length = max(len(e.token_ids) for e in episodes)
    ids = [list(e.token_ids) + [pad] * (length - len(e.token_ids)) for e in episodes]
    attn = [[1] * len(e.token_ids) + [0] * (length - len(e.token_ids)) for e in episodes]
    agent = [list(e.agent_mask) + [0] * (length - len(e.agent_mask)) for e in episodes]
    return {
        "input_ids": torch.tensor(ids, device=device),
        "attention_mask": torch.tensor(attn, device=device),
        "loss_mask": torch.tensor(agent, device=device, dtype=torch.float32)[:, 1:],
    }


def token_logprobs(model: Any, batch: Mapping[str, torch.Tensor], temperature: float) -> torch.Tensor:
    """`[B, L - 1]` log-probability of each next token at the sampling temperature (0 counts as 1)."""
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, :-1].float()
    if temperature > 0 and temperature != 1.0:
        logits = logits / temperature
    targets = batch["input_ids"][:, 1:]
    return torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


class EpisodeTrainer:
    """GRPO over whole episodes; see the module docstring for one step.

    Args:
        cfg: the run's configuration.
        env: an episode env to use instead of `gym.make(cfg.env_id, dataset=..., max_turns=...)`.
    """

    def __init__(self, cfg: EpisodeConfig, env: Any = None) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.cfg = cfg
        torch.manual_seed(cfg.seed)
        self.tokenizer = AutoTokenizer.from_pretrained(cfg.model)
        self.policy = AutoModelForCausalLM.from_pretrained(cfg.model, dtype=torch.float32).to(cfg.device)
        self.ref = copy.deepcopy(self.policy).eval().requires_grad_(False) if cfg.beta > 0 else None
        check_length(cfg, int(getattr(self.policy.config, "max_position_embeddings", 0) or 0))
        kwargs = {"max_turns": cfg.max_turns, **({"dataset": cfg.dataset} if cfg.dataset else {})}
        self.env = env if env is not None else gym.make(cfg.env_id, **kwargs).unwrapped
        self.starts = start_ids(self.env, cfg.starts)
        self.loss_fn = LOSSES[cfg.loss]  # variants are picked once, here
        self.advantage_fn = ADVANTAGES[cfg.advantage]
        # no weight decay: a step with zero advantages and zero KL must leave the weights alone
        self.optimizer = torch.optim.AdamW(self.policy.parameters(), lr=cfg.learning_rate, weight_decay=0.0)
        self.out = Path(cfg.output_dir)
        self.metrics = MetricsLog(self.out)
        self.metrics.log_hparams(cfg)
        self.step_count = 0
        self.last: dict[str, float] = {}

    def step(self) -> dict[str, float]:
        """One episode-GRPO step; returns the metrics it logged."""
        cfg, t0 = self.cfg, time.perf_counter()

        # ---- ROLLOUT: G episodes from each of P starts ----------------------------------------
        groups = self.rollout(self.draw_starts(self.step_count), seed=cfg.seed * 1_000_003 + self.step_count)
        t_roll = time.perf_counter()

        # ---- ADVANTAGES: one outcome per episode, compared within its group ------------------
        rewards = torch.tensor([[e.reward for e in g] for g in groups], dtype=torch.float32)
        advantages = self.advantage_fn(rewards, 1e-4).flatten()

        # ---- LOSS + OPTIMIZER: every agent token of each episode, observations masked ---------
        episodes = [e for g in groups for e in g]
        terms = self.update(episodes, advantages)
        t_upd = time.perf_counter()

        # ---- LOG ------------------------------------------------------------------------------
        self.step_count += 1
        metrics = {
            "rollout/reward_mean": float(rewards.mean()),
            "rollout/zero_var_share": float(zero_variance_groups(rewards).float().mean()),
            "rollout/turns_mean": float(np.mean([e.turns for e in episodes])),
            "rollout/generated_tokens": float(sum(e.generated_tokens for e in episodes)),
            "rollout/outcome_errors": float(sum(e.outcome.get("error") is not None for e in episodes)),
            **terms,
            "perf/time_rollout": t_roll - t0,
            "perf/time_update": t_upd - t_roll,
        }
        self.metrics.log_metrics(self.step_count, metrics)
        self.last = metrics
        return metrics

    def draw_starts(self, step: int) -> list[str]:
        """P starts without replacement, seeded by (seed, step)."""
        rng = np.random.default_rng([self.cfg.seed, step])
        idx = rng.choice(len(self.starts), size=min(self.cfg.starts_per_step, len(self.starts)), replace=False)
        return [self.starts[int(i)] for i in idx]

    def rollout(self, starts: Sequence[str], seed: int) -> list[list[Episode]]:
        """G episodes per start, each with its own sampling seed."""
        g = self.cfg.group_size
        return [
            [run_episode(self.env, self.policy, self.tokenizer, s, self.cfg, seed * 101 + i * g + j) for j in range(g)]
            for i, s in enumerate(starts)
        ]

    def update(self, episodes: Sequence[Episode], advantages: torch.Tensor) -> dict[str, float]:
        """One optimizer step on the batch of episodes; returns loss metrics."""
        cfg = self.cfg
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        batch = pad_episodes(episodes, pad, cfg.device)
        ref_logp = None
        if self.ref is not None:
            with torch.no_grad():
                ref_logp = token_logprobs(self.ref, batch, cfg.temperature)
        self.policy.train()
        self.optimizer.zero_grad(set_to_none=True)
        logp = token_logprobs(self.policy, batch, cfg.temperature)
        # one pass per rollout batch: the weights have not moved, so old == current (ratio 1)
        terms = self.loss_fn(
            logp,
            logp.detach(),
            ref_logp,
            advantages.to(cfg.device),
            batch["loss_mask"],
            clip_low=cfg.clip_eps,
            clip_high=cfg.clip_eps,
            beta=cfg.beta,
            max_tokens=cfg.max_turns * cfg.max_new_tokens,  # an episode's agent-token budget (Dr. GRPO's constant)
        )
        terms.loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), 1.0)
        self.optimizer.step()
        return {
            "loss/total": float(terms.loss.detach()),
            "loss/policy": float(terms.policy),
            "loss/kl": float(terms.kl),
            "loss/grad_norm": float(grad_norm),
            "loss/agent_token_share": float(masked_mean(batch["loss_mask"], batch["attention_mask"][:, 1:].float())),
        }

    def train(self) -> Path:
        """Run `cfg.steps` steps and save the final model to `output_dir/final`."""
        while self.step_count < self.cfg.steps:
            self.step()
        final = self.out / "final"
        self.policy.save_pretrained(final)
        self.tokenizer.save_pretrained(final)
        return final


__all__ = [
    "Episode",
    "EpisodeConfig",
    "EpisodeTrainer",
    "observation_text",
    "pad_episodes",
    "run_episode",
    "start_ids",
    "token_logprobs",
]
