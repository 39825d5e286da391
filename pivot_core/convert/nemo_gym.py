"""NeMo Gym pivot rows, read and written back field for field.

A row is `{responses_create_params: {input: [Responses items], tools, ...}, expected_action |
expected_answer, agent_ref?, uuid?, metadata?, ...}`. Input items become chat messages: message
items keep their role, consecutive `function_call` items become one assistant turn with tool
calls, `function_call_output` items become tool messages, and `reasoning` items ride along with
the message that follows them. Each message keeps its source items in `extra["nemo_items"]` and
the writer gives them back when the message is unchanged, so a row survives a round trip intact.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pivot_core._model import Message, Pivot, ToolCall, as_tool_schemas
from pivot_core.errors import InvalidTrajectory

ANSWER_KEYS = ("expected_action", "expected_answer")


def detect(record: Mapping[str, Any]) -> bool:
    """True for a NeMo Gym row."""
    return "responses_create_params" in record and any(k in record for k in ANSWER_KEYS)


def guess_domain(row: Mapping[str, Any]) -> str:
    """Domain from the agent name / answer key (terminus answers are terminal turns)."""
    agent = json.dumps(row.get("agent_ref") or {}) + json.dumps(row.get("metadata") or {})
    # The agent name decides first: swe_pivot rollout rows carry `expected_answer` too. A word
    # boundary keeps "answer" (which contains "swe") from reading as SWE.
    if re.search(r"(?<![a-z])swe(?![a-z])", agent.lower()):
        return "swe"
    if "expected_answer" in row or "terminus" in agent or "terminal" in agent or "harness" in row:
        return "terminal"
    return "tool-use"


def _text(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    raise InvalidTrajectory(f"message content: expected str or list of parts, got {type(content).__name__}")


def _call(item: Mapping[str, Any]) -> ToolCall:
    args = item.get("arguments", "{}")
    return ToolCall(
        name=item["name"],
        arguments=args if isinstance(args, str) else json.dumps(args),
        id=str(item.get("call_id") or item.get("id") or ""),
    )


def items_to_messages(items: Sequence[Mapping[str, Any]]) -> tuple[list[Message], list[dict[str, Any]]]:
    """Responses input items -> messages, plus trailing items (reasoning) not attached to a message."""
    messages: list[Message] = []
    pending: list[dict[str, Any]] = []  # items waiting for the message they belong to
    i = 0
    while i < len(items):
        item = dict(items[i])
        kind = item.get("type") or ("message" if "role" in item else None)
        if kind == "reasoning":
            pending.append(item)
            i += 1
        elif kind == "function_call":
            group = [item]
            while i + 1 < len(items) and items[i + 1].get("type") == "function_call":
                i += 1
                group.append(dict(items[i]))
            messages.append(
                Message(
                    role="assistant",
                    content=None,
                    tool_calls=tuple(_call(g) for g in group),
                    extra={"nemo_items": pending + group},
                )
            )
            pending = []
            i += 1
        elif kind == "function_call_output":
            out = item.get("output")
            messages.append(
                Message(
                    role="tool",
                    content=out if isinstance(out, str) else json.dumps(out),
                    tool_call_id=str(item.get("call_id", "")),
                    extra={"nemo_items": pending + [item]},
                )
            )
            pending = []
            i += 1
        elif kind == "message":
            role = item["role"]
            role = "system" if role == "developer" else role
            messages.append(
                Message(role=role, content=_text(item.get("content")), extra={"nemo_items": pending + [item]})
            )
            pending = []
            i += 1
        else:
            raise InvalidTrajectory(f"input[{i}]: unknown item type {kind!r}")
    return messages, pending


def message_to_items(message: Message) -> list[dict[str, Any]]:
    """A message -> Responses items; the original items when the message is unchanged."""
    original = message.extra.get("nemo_items") if message.extra else None
    if original:
        reread, _ = items_to_messages(original)
        if len(reread) == 1 and reread[0] == message:
            return [dict(x) for x in original]
    if message.tool_calls:
        return [
            {"type": "function_call", "name": c.name, "arguments": c.arguments, "call_id": c.id}
            for c in message.tool_calls
        ]
    if message.role == "tool":
        return [{"type": "function_call_output", "call_id": message.tool_call_id or "", "output": message.text}]
    return [{"role": message.role, "content": message.content or "", "type": "message"}]


def expected_to_message(row: Mapping[str, Any]) -> Message:
    """`expected_action` (message / function_call / function_call_batch) or `expected_answer` -> Message."""
    if "expected_answer" in row:
        answer = row["expected_answer"]
        return Message(role="assistant", content=answer if isinstance(answer, str) else json.dumps(answer))
    action = row["expected_action"]
    kind = action.get("type")
    if kind == "message":
        return Message(role="assistant", content=_text(action.get("content")))
    if kind == "function_call":
        return Message(role="assistant", tool_calls=(_call(action),))
    if kind == "function_call_batch":
        return Message(role="assistant", tool_calls=tuple(_call(c) for c in action["calls"]))
    raise InvalidTrajectory(
        f"expected_action.type: expected message, function_call or function_call_batch, got {kind!r}"
    )


def message_to_expected(message: Message, key: str) -> Any:
    """Inverse of `expected_to_message` for the row's answer key."""
    if key == "expected_answer":
        return message.content
    if not message.tool_calls:
        return {"type": "message", "content": message.content}
    calls = [{"type": "function_call", "name": c.name, "arguments": c.arguments} for c in message.tool_calls]
    if len(calls) == 1:
        return calls[0]
    return {"type": "function_call_batch", "calls": calls}


