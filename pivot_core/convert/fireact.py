"""FireAct GPT-4 ReAct trajectories on HotpotQA (free-text web search through SerpAPI).

`search[query]` becomes a `search` call and `finish[answer]` an `answer` call. Their searches
ran on a live web engine, so no local corpus can replay them: every pivot is marked
`context["replayable"] = False`, and `retrieval_match` compares their queries as text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from pivot_core._model import Message, ToolCall, Trajectory
from pivot_core.browse._tools import BROWSE_TOOLS
from pivot_core.errors import InvalidTrajectory

FIREACT_TOOLS: dict[str, tuple[str, str]] = {"search": ("search", "query"), "finish": ("answer", "answer")}
_VERB = {tool: verb for verb, (tool, _) in FIREACT_TOOLS.items()}
_ACTION = re.compile(r"Action:\s*(\w+)\[(.*)\]\s*$", re.DOTALL)


def detect(record: Mapping[str, Any]) -> bool:
    """True for a FireAct record (`messages_original` beside `messages`)."""
    return isinstance(record.get("messages_original"), list) and isinstance(record.get("messages"), list)


def _assistant(n: int, content: str) -> Message:
    match = _ACTION.search(content)
    if match is None or match.group(1).lower() not in FIREACT_TOOLS:
        return Message("assistant", content)
    tool, arg = FIREACT_TOOLS[match.group(1).lower()]
    thought = content[: match.start()].strip()
    call = ToolCall(tool, json.dumps({arg: match.group(2)}, ensure_ascii=False), f"call_{n}")
    return Message("assistant", thought or None, (call,), extra={"fireact_content": content})


def from_fireact(record: Mapping[str, Any], *, default_id: str = "") -> Trajectory:
    """Read one FireAct record (see ../shared/data/browse/SOURCES.md) into a Trajectory."""
    traj_id = str(record.get("id") or default_id)
    if not traj_id:
        raise InvalidTrajectory("fireact record: missing field 'id' (and no default id given)")
    messages: list[Message] = []
    last_call: ToolCall | None = None
    for i, m in enumerate(record["messages"]):
        role, content = m["role"], m.get("content") or ""
        if role == "assistant":
            msg = _assistant(i, content)
            last_call = msg.tool_calls[0] if msg.tool_calls else None
            messages.append(msg)
        elif role == "tool" and last_call is not None:
            messages.append(Message("tool", content, tool_call_id=last_call.id, name=last_call.name))
            last_call = None
        else:
            messages.append(Message("user" if role == "tool" else role, content))
    answers = [
        json.loads(m.tool_calls[0].arguments)["answer"]
        for m in messages
        if m.tool_calls and m.tool_calls[0].name == "answer"
    ]
    success = record.get("success")
    context = {
        "source_format": "fireact",
        "question": record.get("question"),
        "replayable": False,
        "agent_model": record.get("agent_model"),
    }
    if answers and success:
        context["gold_answer"] = answers[-1]  # FireAct kept only episodes graded correct
    return Trajectory(
        id=traj_id,
        domain="browse",
        messages=tuple(messages),
        tools=BROWSE_TOOLS,
        reward=None if success is None else float(bool(success)),
        context={k: v for k, v in context.items() if v is not None},
        source=str(record.get("source") or ""),
    )


def to_fireact(trajectory: Trajectory) -> dict[str, Any]:
    """Write a Trajectory back as a FireAct record (observations as role "tool")."""
    messages = []
    for m in trajectory.messages:
        if m.role == "assistant":
            content = m.extra.get("fireact_content")
            if content is None and m.tool_calls:
                call = m.tool_calls[0]
                arg = next(iter((call.parsed_arguments() or {}).values()), "")
                content = f"{m.text}\nAction: {_VERB.get(call.name, call.name)}[{arg}]".strip()
            messages.append({"role": "assistant", "content": content if content is not None else m.text})
        else:
            messages.append({"role": m.role, "content": m.text})
    ctx = trajectory.context
    out = {
        "id": trajectory.id,
        "source": trajectory.source,
        "question": ctx.get("question"),
        "agent_model": ctx.get("agent_model"),
        "messages_original": [dict(m, role="user") if m["role"] == "tool" else m for m in messages],
        "messages": messages,
    }
    if trajectory.reward is not None:
        out["success"] = trajectory.reward >= 1.0
    return out
