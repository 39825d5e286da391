"""Custom Gymnasium spaces for chat histories and free-form completions.

Gymnasium's `Text` space only holds a fixed character set, but a completion is any Unicode
string and an observation is a chat, so both get small spaces of their own. Vector envs batch
them through Gymnasium's generic `Space` path (a `Tuple` of copies).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium.spaces import Space

from pivot_envs._model import ROLES

# Printable ASCII, Latin-1, Greek/Cyrillic, CJK, and emoji ranges: random completions should hit
# JSON-breaking characters and multi-byte text, not only letters.
_CODEPOINT_RANGES = ((0x20, 0x7E), (0xA0, 0xFF), (0x370, 0x4FF), (0x4E00, 0x4FFF), (0x1F300, 0x1F5FF))


class CompletionSpace(Space[str]):
    """Any Unicode string up to `max_length` characters: one assistant completion."""

    def __init__(self, max_length: int = 65536, seed: int | np.random.Generator | None = None) -> None:
        if max_length < 1:
            raise ValueError(f"CompletionSpace: expected max_length >= 1, got {max_length}")
        self.max_length = max_length
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        """Completions have no fixed-size numeric form."""
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """A random string of 0-64 characters drawn from several Unicode blocks."""
        n = int(self.np_random.integers(0, min(64, self.max_length) + 1))
        chars = []
        for _ in range(n):
            lo, hi = _CODEPOINT_RANGES[int(self.np_random.integers(len(_CODEPOINT_RANGES)))]
            chars.append(chr(int(self.np_random.integers(lo, hi + 1))))
        return "".join(chars)

    def contains(self, x: Any) -> bool:
        """True for a str of at most `max_length` characters."""
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"CompletionSpace(max_length={self.max_length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CompletionSpace) and other.max_length == self.max_length


class ChatSpace(Space[dict]):
    """Observations `{"pivot_id": str, "messages": [OpenAI chat message dicts], "tools": [schemas]}`."""

    def __init__(self, seed: int | np.random.Generator | None = None) -> None:
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        """Chats have no fixed-size numeric form."""
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> dict[str, Any]:
        """A random short chat (system, user, assistant/tool turns) with no tools."""
        words = CompletionSpace(max_length=32)
        words.np_random = self.np_random
        n = int(self.np_random.integers(1, 5))
        messages = [{"role": "system", "content": words.sample()}]
        messages += [{"role": ROLES[1 + i % 2], "content": words.sample()} for i in range(n)]
        return {"pivot_id": f"sample#{n}", "messages": messages, "tools": []}

    def contains(self, x: Any) -> bool:
        """Structure check: the three keys, known roles, str-or-None contents, dict tools."""
        if not isinstance(x, Mapping) or set(x) != {"pivot_id", "messages", "tools"}:
            return False
        if not isinstance(x["pivot_id"], str) or not isinstance(x["messages"], list):
            return False
        for m in x["messages"]:
            if not isinstance(m, Mapping) or m.get("role") not in ROLES:
                return False
            if not (m.get("content") is None or isinstance(m.get("content"), str)):
                return False
        return isinstance(x["tools"], list) and all(isinstance(t, Mapping) for t in x["tools"])

    def __repr__(self) -> str:
        return "ChatSpace()"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ChatSpace)