def from_nemo_gym(row: Mapping[str, Any], *, default_id: str, domain: str | None = None) -> Pivot:
    """One NeMo Gym row -> one Pivot (its id: the row's uuid or `default_id`, plus the turn index)."""
    rcp = row["responses_create_params"]
    history, trailing = items_to_messages(rcp.get("input") or [])
    expert = expected_to_message(row)
    key = "expected_answer" if "expected_answer" in row else "expected_action"
    expert = Message(
        role="assistant", content=expert.content, tool_calls=expert.tool_calls, extra={"nemo_expected": row[key]}
    )
    tools = as_tool_schemas(rcp.get("tools") or row.get("declared_tools") or ())
    dom = domain or guess_domain(row)
    rest = {k: v for k, v in row.items() if k not in ("responses_create_params", key)}
    context: dict[str, Any] = {
        "source_format": "nemo-gym",
        "nemo_answer_key": key,
        "nemo_row": rest,
        "nemo_params": {k: v for k, v in rcp.items() if k != "input"},
        "nemo_trailing_items": trailing,
    }
    if key == "expected_answer":
        context["format"] = "terminus"
    base = str(row.get("uuid") or default_id)
    return Pivot(
        id=f"{base}#{len(history)}", domain=dom, history=tuple(history), expert=expert, tools=tools, context=context
    )


def to_nemo_gym(pivot: Pivot) -> dict[str, Any]:
    """One Pivot -> one NeMo Gym row; a pivot read from a row gives that row back."""
    ctx = pivot.context
    key = ctx.get("nemo_answer_key") or ("expected_answer" if ctx.get("format") == "terminus" else "expected_action")
    items: list[dict[str, Any]] = []
    for m in pivot.history:
        items.extend(message_to_items(m))
    items.extend(dict(x) for x in ctx.get("nemo_trailing_items") or ())
    params = dict(ctx.get("nemo_params") or {})
    if "nemo_params" not in ctx and pivot.tools:
        params["tools"] = [{"type": "function", **dict(t.get("function", t))} for t in pivot.tools]
    expected = pivot.expert.extra.get("nemo_expected") if pivot.expert.extra else None
    if (
        expected is None
        or expected_to_message({key: expected}).tool_calls != pivot.expert.tool_calls
        or expected_to_message({key: expected}).content != pivot.expert.content
    ):
        expected = message_to_expected(pivot.expert, key)
    row = dict(ctx.get("nemo_row") or {})
    if "nemo_row" not in ctx:
        row["uuid"] = pivot.id
    row["responses_create_params"] = {"input": items, **params} if "input" not in params else params
    row[key] = expected
    return row
