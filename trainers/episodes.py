"""Episode rollouts for `GRPOTrainer`'s episode mode: G whole episodes from one start, one outcome each.

`GRPOConfig(episode=EpisodeConfig(enabled=True))` makes the trainer (`trainers/grpo.py`) draw P starts (pivots of an
episode env; each trajectory's first pivot is end-to-end RL) and hand them to `EpisodeGroups`,
which runs G episodes from each, the policy sampling every agent turn from the token sequence so
far, and scores each episode with the task's outcome. The trainer then takes the same step as
in pivot mode: trajectory-level group advantages (`trainers/_advantages.py`), the clipped ratio
loss with a k3 KL penalty (`trainers/_losses.py`) over every agent token of the episode, with
the observation tokens masked, one optimizer step, one `log_metrics` call (docs/episodes.md).

Token in, token out: an episode is one token sequence, the prompt, then per turn the sampled
tokens (mask 1) and the observation's tokens (mask 0: tool results, terminal output, the user's
reply, and the template's framing up to the next assistant header). The policy samples each
turn from exactly that sequence, so the log-probs the loss recomputes are those of the
distribution the tokens came from (no re-rendering between sampling and training).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import torch

import pivot_envs  # noqa: F401  (registers the pivot/* env ids)
from pivot_core import Pivot, load_pivots
from pivot_envs.episodes import EpisodeEnv
from trainers._advantages import decided_advantages
from trainers._batch import ScoredBatch, encode_prompt
from trainers.backends._base import template_messages
from trainers.grpo_config import GRPOConfig


@dataclass(frozen=True)
class Episode:
    """One finished episode as the loss sees it.

    Attributes:
        start_id: the pivot it started from.
        token_ids: prompt, then each turn's sampled tokens and observation tokens.
        agent_mask: 1 on the tokens the policy sampled, 0 on prompt and observation tokens.
        reward: the episode's outcome (`info["outcome"]["reward"]`).
        turns: agent turns taken.
        prompt_length: how many of `token_ids` are the starting prompt.
        outcome: `info["outcome"]` of the last step.
        completions: each turn's completion text, as handed to `env.step`.
    """

    start_id: str
    token_ids: tuple[int, ...]
    agent_mask: tuple[int, ...]
    reward: float
    turns: int
    prompt_length: int
    outcome: Mapping[str, Any] = field(default_factory=dict)
    completions: tuple[str, ...] = ()

    @property
    def generated_tokens(self) -> int:
        """Tokens the policy sampled in this episode."""
        return sum(self.agent_mask)

    @property
    def decided(self) -> bool:
        """False when the outcome could not be decided (its reward 0 means nothing)."""
        return self.outcome.get("error") is None


def check_length(cfg: GRPOConfig, max_positions: int) -> None:
    """Refuse budgets whose longest episode would not fit the model (positions past it are garbage)."""
    if not max_positions or cfg.max_prompt_tokens is None:
        return
    # a turn is its tokens, the end-of-turn token the framing may add, and the observation after it
    longest = cfg.max_prompt_tokens + cfg.episode.max_turns * (
        cfg.max_new_tokens + 1 + cfg.episode.max_observation_tokens
    )
    if longest > max_positions:
        raise ValueError(
            f"GRPOConfig: the longest episode is {longest} tokens (max_prompt_tokens + max_turns * "
            f"(max_new_tokens + 1 + max_observation_tokens)), expected <= the model's {max_positions} positions"
        )


def make_episode_env(cfg: GRPOConfig) -> EpisodeEnv:
    """The episode env `cfg.env_id` over `cfg.episode.dataset` (its bundled sample when None), with the turn budget."""
    kwargs: dict[str, Any] = {"max_turns": cfg.episode.max_turns}
    if cfg.episode.dataset:
        kwargs["dataset"] = cfg.episode.dataset
    env = gym.make(cfg.env_id, **kwargs).unwrapped
    if not isinstance(env, EpisodeEnv):
        raise ValueError(f"GRPOConfig.env_id: episode mode needs an episode env, got {cfg.env_id!r}")
    return env


def start_ids(env: EpisodeEnv, pivot_file: str | None = None) -> list[str]:
    """The pivot ids episodes start from: those of `pivot_file`, else each trajectory's first pivot.

    Raises:
        ValueError: without `pivot_file`, a trajectory whose first pivot in the data is not the
            task's initial state (an agent turn is already in its history: the data lacks the
            trajectory's first pivots, so its episodes would not be end to end).
    """
    if pivot_file is None:
        seen: dict[str, Pivot] = {}
        for p in env.pivots:
            seen.setdefault(str(p.context.get("trajectory_id") or p.id.rsplit("#", 1)[0]), p)
        for first in seen.values():
            turns = sum(m.role == "assistant" for m in first.history)
            if turns:
                raise ValueError(
                    f"expected each trajectory's first pivot to be its task's initial state, got {first.id!r} "
                    f"with {turns} agent turns before it (give the episode env every pivot of each trajectory)"
                )
        return [p.id for p in seen.values()]
    known = {p.id for p in env.pivots}
    ids = [p.id for p in load_pivots(pivot_file) if p.id in known]
    if not ids:
        raise ValueError(f"{pivot_file}: none of its pivots is a pivot of the episode env's dataset")
    return ids


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
def sample_turn(model: Any, tokenizer: Any, ids: Sequence[int], cfg: GRPOConfig, seed: int) -> list[int]:
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


def run_episode(env: EpisodeEnv, model: Any, tokenizer: Any, start: str, cfg: GRPOConfig, seed: int) -> Episode:
    """One episode from `start`: sample a turn, step the env, append its observation, until it ends."""
    env.reset(seed=seed, options={"pivot_id": start})
    assert env.current is not None
    ids = encode_prompt(tokenizer, env.current, cfg)
    prompt_length = len(ids)
    mask = [0] * prompt_length
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
                start,
                tuple(ids),
                tuple(mask),
                float(reward),
                len(completions),
                prompt_length,
                info["outcome"],
                tuple(completions),
            )
        # a turn cut by max_new_tokens never sampled its end-of-turn token: the framing supplies it
        closing = [eos] if eos is not None and (not turn or turn[-1] != eos) else []
        seen = tokenizer(observation_text(tokenizer, info["new_messages"]), add_special_tokens=False)["input_ids"]
        observed = closing + seen[: cfg.episode.max_observation_tokens]
        ids += observed
        mask += [0] * len(observed)


def episode_batch(groups: Sequence[Sequence[Episode]], advantage_fn: Any, eps: float) -> ScoredBatch:
    """The trainer's batch from G episodes per start: one outcome reward each, the sampled tokens masked in.

    An episode whose outcome could not be decided (the live state failed) gets advantage 0 and
    leaves its group's baseline alone, as a verifier error does in pivot mode.
    """
    episodes = [e for g in groups for e in g]
    rewards = torch.tensor([[e.reward for e in g] for g in groups], dtype=torch.float32)
    decided = torch.tensor([[e.decided for e in g] for g in groups])
    agent = sum(e.generated_tokens for e in episodes)
    return ScoredBatch(
        pivot_ids=tuple(g[0].start_id for g in groups),
        prompt_ids=tuple(e.token_ids[: e.prompt_length] for e in episodes),
        completion_ids=tuple(e.token_ids[e.prompt_length :] for e in episodes),
        rewards=rewards,
        accepted=(rewards >= 1.0).float(),
        advantages=decided_advantages(advantage_fn, rewards, decided, eps).flatten(),
        verifier_errors=int((~decided).sum()),
        completion_masks=tuple(e.agent_mask[e.prompt_length :] for e in episodes),
        stats={
            "rollout/turns_mean": float(np.mean([e.turns for e in episodes])),
            "rollout/generated_tokens": float(agent),
            # what share of the trained-on sequence the policy wrote (the rest is prompt and observations)
            "rollout/agent_token_share": agent / max(sum(len(e.token_ids) for e in episodes), 1),
        },
    )


class EpisodeGroups:
    """Episode mode's rollout strategy: G whole episodes from each start, one outcome reward each.

    Args:
        cfg: the run's configuration (episode mode).
        policy: the model that samples every agent turn (token in, token out).
        tokenizer: its tokenizer.
        autocast: the trainer's autocast context factory (bf16 on GPU, else a no-op).
        advantage_fn: the advantage estimator, a value of `ADVANTAGES`.
        env: an episode env to use instead of `make_episode_env(cfg)`.
    """

    def __init__(
        self,
        cfg: GRPOConfig,
        policy: Any,
        tokenizer: Any,
        autocast: Callable[[], Any],
        advantage_fn: Callable[..., torch.Tensor],
        env: Any = None,
    ) -> None:
        self.cfg, self.policy, self.tokenizer = cfg, policy, tokenizer
        self.autocast, self.advantage_fn = autocast, advantage_fn
        self.env: EpisodeEnv = env.unwrapped if env is not None else make_episode_env(cfg)
        if not isinstance(self.env, EpisodeEnv):
            raise ValueError(f"GRPOTrainer: episode mode needs an episode env, got {type(self.env).__name__}")
        positions = getattr(getattr(policy, "config", None), "max_position_embeddings", 0)
        check_length(cfg, int(positions or 0))
        self.starts: Sequence[Pivot] = [self.env.pivot(i) for i in start_ids(self.env, cfg.pivots)]

    def generate(self, starts: Sequence[Pivot], seed: int) -> list[list[Episode]]:
        """G episodes per start, each with its own sampling seed."""
        g = self.cfg.group_size
        with self.autocast():
            return [
                [
                    run_episode(self.env, self.policy, self.tokenizer, s.id, self.cfg, seed * 101 + i * g + j)
                    for j in range(g)
                ]
                for i, s in enumerate(starts)
            ]

    def score(self, starts: Sequence[Pivot], groups: Sequence[Sequence[Episode]]) -> ScoredBatch:
        """The outcomes are in the episodes already: build the batch and its advantages."""
        return episode_batch(groups, self.advantage_fn, self.cfg.objective.advantage_eps)


__all__ = [
    "Episode",
    "EpisodeGroups",
    "check_length",
    "episode_batch",
    "make_episode_env",
    "observation_text",
    "run_episode",
    "sample_turn",
    "start_ids",
]
