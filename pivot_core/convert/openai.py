"""OpenAI-chat JSONL: one trajectory per line, `{id, messages, tools, reward?, domain?, context?}`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pivot_core._model import Message, Trajectory
from pivot_core.errors import InvalidTrajectory


def detect(record: Mapping[str, Any]) -> bool:
    """True for a record with a `messages` list."""
    return isinstance(record.get("messages"), list) and "responses_create_params" not in record


def from_openai(record: Mapping[str, Any], *, domain: str | None = None, default_id: str = "") -> Trajectory:
    """Read one OpenAI-chat record into a Trajectory (`domain` overrides the record's)."""
    dom = domain or record.get("domain") or "tool-use"
    traj_id = str(record.get("id") or default_id)
    if not traj_id:
        raise InvalidTrajectory("openai record: missing field 'id' (and no default id given)")
    messages = []
    for i, m in enumerate(record["messages"]):
        try:
            messages.append(Message.from_json(m))
        except InvalidTrajectory as e:
            raise InvalidTrajectory(f"messages[{i}]: {e}") from e
    reward = record.get("reward")
    return Trajectory(
        id=traj_id,
        domain=dom,
        messages=tuple(messages),
        tools=tuple(record.get("tools") or ()),
        reward=float(reward) if isinstance(reward, (int, float)) else None,
        context=dict(record.get("context") or {}),
        source=str(record.get("source") or ""),
    )


def to_openai(trajectory: Trajectory) -> dict[str, Any]:
    """Write a Trajectory as an OpenAI-chat record (inverse of `from_openai`)."""
    return trajectory.to_json()
