"""The comparable forms of actions: what two turns must share to be the same action, as pure functions."""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

from pivot_core._actions import message_commands, normalize_shell, parse_terminus, typed_action
from pivot_core._model import Message

_QUOTES = re.compile(r"[\"'`]")
_DIGIT_TOKEN = re.compile(r"[\w\-.:/@#+$]*\d[\w\-.:/@#+]*")


def digit_tokens(text: str) -> list[str]:
    """Ids, numbers and dates inside free text (sorted, case-folded): they must agree exactly.

    "move FQ8APE to HAT171" and "move FQ8APX to HAT171" read alike; they are two different requests.
    """
    return sorted(t.strip(".,:;").casefold() for t in _DIGIT_TOKEN.findall(text))


def normalize_text(text: str) -> str:
    """NFKC, case-folded, punctuation-light, whitespace-collapsed."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = _QUOTES.sub("", text)
    return " ".join(text.split())


def canonical(value: Any) -> Any:
    """Numbers as one type (integral floats become ints); containers recursively."""
    if isinstance(value, bool) or value is None or isinstance(value, str) or isinstance(value, int):
        return value  # an int stays exact (a float of a 400-digit int would overflow)
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, list):
        return [canonical(v) for v in value]
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in value.items()}
    return value


def normalized_action(message: Message) -> tuple[str, tuple[str, ...]]:
    """`(kind, items)`: the comparable form of a turn (kind is calls, commands or text).

    Two turns with the same form are the same action (the chain accepts them without running
    anything): commands are compared by `normalize_shell`, which only makes changes that keep meaning.
    """
    if message.tool_calls:
        items = []
        for c in message.tool_calls:
            args = c.parsed_arguments()
            body = json.dumps(canonical(args), sort_keys=True) if args is not None else c.arguments.strip()
            items.append(f"{c.name}({body})")
        return "calls", tuple(sorted(items))
    if parse_terminus(message.content) is not None:
        # What the terminal runs (Enter included) and what it is left holding, not the keystrokes' words.
        typed = typed_action(message)
        items = tuple(normalize_shell(c) for c in typed.commands)
        if typed.pending:
            items += (f"(typed, not run) {typed.pending}",)
        if items:
            return "commands", items
    else:
        cmds = message_commands(message)
        if cmds:
            return "commands", tuple(normalize_shell(c) for c in cmds)
    return "text", (normalize_text(message.text),)
