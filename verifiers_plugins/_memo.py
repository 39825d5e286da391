"""`per_pivot`: what a verifier derives from a pivot alone, computed once per pivot object.

A GRPO group scores G candidates at one pivot and every epoch comes back to it, so the expert's
normalised text, its parsed commands or its compiled schema are worth computing once. Entries are
keyed by the pivot object's identity and hold the pivot itself, so an id is never reused by
another object while its entry lives; `Pivot` is frozen, so a value derived from it stays true.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

T = TypeVar("T")

_SIZE = 4096


def per_pivot(fn: Callable[[Any], T]) -> Callable[[Any], T]:
    """Decorate `fn(pivot)` so that it runs once per pivot object (the last 4,096 pivots are kept)."""
    cache: OrderedDict[int, tuple[Any, T]] = OrderedDict()
    lock = threading.Lock()

    @wraps(fn)
    def memoised(pivot: Any) -> T:
        key = id(pivot)
        with lock:
            hit = cache.get(key)
            if hit is not None and hit[0] is pivot:
                return hit[1]
        value = fn(pivot)
        with lock:
            cache[key] = (pivot, value)
            while len(cache) > _SIZE:
                cache.popitem(last=False)
        return value

    return memoised
