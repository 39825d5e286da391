"""Rendering actions to the text a policy emits, and pivots to chat observations."""

from __future__ import annotations

import json
from typing import Any

from pivot_core._model import Message, Pivot

# The parser each domain's completions go through (names registered by the parser plugins).
DOMAIN_PARSERS = {"tool-use": "hermes", "swe": "hermes", "terminal": "hermes", "browse": "hermes"}


def render_completion(message: Message, domain: str) -> str:
    """The completion text a policy would emit for `message`; the domain's parser reads it back.

    Tool calls are written in the Hermes/Qwen form `<tool_call>{"name", "arguments"}</tool_call>`
    after any text content; text turns (including Terminus JSON) are their content.
    """
    parts = [message.content.strip()] if message.content and message.content.strip() else []
    for call in message.tool_calls:
        args = call.parsed_arguments()
        payload = {"name": call.name, "arguments": args if args is not None else call.arguments}
        parts.append("<tool_call>\n" + json.dumps(payload, ensure_ascii=False) + "\n</tool_call>")
    if not message.tool_calls:
        return message.content or ""
    return "\n".join(parts)


def chat_message(message: Message) -> dict[str, Any]:
    """A message as the policy sees it: OpenAI shape without source-format extras."""
    out = message.to_json()
    out.pop("extra", None)
    return out


def observation(pivot: Pivot) -> dict[str, Any]:
    """The env observation of a pivot: its id, history and tools."""
    return {
        "pivot_id": pivot.id,
        "messages": [chat_message(m) for m in pivot.history],
        "tools": [dict(t) for t in pivot.tools],
    }
