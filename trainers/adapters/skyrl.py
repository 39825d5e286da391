"""SkyRL: a `BaseTextEnv` that scores one completion at a pivot, plus dataset rows.

SkyRL-Gym envs are built as `skyrl_gym.make(env_class, env_config=..., extras=row_extras)` from a
dataset row, expose `init(prompt) -> (prompt, metadata)`, `step(action) -> {observations, reward,
done, metadata, postprocessed_action}` and `close()`. A pivot is a one-step problem, so `step`
always returns `done=True` and no new observations. A row whose `env_id` is an episode env
(`pivot/tool-use-episode-v0`, `pivot/terminal-episode-v0`) plays that episode instead: `init`
restores the state at the pivot, each `step` runs one turn and returns what the env answered as
observations, `done` comes only at the episode's end with the outcome as the reward.
`PivotTextEnv` subclasses skyrl-gym's real `BaseTextEnv` (skyrl-gym is needed: `pip install
skyrl-gym`); `register()` adds it to skyrl-gym's registry as `ENV_CLASS` with the entry point
`ENTRY_POINT`, and rows name it in `env_class`. SkyRL's `PromptDataset` reads the Parquet file
`write_skyrl_parquet` writes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pivot_core import Pivot
from trainers.adapters._common import (
    DEFAULT_ENV,
    EPISODES,
    PivotScorer,
    error_result,
    expert_text,
    flat_prompt_messages,
    is_episode_env,
    outcome_reward,
    pivot_ref,
    prompt_messages,
    with_tools_in_system,
)

try:
    import skyrl_gym
    from skyrl_gym.envs.base_text_env import BaseTextEnv
except ImportError as e:  # no silent stand-in: a PivotTextEnv that is not a BaseTextEnv would fail inside SkyRL
    raise ImportError(f"trainers.adapters.skyrl needs skyrl-gym: pip install skyrl-gym ({e})") from e

ENV_CLASS = "pivot"
ENTRY_POINT = "trainers.adapters.skyrl:PivotTextEnv"

_SCORER: PivotScorer | None = None


def _scorer() -> PivotScorer:
    global _SCORER  # one per worker: envs and verifier chains are built once
    if _SCORER is None:
        _SCORER = PivotScorer(DEFAULT_ENV)
    return _SCORER


def skyrl_rows(
    pivots: Sequence[Pivot], env_id: str = DEFAULT_ENV, env_kwargs: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """SkyRL dataset rows: `data_source`, `prompt`, `env_class`, `reward_spec`, `extra_info`.

    `env_kwargs` (JSON in `extra_info`) builds an episode env (`dataset=PATH`, `max_turns`, ...).
    """
    return [
        {
            "data_source": env_id,
            "prompt": prompt_messages(p),
            "env_class": ENV_CLASS,
            "reward_spec": {"method": "rule", "ground_truth": expert_text(p)},
            "extra_info": {**pivot_ref(env_id, p), "env_kwargs": json.dumps(env_kwargs or {})},
        }
        for p in pivots
    ]


def write_skyrl_parquet(
    pivots: Sequence[Pivot], path: str | Path, env_id: str = DEFAULT_ENV, env_kwargs: dict[str, Any] | None = None
) -> int:
    """Write `skyrl_rows` as Parquet (what SkyRL's `PromptDataset` reads); returns the row count.

    Prompts are stored as `{role, content}` messages with tool calls rendered as text, because
    Arrow needs one schema for every message; `extra_info` carries the whole pivot.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [
        {**row, "prompt": flat_prompt_messages(p)}
        for row, p in zip(skyrl_rows(pivots, env_id, env_kwargs), pivots, strict=True)
    ]
    pq.write_table(pa.Table.from_pylist(rows), str(path))
    return len(rows)


def register() -> None:
    """Register `PivotTextEnv` in skyrl-gym's registry as `ENV_CLASS` (idempotent)."""
    if ENV_CLASS not in skyrl_gym.registry:
        skyrl_gym.register(id=ENV_CLASS, entry_point=ENTRY_POINT)


class PivotTextEnv(BaseTextEnv):
    """One pivot, one completion, one verifier-chain reward; or, for an episode env id, one episode.

    Args:
        env_config: SkyRL's env config (unused; verifiers come from the pivot env's defaults).
        extras: the row's extras: `extra_info` with `pivot_json` (or `pivot_id`) and `env_id`.
    """

    def __init__(self, env_config: Any = None, extras: dict[str, Any] | None = None) -> None:
        super().__init__()
        extras = extras or {}
        info = extras.get("extra_info", extras)
        if isinstance(info, str):
            info = json.loads(info)
        if not info.get("pivot_json") and not info.get("pivot_id"):
            raise ValueError(f"PivotTextEnv: expected extras with 'pivot_json' or 'pivot_id', got {sorted(info)}")
        self.info = info
        self.episode: Any = None  # the episode env this trajectory holds (episode ids only)

    def init(self, prompt: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The pivot's history with its tool schemas in the system message; an episode restores its state here.

        SkyRL renders prompts with run-wide chat-template arguments, so a pivot's own tools travel in
        the row's extras (the pivot) and reach the prompt here, as the block Qwen/Hermes templates write.
        """
        env_id = self.info.get("env_id")
        if not is_episode_env(env_id):
            try:
                tools = _scorer().pivot(pivot_id=self.info.get("pivot_id"), pivot=self.info.get("pivot_json"),
                                        env_id=env_id).tools  # fmt: skip
            except Exception:  # an unreadable row is scored 0 with the reason in `step`; its prompt stays
                tools = ()
            return with_tools_in_system(prompt, tools), {}
        self.episode = EPISODES.acquire(env_id, str(self.info.get("env_kwargs") or "{}"))
        observation, reset_info = self.episode.reset(options={"pivot_id": self.info["pivot_id"]})
        meta = {"pivot_id": reset_info["pivot_id"], "max_turns": reset_info["max_turns"]}
        return with_tools_in_system(prompt, observation["tools"]), meta

    def step(self, action: str) -> dict[str, Any]:
        """Score `action` at the pivot (the episode ends here), or play it as one turn of the episode."""
        self.turns += 1
        if self.episode is not None:
            return self._episode_step(action)
        scorer, env_id = _scorer(), self.info.get("env_id")
        try:
            pivot = scorer.pivot(pivot_id=self.info.get("pivot_id"), pivot=self.info.get("pivot_json"), env_id=env_id)
            (result,) = scorer.env(env_id).score(pivot, [action])
        except Exception as e:  # a row without a readable pivot scores 0 with the reason; it never stops SkyRL
            result = error_result("skyrl_row", f"extra_info names no pivot: {type(e).__name__}: {e}")
        return {
            "observations": [],
            "reward": result.reward,
            "done": True,
            "metadata": {"accepted": result.accepted, "decided_by": result.decided_by, "error": result.error},
            "postprocessed_action": None,
        }

    def _episode_step(self, action: str) -> dict[str, Any]:
        _, _, terminated, truncated, info = self.episode.step(action)
        observations = [{"role": m["role"], "content": m.get("content") or ""} for m in info["new_messages"]]
        done = bool(terminated or truncated)
        reward, metadata = 0.0, {"turn": info["turn"]}
        if done:
            outcome = outcome_reward(info)
            reward = outcome or 0.0  # SkyRL has no "not applicable": an undecided outcome is 0 with the error
            metadata |= {"outcome": info["outcome"], "error": info["outcome"]["error"]}
            self.close()
        return {"observations": [] if done else observations, "reward": reward, "done": done,
                "metadata": metadata, "postprocessed_action": None}  # fmt: skip

    def close(self) -> None:
        """Give back the episode env (its container goes now); single-step envs hold nothing."""
        episode, self.episode = self.episode, None
        if episode is not None:
            EPISODES.release(str(self.info["env_id"]), str(self.info.get("env_kwargs") or "{}"), episode)
