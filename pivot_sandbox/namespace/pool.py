"""The namespace backend's pool: sandboxes started ahead on each hot snapshot, and what each snapshot runs.

Each sandbox lies on a fresh empty upper folder over the snapshot, nothing run in it, so it is
exactly the state; the processes the state runs are started again in it (`replay/restore.py`).
As Docker's pool (`docker/pool.py`), a sandbox whose action changed nothing goes back to the pool;
after a group, the state's pool is topped up in the background for its next group.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from pivot_sandbox.contract.spec import SandboxSpec
from pivot_sandbox.errors import SandboxError
from pivot_sandbox.namespace.box import Root
from pivot_sandbox.namespace.sandboxes import Launcher
from pivot_sandbox.replay import box as ct
from pivot_sandbox.replay import restore as rs
from pivot_sandbox.replay.diff import root_state
from pivot_sandbox.replay.janitor import Janitor


class SandboxPool:
    """Ready sandboxes per snapshot upper folder.

    Args:
        launcher: starts and removes the sandboxes.
        janitor: the backend's background work (removals).
        snapshots: the backend's snapshot cache (key -> (upper folder, root)): a refill stops once
            its snapshot is evicted.
        lock: the backend's lock, which guards that cache too.
        closing: set once the backend closes (nothing is pooled then).
        size: ready sandboxes kept per snapshot.

    Attributes:
        running: snapshot upper folder -> what its state runs (restarted in every sandbox on it).
    """

    def __init__(
        self,
        launcher: Launcher,
        janitor: Janitor,
        snapshots: Mapping[str, tuple[Path, Root]],
        lock: threading.RLock,
        closing: threading.Event,
        size: int,
    ) -> None:
        self.launcher, self.janitor, self.size = launcher, janitor, size
        self.boxes: dict[Path, list[ct.Box]] = {}  # snapshot upper folder -> sandboxes started on it
        self.running: dict[Path, rs.Running] = {}
        self._snapshots, self._lock, self._closing = snapshots, lock, closing

    def fresh(
        self, spec: SandboxSpec, root: Root, snapshot: Path, timeout: float = 10.0, running: rs.Running | None = None
    ) -> ct.Box:
        """A sandbox on a fresh upper folder over the snapshot, its runner answering, what the state runs restarted.

        The box's "unchanged" reference (`Box.root`, the upper folder's own metadata) is read once
        the runner has answered: mounting the overlay sets an xattr on the upper folder
        (`trusted.overlay.uuid`), so its ctime, and a reference read before the mount made every
        sandbox started on a candidate's path look touched, so never serve again. A runner that
        does not answer within `timeout` raises `RunnerLost`, the sandbox removed (a late answer on
        its channel must never be read as an action's).
        """
        # a taken-over state lies on Docker's own layers, its init layer on top, as Docker's containers do
        lowers = (root.stack[0], snapshot, *root.stack[1:]) if root.stack else (snapshot, root.path)
        launcher = self.launcher
        box = launcher.launch(spec, root, lowers, launcher.path("upper"), "pool")
        try:
            box.channel.call(["true"], uid=-1, gid=-1, timeout=timeout, output_cap=1024)  # type: ignore[union-attr]
            box = replace(box, root=root_state(box.layers))  # type: ignore[arg-type]
            if running is None:
                with self._lock:
                    running = self.running.get(snapshot)
            if running:
                box = rs.restart(box, spec, launcher.limits, running)
                launcher.stats.add("processes_restarted", len(running.processes))
        except BaseException:
            launcher.discard(box)
            raise
        return box

    def acquire(self, spec: SandboxSpec, root: Root, snapshot: Path) -> ct.Box:
        """A sandbox at the state of `snapshot`: a pooled one, else one started now (on the candidate's path)."""
        with self._lock:
            pooled = self.boxes.get(snapshot)
            box = pooled.pop() if pooled else None
        if box is None:
            return self.fresh(spec, root, snapshot, self.launcher.limits.action_timeout)
        self.launcher.stats.add("pool_hits")
        return box

    def release(self, snapshot: Path, box: ct.Box, clean: bool) -> None:
        """Pool a sandbox whose action changed nothing and left nothing (`clean`), else remove it in the background.

        Such a sandbox (its upper folder still empty, the folder's own metadata unchanged, and the
        runner's count of processes, IPC, shm, queues and mounts at zero) is still exactly the state.
        """
        with self._lock:
            kept = clean and not self._closing.is_set() and len(self.boxes.setdefault(snapshot, [])) < self.size
            if kept:
                self.boxes[snapshot].append(box)
                self.launcher.stats.add("sandboxes_reused")
        if not kept:
            try:
                self.janitor.submit(self.launcher.discard, box)
            except RuntimeError:  # closing: remove it here
                self.launcher.discard(box)

    def refill(self, spec: SandboxSpec, root: Root, snapshot: Path, target: int) -> None:
        """Start sandboxes on the snapshot until `target` wait there (janitor thread)."""
        while True:
            with self._lock:
                if self._closing.is_set() or len(self.boxes.get(snapshot, ())) >= target:
                    return
                if not any(s == snapshot for s, _ in self._snapshots.values()):
                    return  # evicted meanwhile
            try:
                box = self.fresh(spec, root, snapshot)
            except SandboxError:  # the runner lost, the processes not restarted: the candidate's path says why
                return
            with self._lock:
                keep = not self._closing.is_set() and len(self.boxes.setdefault(snapshot, [])) < target
                if keep:
                    self.boxes[snapshot].append(box)
            if not keep:
                self.launcher.discard(box)
                return

    def drop(self, snapshot: Path) -> None:
        """Remove the sandboxes pooled on an evicted snapshot, then forget what it runs."""
        with self._lock:
            pooled = self.boxes.pop(snapshot, [])
        for box in pooled:
            self.launcher.discard(box)
        with self._lock:
            self.running.pop(snapshot, None)

    def take_all(self) -> list[ct.Box]:
        """Take every pooled sandbox out (the backend closes), to remove."""
        with self._lock:
            pooled = [box for boxes in self.boxes.values() for box in boxes]
            self.boxes.clear()
        return pooled


__all__ = ["SandboxPool"]
