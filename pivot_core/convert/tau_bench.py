"""tau-bench trajectories: airline historical runs and the retail few-shot demonstrations.

Three inputs, one converter:
- the converted JSONL record `{id, benchmark: "tau-bench", domain, messages (OpenAI chat,
  system = policy), reward, task, tools_file, ...}`; `tools_file` is resolved next to the data file;
- the original release, a JSON list of `{task_id, reward, info: {task, source, ...}, traj, trial}`;
  its tool schemas come from `tau_bench_<domain>_tools.json` next to the file or one folder up,
  else from the bundled airline schemas;
- the retail few-shot demonstrations, `{messages_display: "user: ... assistant: ..."}` (raw) or
  split into turns (converted). The source renders tool-calling turns as `assistant: None`, so the
  tool name and arguments are lost: such a turn stays in the history as an assistant message with
  no content and no calls (`extra["tool_call_redacted"] = True`), followed by its tool output,
  and never becomes a pivot (a pivot there would demonstrate a fake action).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from pivot_core._model import Message, Trajectory
from pivot_core.convert._documents import read_document
from pivot_core.errors import InvalidTrajectory

_CORE = ("role", "content", "tool_calls", "tool_call_id", "name", "extra")
_DISPLAY_TURN = re.compile(r"^(system|user|assistant|tool): ", re.MULTILINE)


def detect(record: Mapping[str, Any]) -> bool:
    """True for a tau-bench record (converted, original, or few-shot display text)."""
    return (
        record.get("benchmark") == "tau-bench"
        or ("traj" in record and "task_id" in record)
        or isinstance(record.get("messages_display"), str)
    )


def _tools_file(path: Path) -> tuple[dict[str, Any], ...]:
    tools = read_document(path)  # a DataFileError names the tools file itself
    if not isinstance(tools, list):
        raise InvalidTrajectory(f"tools_file {str(path)!r}: expected a JSON list of tool schemas")
    return tuple(tools)


def load_tools(
    record: Mapping[str, Any], data_path: str | Path | None, domain: str = "airline"
) -> tuple[dict[str, Any], ...]:
    """The record's tool schemas: inline `tools`, `tools_file`, a sibling schema file, or the bundled ones."""
    if record.get("tools"):
        return tuple(record["tools"])
    folder = Path(data_path).parent if data_path is not None else None
    if record.get("tools_file") and folder is not None:
        return _tools_file(folder / record["tools_file"])
    if "traj" not in record:
        return ()  # converted records without tools_file (few-shot text) have no schemas
    name = f"tau_bench_{domain}_tools.json"
    for candidate in [folder / name, folder.parent / name] if folder is not None else []:
        if candidate.is_file():
            return _tools_file(candidate)
    bundled = Path(str(resources.files("pivot_core") / "data" / name))
    return _tools_file(bundled) if bundled.is_file() else ()


def parse_display(text: str) -> list[dict[str, Any]]:
    """`messages_display` text -> messages; `assistant: None` is a redacted tool-call turn."""
    starts = list(_DISPLAY_TURN.finditer(text))
    if not starts or starts[0].start() != 0:
        raise InvalidTrajectory("messages_display: expected text starting with 'user: ' or 'assistant: '")
    out = []
    for k, m in enumerate(starts):
        end = starts[k + 1].start() if k + 1 < len(starts) else len(text)
        content = text[m.end() : end].rstrip("\n")
        if m.group(1) == "assistant" and content == "None":
            out.append({"role": "assistant", "content": None, "tool_call_redacted": True})
        else:
            out.append({"role": m.group(1), "content": content})
    return out


def _message(m: Mapping[str, Any]) -> Message:
    msg = Message.from_json(m)
    extra = {k: v for k, v in m.items() if k not in _CORE and v is not None}
    return Message(msg.role, msg.content, msg.tool_calls, msg.tool_call_id, msg.name, {**msg.extra, **extra})


def from_tau_bench(
    record: Mapping[str, Any], *, data_path: str | Path | None = None, default_id: str = ""
) -> Trajectory:
    """One tau-bench record -> Trajectory (domain tool-use; reward, task and policy kept)."""
    if not detect(record):
        raise InvalidTrajectory(
            "expected a tau-bench record (benchmark 'tau-bench', traj + task_id, or "
            f"messages_display), got keys {sorted(record)[:8]}"
        )
    raw = record.get("messages", record.get("traj"))
    if isinstance(record.get("messages_display"), str):
        raw = parse_display(record["messages_display"])
    if not isinstance(raw, list):
        raise InvalidTrajectory("tau-bench record: missing field 'messages' (or 'traj', 'messages_display')")
    info = record.get("info") if isinstance(record.get("info"), Mapping) else {}
    tau_domain = record.get("domain") or ("retail" if "messages_display" in record else "airline")
    traj_id = record.get("id") or (
        f"tau_bench/{tau_domain}/task{record.get('task_id')}/trial{record.get('trial', 0)}"
        if "task_id" in record
        else default_id
    )
    if not traj_id:
        raise InvalidTrajectory("tau-bench record: missing field 'id' (and no default id given)")
    messages = []
    for i, m in enumerate(raw):
        try:
            messages.append(_message(m))
        except (InvalidTrajectory, AttributeError) as e:
            raise InvalidTrajectory(f"messages[{i}]: {e}") from e
    reward = record.get("reward")
    context: dict[str, Any] = {
        "benchmark": "tau-bench",
        "tau_domain": tau_domain,
        "task_id": record.get("task_id"),
        "trial": record.get("trial"),
    }
    task = record.get("task") or info.get("task")
    if task:
        context["task"] = task
    if tau_domain == "airline":
        context["world"] = "tau-airline"
    return Trajectory(
        id=str(traj_id),
        domain="tool-use",
        messages=tuple(messages),
        tools=load_tools(record, data_path, tau_domain),
        reward=float(reward) if isinstance(reward, (int, float)) else None,
        context=context,
        source=str(record.get("source") or info.get("source") or ""),
    )


def to_tau_bench(trajectory: Trajectory) -> dict[str, Any]:
    """Trajectory -> converted tau-bench JSONL record (tools inline, source fields flattened back)."""
    ctx = trajectory.context
    messages = []
    for m in trajectory.messages:
        row = m.to_json()
        row.update(row.pop("extra", {}))
        messages.append(row)
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
        "messages": messages,
    }
