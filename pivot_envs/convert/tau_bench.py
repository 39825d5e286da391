"""tau-bench historical trajectories (airline, retail): the converted JSONL and the original JSON list.

Converted JSONL record: `{id, messages (OpenAI chat, system = policy), reward, task, tools_file, ...}`;
`tools_file` is resolved next to the data file. The original release is one JSON list of
`{task_id, reward, info, traj, trial}`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pivot_envs._model import Message, Trajectory
from pivot_envs.errors import InvalidTrajectory


def detect(record: Mapping[str, Any]) -> bool:
    """True for a tau-bench record (converted or original)."""
    return record.get("benchmark") == "tau-bench" or ("traj" in record and "task_id" in record)


def load_tools(record: Mapping[str, Any], data_path: str | Path | None) -> tuple[dict[str, Any], ...]:
    """The record's tool schemas: inline `tools`, else `tools_file` next to the data file."""
    if record.get("tools"):
        return tuple(record["tools"])
    name = record.get("tools_file")
    if not name or data_path is None:
        return ()
    path = Path(data_path).parent / name
    try:
        return tuple(json.loads(path.read_text(encoding="utf-8")))
    except OSError as e:
        raise InvalidTrajectory(f"tools_file {str(path)!r}: cannot read: {e.strerror or e}") from e


def from_tau_bench(
    record: Mapping[str, Any], *, data_path: str | Path | None = None, default_id: str = ""
) -> Trajectory:
    """One tau-bench record -> Trajectory (domain tool-use; reward, task and policy kept)."""
    raw = record.get("messages", record.get("traj"))
    if not isinstance(raw, list):
        raise InvalidTrajectory("tau-bench record: missing field 'messages' (or 'traj')")
    tau_domain = record.get("domain") or "airline"
    traj_id = record.get("id") or (
        f"tau_bench/{tau_domain}/task{record.get('task_id')}/trial{record.get('trial', 0)}"
        if "task_id" in record
        else default_id
    )
    messages = tuple(Message.from_json(m) for m in raw)
    reward = record.get("reward")
    context = {
        "benchmark": "tau-bench",
        "tau_domain": tau_domain,
        "task_id": record.get("task_id"),
        "trial": record.get("trial"),
    }
    if record.get("task"):
        context["task"] = record["task"]
    if tau_domain == "airline":
        context["world"] = "tau-airline"
    return Trajectory(
        id=str(traj_id),
        domain="tool-use",
        messages=messages,
        tools=load_tools(record, data_path),
        reward=float(reward) if isinstance(reward, (int, float)) else None,
        context=context,
        source=str(record.get("source") or ""),
    )


def to_tau_bench(trajectory: Trajectory) -> dict[str, Any]:
    """Trajectory -> converted tau-bench JSONL record (tools inline)."""
    ctx = trajectory.context
    return {
        "id": trajectory.id,
        "source": trajectory.source,
        "benchmark": "tau-bench",
        "domain": ctx.get("tau_domain", "airline"),
        "task_id": ctx.get("task_id"),
        "trial": ctx.get("trial"),
        "reward": trajectory.reward,
        "task": ctx.get("task"),
        "tools": [dict(t) for t in trajectory.tools],
        "messages": [m.to_json() for m in trajectory.messages],
    }
