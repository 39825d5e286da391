"""The Docker wing's warm pool: started containers on each hot snapshot, waiting for candidates.

A candidate takes a container of its state's snapshot from the pool (`acquire`), or a new one.
A container whose action changed nothing (no file, no process left) goes back (`release`): it is
still an exact copy of the state. After a group, the state's pool is topped up in the background
(`refill`) for its next group. Ready containers are bounded over all states (each idle one costs
the daemon a shim process): past the bound, the least recently used states give theirs up.
"""

from __future__ import annotations

import threading
from collections import deque

import docker.errors

from pivot_sandbox.contract.spec import SandboxSpec
from pivot_sandbox.docker import containers as dc
from pivot_sandbox.docker.fleet import Fleet
from pivot_sandbox.docker.snapshots import SnapshotCache
from pivot_sandbox.errors import SandboxError
from pivot_sandbox.replay import box as ct

BASELINE_PROCESSES = 2  # docker-init and the idle sleep


class WarmPool:
    """Ready containers per snapshot key.

    Args:
        fleet: makes and retires the containers.
        cache: the snapshot cache: a key it no longer holds gets no container back, and its LRU
            order says whose containers go first past `max_pooled`.
        lock: the backend's lock (the cache's too: a container is pooled only while its state is cached).
        closing: set once the backend closes (nothing is pooled then).
        size: ready containers kept per snapshot.
        max_pooled: ready containers kept over all snapshots.
    """

    def __init__(
        self,
        fleet: Fleet,
        cache: SnapshotCache,
        lock: threading.RLock,
        closing: threading.Event,
        size: int,
        max_pooled: int,
    ) -> None:
        self.fleet, self.cache, self.size, self.max_pooled = fleet, cache, size, max_pooled
        self.boxes: dict[str, deque[ct.Box]] = {}  # snapshot key -> its ready containers
        self._lock, self._closing = lock, closing
        self._procs: dict[str, str | None] = {}  # container id -> its cgroup.procs on this host (`dc.procs_file`)

    def acquire(self, key: str, image: str, spec: SandboxSpec) -> ct.Box:
        """A container at the state `key`: a pooled one, else a new one on its snapshot `image`."""
        with self._lock:
            pool = self.boxes.get(key)
            if pool:
                self.fleet.stats.add("pool_hits")
                return pool.popleft()
        return self.fleet.at_state(key, image, spec, "pool")

    def pristine(self, box: ct.Box) -> bool:
        """No process left: the runner has said so in `effect_of`; through docker exec, look."""
        if box.channel is not None:
            return True
        if box.id not in self._procs:
            self._procs[box.id] = dc.procs_file(box.sandbox.container)  # once per container: it is reused many times
        return dc.is_pristine(box.sandbox.container, BASELINE_PROCESSES, self._procs.get(box.id))

    def release(self, key: str, box: ct.Box, clean: bool) -> None:
        """Pool a container whose action left it exactly at the state (`clean`, and pristine), else retire it."""
        if clean and self.pristine(box):
            with self._lock:
                pool = self.boxes.setdefault(key, deque())
                kept = key in self.cache and len(pool) < self.size and not self._closing.is_set()
                if kept:
                    pool.append(box)
                    self.fleet.stats.add("containers_reused")
                    surplus = self._over_cap(key)
            if kept:
                for extra in surplus:
                    self.discard(extra)
                return
        self.discard(box)

    def _over_cap(self, hot: str) -> list[ct.Box]:
        """Pooled containers past `max_pooled`, taken from the least recently used states first (lock held)."""
        total = sum(len(pool) for pool in self.boxes.values())
        surplus: list[ct.Box] = []
        for key in [k for k in self.cache.lru() if k != hot] + [hot]:
            pool = self.boxes.get(key)
            while total > self.max_pooled and pool:
                surplus.append(pool.popleft())
                total -= 1
        if surplus:
            self.fleet.stats.add("pooled_dropped", len(surplus))
        return surplus

    def refill(self, key: str, image: str, spec: SandboxSpec, target: int) -> None:
        """Top the snapshot's pool up to `target` containers (runs in the janitor thread)."""
        while True:
            with self._lock:
                if self._closing.is_set() or key not in self.cache or len(self.boxes.get(key, ())) >= target:
                    return
            try:
                box = self.fleet.at_state(key, image, spec, "pool")
            except (docker.errors.APIError, SandboxError):
                return
            with self._lock:
                pool = self.boxes.setdefault(key, deque())
                keep = not self._closing.is_set() and key in self.cache and len(pool) < target
                if keep:
                    pool.append(box)
                    surplus = self._over_cap(key)
            if not keep:  # closed, evicted or topped up by another refill meanwhile
                self.fleet.retire(box)
                return
            for extra in surplus:
                self._procs.pop(extra.id, None)
                self.fleet.retire(extra)

    def discard(self, box: ct.Box) -> None:
        """Retire a container in the background (`Fleet.discard`), forgetting its process list."""
        self._procs.pop(box.id, None)
        self.fleet.discard(box)

    def drop(self, key: str) -> list[ct.Box]:
        """Take the snapshot's ready containers out of the pool (it is forgotten), to discard."""
        with self._lock:
            return list(self.boxes.pop(key, ()))

    def take_all(self) -> list[ct.Box]:
        """Take every ready container out of the pool (the backend closes), to retire."""
        with self._lock:
            pooled = [box for pool in self.boxes.values() for box in pool]
            self.boxes.clear()
        for box in pooled:
            self._procs.pop(box.id, None)
        return pooled


__all__ = ["BASELINE_PROCESSES", "WarmPool"]
