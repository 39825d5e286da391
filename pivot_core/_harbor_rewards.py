"""Harbor's reward files, read as Harbor's verifier reads them: the rule both its tests and its trials follow.

`reward.json` (a non-empty JSON object whose numeric entries are the rewards) is read first; else
`reward.txt` (one float). `pivot_sandbox`'s Harbor verifier reads the files a test run wrote in the
sandbox; the agent-run converter reads a Harbor trial's `verifier/` folder. Pure: texts in, a
`Rewards` out.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Rewards:
    """A test run's rewards, read as Harbor reads them.

    Attributes:
        reward: the reward: `rewards["reward"]` when there is one, the only entry, else their mean;
            None when no reward could be read (`error` says why).
        rewards: the numeric entries of reward.json, or {"reward": <reward.txt>}.
        source: "reward.json", "reward.txt" or "".
        error: why no reward was read ("" when one was); `dropped` lists reward.json's non-numbers.
        dropped: reward.json keys whose values were no numbers (Harbor's fork drops them too).
    """

    reward: float | None
    rewards: Mapping[str, float] = field(default_factory=dict)
    source: str = ""
    error: str = ""
    dropped: tuple[str, ...] = ()


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _from_json(text: str, txt: str | None) -> Rewards:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        return Rewards(None, source="reward.json", error=f"reward.json is not JSON: {e}")
    if not isinstance(data, dict) or not data:
        return Rewards(None, source="reward.json", error=f"reward.json: expected a non-empty object, got {text[:80]!r}")
    rewards = {str(k): v for k, v in ((k, _number(v)) for k, v in data.items()) if v is not None}
    dropped = tuple(str(k) for k in data if str(k) not in rewards)
    if "reward" not in rewards and txt is not None:  # Harbor's fork merges reward.txt in as "reward"
        from_txt = _from_txt(txt)
        if from_txt.reward is not None:
            rewards["reward"] = from_txt.reward
    if not rewards:
        return Rewards(None, source="reward.json", error="reward.json holds no number", dropped=dropped)
    values = list(rewards.values())
    reward = rewards.get("reward", values[0] if len(values) == 1 else sum(values) / len(values))
    return Rewards(reward, rewards, "reward.json", dropped=dropped)


def _from_txt(text: str) -> Rewards:
    if not text.strip():
        return Rewards(None, source="reward.txt", error="reward.txt is empty")
    try:
        value = float(text.strip())
    except ValueError:
        return Rewards(None, source="reward.txt", error=f"reward.txt: expected a float, got {text.strip()[:40]!r}")
    if not math.isfinite(value):
        return Rewards(None, source="reward.txt", error=f"reward.txt: expected a finite float, got {value}")
    return Rewards(value, {"reward": value}, "reward.txt")


def read_rewards(reward_json: str | None, reward_txt: str | None) -> Rewards:
    """The rewards of a test run from the two files' texts (None: the file was not written).

    `reward.json` first, `reward.txt` only without it (Harbor's `Verifier.verify`): an unreadable
    reward.json is an error even when reward.txt exists.
    """
    if reward_json is not None:
        return _from_json(reward_json, reward_txt)
    if reward_txt is not None:
        return _from_txt(reward_txt)
    return Rewards(None, error="test.sh wrote neither /logs/verifier/reward.json nor reward.txt")
