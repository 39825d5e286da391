"""SkyRL: a `BaseTextEnv`-shaped env that scores one completion at a pivot, plus dataset rows.

SkyRL-Gym envs are built as `Env(env_config, extras)` from a dataset row's extras, expose
`init(prompt) -> (prompt, metadata)`, `step(action) -> {observations, reward, done, metadata,
postprocessed_action}` and `close()`. A pivot is a one-step problem, so `step` always returns
`done=True` and no new observations. When `skyrl_gym` is installed the class subclasses its
`BaseTextEnv`; register it with `skyrl_gym.envs.register(id="pivot", entry_point=...)`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pivot_envs._model import Pivot
from trainers.adapters._common import DEFAULT_ENV, PivotScorer, expert_text, pivot_ref, prompt_messages

try:  # the real base class when SkyRL is installed; the same shape otherwise
    from skyrl_gym.envs.base_text_env import BaseTextEnv as _Base
except ImportError:  # SkyRL is GPU-heavy and not installed on CPU machines
    _Base = object

_SCORER: PivotScorer | None = None


def _scorer() -> PivotScorer:
    global _SCORER  # one per worker: envs and verifier chains are built once
    if _SCORER is None:
        _SCORER = PivotScorer(DEFAULT_ENV)
    return _SCORER


def skyrl_rows(pivots: Sequence[Pivot], env_id: str = DEFAULT_ENV) -> list[dict[str, Any]]:
    """SkyRL dataset rows: `data_source`, `prompt`, `env_class`, `reward_spec`, `extra_info`."""
    return [
        {
            "data_source": env_id,
            "prompt": prompt_messages(p),
            "env_class": "pivot",
            "reward_spec": {"method": "rule", "ground_truth": expert_text(p)},
            "extra_info": pivot_ref(env_id, p),
        }
        for p in pivots
    ]


class PivotTextEnv(_Base):  # type: ignore[misc,valid-type]
    """One pivot, one completion, one verifier-chain reward.

    Args:
        env_config: SkyRL's env config (unused; verifiers come from the pivot env's defaults).
        extras: the row's extras: `extra_info` with `pivot_json` (or `pivot_id`) and `env_id`.
    """

    def __init__(self, env_config: Any = None, extras: dict[str, Any] | None = None) -> None:
        if _Base is not object:
            super().__init__()
        extras = extras or {}
        info = extras.get("extra_info", extras)
        if isinstance(info, str):
            info = json.loads(info)
        if not info.get("pivot_json") and not info.get("pivot_id"):
            raise ValueError(f"PivotTextEnv: expected extras with 'pivot_json' or 'pivot_id', got {sorted(info)}")
        self.info = info
        self.turns, self.max_turns = 0, 1

    def init(self, prompt: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The prompt is the pivot's history, passed through unchanged."""
        return prompt, {}

    def step(self, action: str) -> dict[str, Any]:
        """Score `action` at the pivot; the episode always ends here."""
        self.turns += 1
        (result,) = _scorer().score(
            [action],
            pivot_id=self.info.get("pivot_id"),
            pivot=self.info.get("pivot_json"),
            env_id=self.info.get("env_id"),
        )
        return {
            "observations": [],
            "reward": result.reward,
            "done": True,
            "metadata": {"accepted": result.accepted, "decided_by": result.decided_by, "error": result.error},
            "postprocessed_action": None,
        }

    def close(self) -> None:
        """Nothing to release: the scorer is shared by the worker."""
