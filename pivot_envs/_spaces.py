"""Custom Gymnasium spaces for chat histories and free-form completions.

Gymnasium's `Text` space only holds a fixed character set, but a completion is any Unicode
string and an observation is a chat, so both get small spaces of their own. Vector envs batch
them through Gymnasium's generic `Space` path (a tuple of copies). `AsyncVectorEnv` shares
observations through shared memory by default; `ChatSpace` supports that with one fixed-size
byte slot per env holding the observation as JSON (see `SharedChats`).
"""

from __future__ import annotations

import json
import multiprocessing as mp
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

import numpy as np
from gymnasium.spaces import Space
from gymnasium.vector.utils import create_shared_memory, read_from_shared_memory, write_to_shared_memory

from pivot_core import ROLES

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
    """Observations `{"pivot_id": str, "messages": [OpenAI chat message dicts], "tools": [schemas]}`.

    Args:
        seed: seeds `sample`.
        shared_memory_bytes: the shared-memory slot of one env in an `AsyncVectorEnv` (the
            observation as UTF-8 JSON must fit; a larger one is an error naming this argument).
    """

    def __init__(self, seed: int | np.random.Generator | None = None, shared_memory_bytes: int = 1 << 20) -> None:
        if shared_memory_bytes < 16:
            raise ValueError(f"ChatSpace: expected shared_memory_bytes >= 16, got {shared_memory_bytes}")
        self.shared_memory_bytes = shared_memory_bytes
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


# -- shared memory for AsyncVectorEnv -----------------------------------------------------------
# Gymnasium hands each worker the buffer, calls `write_to_shared_memory` there after every reset
# and step, and reads the batch in the parent through the object `read_from_shared_memory` gave
# once at start, copied with `deepcopy` unless `copy=False`: so that object is a live view.

_LENGTH = 4  # each slot starts with the payload length, little-endian uint32


class SharedChats(Sequence):
    """A live view of the observations of an `AsyncVectorEnv` of pivot envs, one slot per env.

    Indexing decodes a slot; `deepcopy` (what the vector env returns by default) gives a tuple of
    observation dicts, the same batch a sync vector env returns.
    """

    def __init__(self, buffer: Any, n: int, slot: int) -> None:
        self._buffer, self._n, self._slot = buffer, n, slot

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, index: int) -> dict[str, Any]:  # type: ignore[override]
        if not -self._n <= index < self._n:
            raise IndexError(f"SharedChats: index {index} out of range for {self._n} envs")
        view = memoryview(self._buffer).cast("B")[(index % self._n) * self._slot :][: self._slot]
        size = int.from_bytes(view[:_LENGTH], "little")
        return json.loads(bytes(view[_LENGTH : _LENGTH + size])) if size else {}

    def __deepcopy__(self, memo: dict) -> tuple[dict[str, Any], ...]:
        return tuple(self)


@create_shared_memory.register(ChatSpace)
def _create_chat_memory(space: ChatSpace, n: int = 1, ctx: ModuleType = mp) -> Any:
    return ctx.Array("B", n * space.shared_memory_bytes, lock=False)


@read_from_shared_memory.register(ChatSpace)
def _read_chat_memory(space: ChatSpace, shared_memory: Any, n: int = 1) -> SharedChats:
    return SharedChats(shared_memory, n, space.shared_memory_bytes)


@write_to_shared_memory.register(ChatSpace)
def _write_chat_memory(space: ChatSpace, index: int, value: Mapping[str, Any], shared_memory: Any) -> None:
    payload = json.dumps(value, ensure_ascii=False).encode("utf-8")
    if len(payload) > space.shared_memory_bytes - _LENGTH:
        raise ValueError(
            f"ChatSpace: an observation of {len(payload)} bytes exceeds the shared-memory slot of "
            f"{space.shared_memory_bytes} bytes; raise ChatSpace(shared_memory_bytes=...) or make the "
            "vector env with vector_kwargs={'shared_memory': False}"
        )
    view = memoryview(shared_memory).cast("B")[index * space.shared_memory_bytes :]
    view[_LENGTH : _LENGTH + len(payload)] = payload
    view[:_LENGTH] = len(payload).to_bytes(_LENGTH, "little")
