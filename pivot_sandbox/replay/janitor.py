"""A backend's background work and counters: what both wings keep off the candidates' path.

`Janitor` runs removals of used sandboxes and refills of a hot state's pool in two threads of their
own (two, so that a removal does not wait behind a start); `drain` waits for what is queued so far.
`Stats` is a backend's `stats`: named counters (`snapshots_built`, `pool_hits`, ...) that tests and
benches read, added to from any thread.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TypeVarTuple, Unpack

Args = TypeVarTuple("Args")


class Janitor:
    """Background work of one backend: `submit` queues it, `drain` waits for it, `shutdown` ends it.

    Args:
        prefix: the threads' name prefix (`pivot-sandbox-janitor`, `pivot-ns-janitor`).
    """

    def __init__(self, prefix: str) -> None:
        self._threads = ThreadPoolExecutor(2, thread_name_prefix=prefix)
        self._lock = threading.Lock()
        self._pending: set[Future[None]] = set()

    def submit(self, fn: Callable[[Unpack[Args]], None], *args: *Args) -> None:
        """Run `fn(*args)` in the background (`drain` waits for it); raises RuntimeError once shut down."""
        future = self._threads.submit(fn, *args)
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._done)

    def _done(self, future: Future[None]) -> None:
        with self._lock:
            self._pending.discard(future)

    def drain(self) -> None:
        """Wait until the background work queued so far is done."""
        with self._lock:
            pending = list(self._pending)
        wait(pending)

    def shutdown(self) -> None:
        """Wait for the queued work, then refuse more (`submit` raises RuntimeError)."""
        self._threads.shutdown(wait=True)


class Stats(Counter[str]):
    """A backend's counters by name (`backend.stats`), safe to add to from several threads."""

    def __init__(self, counts: Mapping[str, int] | None = None) -> None:
        super().__init__(counts or {})  # `copy()` and unpickling hand the counts over
        self._lock = threading.Lock()

    def add(self, name: str, n: int = 1) -> None:
        """Add `n` to the counter `name`."""
        with self._lock:
            self[name] += n


__all__ = ["Janitor", "Stats"]
