"""Derived forms computed once per object: `per_pivot` (the expert's side) and `per_candidate` (a completion's).

A GRPO group scores G candidates at one pivot and every epoch comes back to it, so the expert's
normalised text, its parsed commands or its compiled schema are worth computing once per pivot.
Within one group, every verifier of the chain reads the same candidate: its decoded tool-call
arguments, its Terminus JSON, its commands. `per_candidate` computes those once per parsed
message (or tool call), so the chain's verifiers share them instead of each decoding the text again.

Entries are keyed by the object's identity and hold the object itself, so an id is never reused
by another object while its entry lives; `Pivot`, `Message` and `ToolCall` are frozen, so a value
derived from one stays true. The values are shared by every verifier that asks: they are read-only
by contract (`tests/verifiers_plugins/test_memo.py` checks that the built-in verifiers leave them
as decoded). Nothing here is keyed by text, so a completion parsed anew is derived anew.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

from pivot_core import ToolCall

T = TypeVar("T")

_PIVOTS = 4096
# A GRPO group or two (the expert's entry and its candidates'); bounded low because an entry holds
# its message, and a completion may be 64 KB (`max_completion_chars`).
_CANDIDATES = 1024


def _per_object(fn: Callable[[Any], T], size: int) -> Callable[[Any], T]:
    """`fn(obj)` memoised by the identity of `obj` (the oldest of `size` entries goes first)."""
    cache: OrderedDict[int, tuple[Any, T]] = OrderedDict()  # O(1) to drop the oldest (a dict's first key is not)
    lock = threading.Lock()

    @wraps(fn)
    def memoised(obj: Any) -> T:
        # A hit reads without the lock: a dict lookup is atomic, and the entry holds `obj`, so a
        # matching identity is this object's own entry.
        hit = cache.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        value = fn(obj)
        remember(obj, value)
        return value

    def remember(obj: Any, value: T) -> None:
        with lock:
            cache[id(obj)] = (obj, value)
            while len(cache) > size:
                cache.popitem(last=False)

    memoised.remember = remember  # type: ignore[attr-defined]
    return memoised


def per_pivot(fn: Callable[[Any], T]) -> Callable[[Any], T]:
    """Decorate `fn(pivot)` so that it runs once per pivot object (the last 4,096 pivots are kept)."""
    return _per_object(fn, _PIVOTS)


def per_candidate(fn: Callable[[Any], T]) -> Callable[[Any], T]:
    """Decorate `fn(message_or_call)` so that it runs once per parsed candidate object."""
    return _per_object(fn, _CANDIDATES)


@per_candidate
def call_arguments(call: ToolCall) -> Any:
    """`call.parsed_arguments()`, decoded once per ToolCall object and shared: never mutate the value.

    The parser seeds it with the value it decoded the call from (`remember_arguments`), so a
    candidate's arguments are decoded once in all, by the parser.
    """
    return call.parsed_arguments()


def remember_arguments(call: ToolCall, value: Any) -> None:
    """Record `value` as `call_arguments(call)`: only a value equal to `call.parsed_arguments()`."""
    call_arguments.remember(call, value)  # type: ignore[attr-defined]
