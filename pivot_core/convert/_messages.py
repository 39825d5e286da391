"""Shared by converters: convert a source's message list, naming the index of a bad message."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pivot_core._model import Message
from pivot_core.errors import InvalidTrajectory


def convert_messages(raw: Sequence[Any], convert: Callable[[Any], Message]) -> list[Message]:
    """`convert` each source message; an error says which one (`messages[i]: ...`)."""
    messages = []
    for i, m in enumerate(raw):
        try:
            messages.append(convert(m))
        except (InvalidTrajectory, KeyError, TypeError, AttributeError) as e:
            raise InvalidTrajectory(f"messages[{i}]: {e}") from e
    return messages
