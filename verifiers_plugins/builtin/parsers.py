"""Completion parsers: OpenAI tool_calls JSON, Hermes/Qwen `<tool_call>` text, Terminus JSON, bare text.

A parser never raises: text it cannot read becomes an assistant message with that text as content.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from pivot_envs._model import Message, ToolCall
from verifiers_plugins.hookspecs import hookimpl

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


def _as_call(obj: Any) -> ToolCall | None:
    if not isinstance(obj, dict):
        return None
    fn = obj.get("function", obj)
    name = fn.get("name") if isinstance(fn, dict) else None
    if not isinstance(name, str) or not name:
        return None
    args = fn.get("arguments", fn.get("parameters", {}))
    if not isinstance(args, str):
        try:
            args = json.dumps(args, ensure_ascii=False)
        except (TypeError, ValueError):
            return None
    return ToolCall(name=name, arguments=args, id=str(obj.get("id") or ""))


def parse_text(text: str) -> Message:
    """The completion as plain assistant content."""
    return Message(role="assistant", content=text if isinstance(text, str) else str(text))


def parse_hermes(text: str) -> Message:
    """`<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks (Hermes, Qwen); rest is content."""
    if not isinstance(text, str):
        return parse_text(text)
    calls: list[ToolCall] = []
    for block in _TOOL_CALL.findall(text):
        try:
            call = _as_call(json.loads(block))
        except (json.JSONDecodeError, RecursionError):
            call = None
        if call is None:
            # A malformed block is kept as text: the verifiers will reject it with a reason.
            return parse_text(text)
        calls.append(call)
    if not calls:
        return parse_text(text)
    content = _TOOL_CALL.sub("", text).strip()
    return Message(role="assistant", content=content or None, tool_calls=tuple(calls))


def parse_openai(text: str) -> Message:
    """A JSON assistant message (`{"content", "tool_calls"}`) or a JSON list of tool calls."""
    if not isinstance(text, str):
        return parse_text(text)
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return parse_text(text)
    items = obj if isinstance(obj, list) else obj.get("tool_calls") if isinstance(obj, dict) else None
    if isinstance(items, list) and items:
        calls = [_as_call(c) for c in items]
        if all(c is not None for c in calls):
            content = obj.get("content") if isinstance(obj, dict) else None
            return Message(
                role="assistant",
                content=content if isinstance(content, str) else None,
                tool_calls=tuple(c for c in calls if c is not None),
            )
    if isinstance(obj, dict) and isinstance(obj.get("content"), str) and obj.get("role") == "assistant":
        return Message(role="assistant", content=obj["content"])
    return parse_text(text)


def parse_auto(text: str) -> Message:
    """Hermes tags first, then an OpenAI JSON message, else bare text (Terminus JSON stays text)."""
    msg = parse_hermes(text)
    if msg.tool_calls:
        return msg
    return parse_openai(text)


PARSERS: dict[str, Callable[[str], Message]] = {
    "text": parse_text,
    "terminus": parse_text,  # the Terminus JSON is the content; verifiers read it with parse_terminus
    "hermes": parse_hermes,
    "openai": parse_openai,
    "auto": parse_auto,
}


@hookimpl
def register_parsers(register: Callable[..., None]) -> None:
    """Register the built-in parsers."""
    for name, fn in PARSERS.items():
        register(name, fn)
