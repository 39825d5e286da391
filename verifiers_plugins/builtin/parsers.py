"""Completion parsers: OpenAI tool_calls JSON, Hermes/Qwen `<tool_call>` text, Terminus JSON, bare text.

A parser never raises: text it cannot read becomes an assistant message with that text as content.
JSON is decoded with `decode_json`, so a call whose JSON (or arguments string) holds an integer past
Python's 4,300-digit limit, NaN/Infinity, a lone surrogate or deep nesting is not a call: the whole
completion stays text (it scores 0 with the verifiers' reason) and `extra["parse_error"]` says why.
"""

from __future__ import annotations

import json
import json.encoder
from collections.abc import Callable
from typing import Any

from pivot_core import Message, ToolCall, UnsafeJSON, decode_json
from verifiers_plugins.hookspecs import hookimpl

_OPEN, _CLOSE = "<tool_call>", "</tool_call>"
_ENCODER = json.JSONEncoder(ensure_ascii=False)


def _encoder() -> Callable[[Any], str]:
    """`json.dumps(value, ensure_ascii=False)`, with the C encoder made once.

    `JSONEncoder.encode` builds a C encoder (and a dict of the containers it has seen) for every
    call: half the cost of encoding a tool call's arguments. This one is built once with the same
    settings; it skips the cycle check, which a value decoded from JSON text never needs.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # no C accelerator (another Python): the encoder itself
        return _ENCODER.encode
    iterencode = make(None, _ENCODER.default, json.encoder.encode_basestring, None, ": ", ", ", False, False, True)
    return lambda value: "".join(iterencode(value, 0))


_ENCODE = _encoder()


def _as_call(obj: Any) -> ToolCall | None:
    """A ToolCall from a decoded call object; None when it is not one.

    Raises:
        UnsafeJSON: an arguments string decodes to an unsafe value (a plain syntax error is kept:
            the verifiers reject it as invalid JSON, naming the call).
    """
    if not isinstance(obj, dict):
        return None
    fn = obj.get("function", obj)
    name = fn.get("name") if isinstance(fn, dict) else None
    if not isinstance(name, str) or not name:
        return None
    args = fn["arguments"] if "arguments" in fn else fn.get("parameters", {})
    call_id = str(obj.get("id") or "")
    if isinstance(args, str):
        _check_arguments(args)
        return ToolCall(name, args, call_id)
    try:
        text = _ENCODE(args)
    except (TypeError, ValueError):
        return None
    return ToolCall(name, text, call_id)


def _check_arguments(args: str) -> None:
    """Raise `UnsafeJSON` for an arguments string that decodes to an unsafe value."""
    if not args.strip():
        return
    try:
        decode_json(args)
    except UnsafeJSON:
        raise
    except json.JSONDecodeError:
        pass  # plain invalid JSON stays in the call: the verifiers reject it, naming the call


def parse_text(text: str, parse_error: str | None = None) -> Message:
    """The completion as plain assistant content (`parse_error` noted in `extra` when given)."""
    extra = {"parse_error": parse_error} if parse_error else {}
    return Message(role="assistant", content=text if isinstance(text, str) else str(text), extra=extra)


def tool_call_blocks(text: str) -> list[tuple[int, int, str]]:
    r"""`(start, end, body)` of each `<tool_call>...</tool_call>` block, the body stripped of whitespace.

    What `re.finditer(r"<tool_call>\s*(.*?)\s*</tool_call>", text, re.DOTALL)` finds (each opening
    tag pairs with the next closing tag; `\s` and `str.strip` are the same Unicode whitespace), by
    `str.find`: the regex's lazy scan cost as much as decoding the call.
    """
    blocks, pos = [], 0
    while (start := text.find(_OPEN, pos)) >= 0:
        close = text.find(_CLOSE, start + len(_OPEN))
        if close < 0:
            break
        pos = close + len(_CLOSE)
        blocks.append((start, pos, text[start + len(_OPEN) : close].strip()))
    return blocks


def parse_hermes(text: str) -> Message:
    """`<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks (Hermes, Qwen); rest is content."""
    if not isinstance(text, str) or _OPEN not in text:  # most completions of a group: no scan
        return parse_text(text)
    calls: list[ToolCall] = []
    outside: list[str] = []  # the text around the blocks: one pass finds both
    end = 0
    for start, stop, body in tool_call_blocks(text):
        try:
            call = _as_call(decode_json(body))
        except UnsafeJSON as e:
            return parse_text(text, f"<tool_call> block: {e.msg}")
        except json.JSONDecodeError:
            call = None
        if call is None:
            # A malformed block is kept as text: the verifiers will reject it with a reason.
            return parse_text(text)
        calls.append(call)
        outside.append(text[end:start])
        end = stop
    if not calls:
        return parse_text(text)
    outside.append(text[end:])
    content = "".join(outside).strip()
    return Message(role="assistant", content=content or None, tool_calls=tuple(calls))


def parse_openai(text: str) -> Message:
    """A JSON assistant message (`{"content", "tool_calls"}`) or a JSON list of tool calls."""
    if not isinstance(text, str):
        return parse_text(text)
    try:
        obj = decode_json(text)
        items = obj if isinstance(obj, list) else obj.get("tool_calls") if isinstance(obj, dict) else None
        calls = [_as_call(c) for c in items] if isinstance(items, list) else []
    except UnsafeJSON as e:
        return parse_text(text, f"JSON message: {e.msg}")
    except json.JSONDecodeError:
        return parse_text(text)
    if calls:
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
    if msg.tool_calls or "parse_error" in msg.extra:
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
