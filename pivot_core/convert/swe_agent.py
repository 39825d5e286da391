"""SWE-agent trajectories and demonstrations: function-calling tools and classic text commands.

Inputs: the converted JSONL (`{id, kind, exit_status, submission_patch, messages, trajectory_steps}`
with `tool_calls_raw` / `tool_call_ids_raw` kept as the original Python-repr strings), an original
`.traj` (`{history: [...], ...}`) and a demonstration `.yaml` (`{history, replay_config}`).

- Function-calling turns (`str_replace_editor`, `bash`, `find_file`, `submit`, ...) become
  assistant tool calls. Python-repr strings are read with `ast.literal_eval` (never `eval`).
- Classic text-command turns stay text: the thought plus the command in a bare ``` fence, as the
  agent emitted it; when the content lacks the recorded `action`, it is appended in a fence so the
  pivot carries its action. Observations keep their role (tool or user).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from pivot_core._model import Message, ToolCall, Trajectory
from pivot_core.convert._messages import convert_messages
from pivot_core.errors import InvalidTrajectory

_KEEP = ("thought", "action", "message_type", "agent")

EXPECTED = "a SWE-agent record (id 'swe-agent/...', trajectory_steps, or a .traj/.yaml history)"


def detect(record: Mapping[str, Any]) -> bool:
    """True for a SWE-agent record: converted JSONL, `.traj` or demonstration YAML."""
    if str(record.get("id", "")).startswith("swe-agent/") or "trajectory_steps" in record:
        return True
    return isinstance(record.get("history"), list) and (
        "replay_config" in record
        or "info" in record
        or "trajectory" in record
        or "environment" in record
        or set(record) == {"history"}
    )


def literal(value: Any, field: str) -> Any:
    """A Python-repr string (SWE-agent `tool_calls` dumps) read safely; other values pass through."""
    if not isinstance(value, str):
        return value
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError, MemoryError, RecursionError) as e:
        raise InvalidTrajectory(f"{field}: not a Python literal: {value[:80]!r}") from e


def _calls(m: Mapping[str, Any]) -> tuple[ToolCall, ...]:
    raw = m.get("tool_calls_raw", m.get("tool_calls"))
    items = literal(raw, "tool_calls") if raw is not None else []
    if not isinstance(items, list):
        raise InvalidTrajectory(f"tool_calls: expected a list, got {type(items).__name__}")
    return tuple(ToolCall.from_json(c) for c in items)


def _call_id(m: Mapping[str, Any]) -> str | None:
    raw = m.get("tool_call_ids_raw", m.get("tool_call_ids"))
    ids = literal(raw, "tool_call_ids") if raw is not None else None
    if isinstance(ids, list) and ids:
        return str(ids[0])
    return m.get("tool_call_id")


def _message(m: Mapping[str, Any]) -> Message:
    extra = {k: m[k] for k in _KEEP if m.get(k) is not None}
    content = m.get("content")
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    role = m["role"]
    if role == "assistant":
        calls = _calls(m)
        action = m.get("action")
        if not calls and isinstance(action, str) and action.strip() and action.strip() not in (content or ""):
            extra["content_before_action"] = content
            content = f"{content or ''}\n```\n{action.strip()}\n```".lstrip("\n")
        return Message("assistant", content, tool_calls=calls, extra=extra)
    if role == "tool":
        return Message("tool", content, tool_call_id=_call_id(m), extra=extra)
    return Message(role, content, extra=extra)


def from_swe_agent(record: Mapping[str, Any], *, default_id: str = "") -> Trajectory:
    """One SWE-agent record -> Trajectory (domain swe; reward 1.0 for a submitted run is not assumed)."""
    if not detect(record):
        raise InvalidTrajectory(f"expected {EXPECTED}, got keys {sorted(record)[:8]}")
    raw = record.get("messages", record.get("history"))
    if not isinstance(raw, list):
        raise InvalidTrajectory("swe-agent record: missing field 'messages' (or 'history')")
    messages = convert_messages(raw, _message)
    info = record.get("info") if isinstance(record.get("info"), Mapping) else {}
    context = {
        "agent": "swe-agent",
        "kind": record.get("kind"),
        "exit_status": record.get("exit_status", info.get("exit_status")),
        "submission_patch": record.get("submission_patch", info.get("submission")),
        "action_format": "tool_call" if any(m.tool_calls for m in messages) else "swe_agent_text",
    }
    traj_id = record.get("id") or default_id
    if not traj_id:
        raise InvalidTrajectory("swe-agent record: missing field 'id' (and no default id given)")
    return Trajectory(
        id=str(traj_id),
        domain="swe",
        messages=tuple(messages),
        context={k: v for k, v in context.items() if v is not None},
        source=str(record.get("source") or ""),
    )


def to_swe_agent(trajectory: Trajectory) -> dict[str, Any]:
    """Trajectory -> converted SWE-agent JSONL record (tool calls as JSON lists, not repr strings)."""
    messages = []
    for m in trajectory.messages:
        row: dict[str, Any] = {"role": m.role, "content": m.content}
        extra = {k: v for k, v in m.extra.items() if k != "content_before_action"}
        if "content_before_action" in m.extra:
            row["content"] = m.extra["content_before_action"]
        if m.tool_calls:
            row["tool_calls"] = [c.to_json() for c in m.tool_calls]
        if m.role == "tool" and m.tool_call_id:
            row["tool_call_ids"] = [m.tool_call_id]
        row.update(extra)
        messages.append(row)
    ctx = trajectory.context
    return {
        "id": trajectory.id,
        "source": trajectory.source,
        "kind": ctx.get("kind"),
        "exit_status": ctx.get("exit_status"),
        "submission_patch": ctx.get("submission_patch"),
        "messages": messages,
        "trajectory_steps": [],
    }
