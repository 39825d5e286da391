"""Harbor job trial folders: which task a run was on and what the verifier gave it.

`harbor run` writes one folder per trial under its job folder (`jobs/<job>/<trial>/`, Harbor's
`TrialPaths`): `config.json`, `result.json` (its `TrialResult`: `task_name`, `trial_name`,
`verifier_result.rewards`, `exception_info`, ...), `agent/trajectory.json` (the agent's steps in
ATIF), `verifier/reward.json` or `reward.txt` (what the task's `test.sh` wrote) and
`verifier/test-stdout.txt`. The job folder beside them holds a `result.json` too, but no `agent/` or
`verifier/` folder: it is no trial.

The trial's reward is the verifier's files read as Harbor reads them (`reward.json` first, else
`reward.txt`: `pivot_core.read_rewards`), else `result.json`'s `verifier_result.rewards`; a trial
whose verifier wrote neither has none (`trial_reward` absent, `reward_error` says why).
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pivot_core._files import read_bounded
from pivot_core._harbor_rewards import read_rewards
from pivot_core.convert._documents import read_document
from pivot_core.errors import DataFileError

REWARD_BYTES = 1 << 16  # a reward file is one float or a small object


def is_harbor_trial(folder: Path) -> bool:
    """True for a Harbor trial folder: a `result.json` beside an `agent/` or `verifier/` folder."""
    folder = Path(folder)
    return (folder / "result.json").is_file() and ((folder / "agent").is_dir() or (folder / "verifier").is_dir())


def _text(path: Path) -> str | None:
    """A reward file's text; None when it is absent (an unreadable or oversized one is a DataFileError)."""
    if not path.is_file():
        return None
    return read_bounded(path, REWARD_BYTES).decode("utf-8", errors="replace")


def _task_id(result: Mapping[str, Any], folder: Path) -> str | None:
    """The task's folder name: `task_name`, else the last part of `config.task.path`."""
    if result.get("task_name"):
        return str(result["task_name"])
    config = result.get("config") if isinstance(result.get("config"), Mapping) else {}
    task = config.get("task") if isinstance(config.get("task"), Mapping) else {}
    path = str(task.get("path") or "").rstrip("/")
    return posixpath.basename(path) or None


def _result_reward(result: Mapping[str, Any]) -> float | None:
    """`verifier_result.rewards` of result.json read by the same rule (None when it holds none)."""
    verifier = result.get("verifier_result") if isinstance(result.get("verifier_result"), Mapping) else {}
    rewards = verifier.get("rewards")
    if not isinstance(rewards, Mapping) or not rewards:
        return None
    return read_rewards(json.dumps(dict(rewards)), None).reward


def harbor_trial_context(folder: Path) -> dict[str, Any]:
    """`task_id`, `run`, `trial_reward` (and `reward_source`) of a Harbor trial folder.

    Raises:
        DataFileError: result.json or a reward file is unreadable (names the file).
    """
    folder = Path(folder)
    result = read_document(folder / "result.json")
    if not isinstance(result, Mapping):
        raise DataFileError(str(folder / "result.json"), None, "expected Harbor's TrialResult (a JSON object)")
    verifier = folder / "verifier"
    rewards = read_rewards(_text(verifier / "reward.json"), _text(verifier / "reward.txt"))
    out: dict[str, Any] = {
        "task_id": _task_id(result, folder),
        "run": str(result.get("trial_name") or folder.name),
        "trial_format": "harbor",
    }
    if rewards.reward is not None:
        out |= {"trial_reward": rewards.reward, "reward_source": f"verifier/{rewards.source}"}
    elif (from_result := _result_reward(result)) is not None:
        out |= {"trial_reward": from_result, "reward_source": "result.json"}
    else:
        out["reward_error"] = rewards.error or "the trial records no reward"
    agent = result.get("agent_info") if isinstance(result.get("agent_info"), Mapping) else {}
    if agent.get("name"):
        out["trial_agent"] = str(agent["name"])  # terminus-2, claude-code, ... (the per-agent report's name)
    exception = result.get("exception_info")
    if isinstance(exception, Mapping) and exception.get("exception_type"):
        out["trial_exception"] = str(exception["exception_type"])
    return {k: v for k, v in out.items() if v is not None}
