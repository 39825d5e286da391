"""`History`: the messages before a pivot's turn, a view of its trajectory's messages that copies nothing.

A trajectory of n messages has about n/2 pivots, and pivot i's state is the first i messages.
Holding each prefix as its own tuple costs O(n^2) references: a 100,000-message chat took 7.7 GB
before running out of memory. Every pivot of a trajectory holds a `History` over the one tuple
of the trajectory's messages instead, with its own end, so the pivots together cost O(n).

A `History` reads like the tuple it replaces: `len`, indexing, iteration, `in`, `==` with a
tuple or another history, `+` with a tuple (giving a tuple), and a slice is a tuple of its own.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import islice
from typing import Any, TypeVar, overload

T = TypeVar("T")  # a `Message`: a history does not need to know its items' type


class History(Sequence[T]):
    """An immutable sequence of messages: the first `len(self)` messages of a shared tuple.

    Args:
        messages: the messages (each a `Message`: `Pivot` checks them when it makes its history).

    `History.prefix(messages, end)` makes the view without copying or checking: for the tuple a
    `Trajectory` holds, whose items its constructor has checked already.
    """

    __slots__ = ("_end", "_messages")

    def __init__(self, messages: Sequence[T] = ()) -> None:
        items = messages if type(messages) is tuple else tuple(messages)
        self._messages: tuple[T, ...] = items
        self._end = len(items)

    @classmethod
    def prefix(cls, messages: tuple[T, ...], end: int) -> History:
        """The first `end` items of `messages`, sharing the tuple (its items must be checked `Message`s already)."""
        if type(messages) is not tuple:
            raise TypeError(f"History.prefix: expected a tuple of messages, got {type(messages).__name__}")
        view = object.__new__(cls)
        view._messages = messages
        view._end = max(0, min(int(end), len(messages)))
        return view

    def __len__(self) -> int:
        return self._end

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...

    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._end)
            if step == 1:
                return self._messages[start:stop]
            # not `_messages[start:stop:step]`: a stop of -1 there would mean the shared tuple's end
            return tuple(self._messages[i] for i in range(start, stop, step))
        i = index.__index__()
        if i < 0:
            i += self._end
        if not 0 <= i < self._end:
            raise IndexError("history index out of range")
        return self._messages[i]

    def __iter__(self) -> Iterator[T]:
        if self._end == len(self._messages):
            return iter(self._messages)
        return islice(self._messages, self._end)

    def __reversed__(self) -> Iterator[T]:
        return (self._messages[i] for i in range(self._end - 1, -1, -1))

    def __bool__(self) -> bool:
        return self._end > 0

    def __eq__(self, other: object) -> bool:
        if isinstance(other, History):
            if other._messages is self._messages:
                return other._end == self._end
        elif not isinstance(other, tuple):
            return NotImplemented
        return len(other) == self._end and all(a == b for a, b in zip(self, other, strict=False))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __add__(self, other: object) -> tuple[T, ...]:
        if isinstance(other, tuple | History):
            return tuple(self) + tuple(other)
        return NotImplemented

    def __radd__(self, other: object) -> tuple[T, ...]:
        if isinstance(other, tuple):
            return other + tuple(self)
        return NotImplemented

    def __repr__(self) -> str:
        return repr(tuple(self))

    def __reduce__(self) -> tuple[Any, ...]:
        # Only this prefix travels (a pivot sent to a worker alone must not carry its whole trajectory).
        return (History, (tuple(self),))


__all__ = ["History"]
