"""The Docker wing's snapshot cache: the image of each replayed state, least recently used first.

A state is replayed once and committed to an image (`DockerBackend.snapshot`); this keeps the image
by the state's key (`SandboxSpec.key(history)`), what the state runs (restarted in every container
on it: `replay/restore.py`) and the states whose processes cannot be restarted (a few bytes each,
so a refused state is not replayed again). Each key has a lock of its own, so one state is built
once however many workers ask for it at the same time.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from pivot_sandbox.errors import ProcessesNotRestored
from pivot_sandbox.replay.restore import Running


class SnapshotCache:
    """Snapshot images by state key, in LRU order, with what each state runs.

    Args:
        lock: the backend's lock, shared with its warm pool (`docker/pool.py`), which reads `lru`
            and `in` to give up the containers of the coldest states first.
        max_snapshots: images kept; past it `keep` evicts the least recently used.
    """

    def __init__(self, lock: threading.RLock, max_snapshots: int) -> None:
        self.max_snapshots = max(1, max_snapshots)
        self.images: OrderedDict[str, str] = OrderedDict()  # snapshot key -> image tag, LRU order
        self._lock = lock
        self._key_locks: dict[str, threading.Lock] = {}
        self._running: dict[str, Running] = {}  # snapshot key -> what its state runs
        # snapshot key -> (processes, why) of a state whose processes cannot be restarted
        self._not_restored: dict[str, tuple[tuple[str, ...], str]] = {}

    def key_lock(self, key: str) -> threading.Lock:
        """The lock held while the state `key` is built."""
        with self._lock:
            return self._key_locks.setdefault(key, threading.Lock())

    def lookup(self, key: str) -> str | None:
        """The image of `key` (now the most recently used), None when it is not built.

        Raises:
            ProcessesNotRestored: the state was refused before (its processes cannot be restarted).
        """
        with self._lock:
            if key in self.images:
                self.images.move_to_end(key)
                return self.images[key]
            if key in self._not_restored:
                raise ProcessesNotRestored(*self._not_restored[key])
            return None

    def refuse(self, key: str, error: ProcessesNotRestored) -> None:
        """Remember that the state `key` cannot be held (`lookup` raises it again)."""
        with self._lock:
            self._not_restored[key] = (error.running, error.why)

    def keep(self, key: str, image: str, running: Running) -> tuple[str, str] | None:
        """Cache a built snapshot; the (key, image) evicted to make room, if any."""
        with self._lock:
            self.images[key] = image
            if running:
                self._running[key] = running
            return self.images.popitem(last=False) if len(self.images) > self.max_snapshots else None

    def forget(self, key: str, evicted: bool) -> None:
        """Drop `key`'s image and what it runs (and its build lock when it was `evicted`, not lost)."""
        with self._lock:
            self.images.pop(key, None)
            self._running.pop(key, None)
            if evicted:
                self._key_locks.pop(key, None)

    def running_of(self, key: str) -> Running:
        """What the state of snapshot `key` runs (empty when nothing, or when it is not built)."""
        with self._lock:
            return self._running.get(key) or Running()

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self.images

    def lru(self) -> list[str]:
        """The keys, least recently used first."""
        with self._lock:
            return list(self.images)

    def clear(self) -> list[str]:
        """Empty the cache (the backend closes); the images it held, to remove."""
        with self._lock:
            images = list(self.images.values())
            self.images.clear()
            return images


__all__ = ["SnapshotCache"]
