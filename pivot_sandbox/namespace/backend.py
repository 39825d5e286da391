"""The namespace sandbox backend: bubblewrap and overlayfs, no daemon round trip per candidate.

The same runner (`runner.c`), wrapper, change-set scan (`replay/diff.py`) and effect (`_action.effect_of`)
as the Docker backend; only what holds the runner differs. Docker still builds the task images.

- The image's root file system is exported once (`_nsroot.rootfs`, cached by image id).
- A pivot's state is an overlay snapshot: set-up and history are replayed once in a sandbox whose
  upper folder starts empty over the root file system; that upper folder is then kept read-only.
- Each candidate runs in a fresh sandbox on a fresh empty upper folder over (snapshot, root file
  system): its change set is exactly that upper folder, read by `_diff.scan_upper` as Docker's is.
- A state whose replay needs registry access (`pip install` in the history) is replayed and
  committed by the Docker backend, which has the host network; the snapshot image's top layer is
  copied into the snapshot's upper folder, over Docker's own layer folders (`namespace/layer.py`).

A sandbox is one process tree: `unshare --mount` (a private mount namespace, so the overlay mount
is nobody else's and goes away with the sandbox), which joins its cgroups and mounts the overlay,
then `prlimit --fsize` and `bwrap` with new pid, network (loopback only), IPC and UTS namespaces,
`--die-with-parent` (a killed verifying process takes its sandboxes with it), no new privileges,
every capability dropped but the runner's three where the task's user is not root (as Docker's
pool containers: `_containers.create`), and the runner as its command. The runner's stdin and
stdout are one end of a socket pair: a command costs one message on it.

Why bubblewrap (Debian's `bubblewrap`): it is the maintained tool for exactly this set-up (pivot_root
into a prepared root, /proc and /dev of the new namespaces, loopback up, capabilities, parent-death
kill) and costs a few milliseconds. Its version in Debian 12 (0.8) has no overlay option, hence the
`unshare` step before it; `os.unshare` would need a hand-written pivot_root and capability code.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from pivot_sandbox.contract.backend import ImageResolver, SandboxBackend, Step, StopRule
from pivot_sandbox.contract.network import needs_network
from pivot_sandbox.contract.spec import Effect, Limits, SandboxSpec
from pivot_sandbox.errors import ProcessesNotRestored, SandboxError, SandboxUnavailable, StateRefused
from pivot_sandbox.images.stock import ensure_stock_image, image_id
from pivot_sandbox.namespace import layer as nl
from pivot_sandbox.namespace import root as nr
from pivot_sandbox.namespace.box import Root, resolve_user
from pivot_sandbox.namespace.images import ImageRoots
from pivot_sandbox.namespace.pool import SandboxPool
from pivot_sandbox.namespace.sandboxes import Launcher
from pivot_sandbox.replay import action as act
from pivot_sandbox.replay import restore as rs
from pivot_sandbox.replay.janitor import Janitor, Stats
from pivot_sandbox.replay.session import LiveBackend, transcript

if TYPE_CHECKING:  # the images come from Docker, whose SDK is imported on first use (`namespace/images.py`)
    import docker


class NamespaceBackend:
    """Runs shell actions at restored pivot states in bubblewrap sandboxes over overlay snapshots.

    Args:
        limits: resource limits and timeouts (`Limits` fields may also be given as keywords).
        parallelism: actions of a group run at once (default: twice the number of cores).
        pool_size: sandboxes started ahead per hot state, so that a candidate finds its sandbox
            waiting (default: `parallelism`); each is a fresh empty upper folder over the
            snapshot, nothing run in it, so exactly the state (`namespace/pool.py`).
        max_snapshots: snapshot upper folders kept (LRU).
        base_url: the Docker endpoint that builds and exports the images.
        docker: the Docker backend's factory: it replays and commits the states whose replay needs
            registry access (their top layer is copied here), and runs those this backend cannot
            (None: such states are an error).
        images: makes sure an image exists in Docker before it is exported (`ImageResolver`, as
            the Docker backend's).
    """

    name = "namespace"
    # an episode keeps one sandbox across turns (`Session`): only the Docker backend has that
    live_sessions = False

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        parallelism: int | None = None,
        pool_size: int | None = None,
        max_snapshots: int = 32,
        base_url: str | None = None,
        docker: Callable[..., LiveBackend] | None = None,
        images: ImageResolver = ensure_stock_image,
        **limit_overrides: str | float | None,
    ) -> None:
        # options of the Docker backend that mean nothing here (the pool, the runner, snapshots on/off)
        for ignored in ("max_pooled", "runner", "snapshots"):
            limit_overrides.pop(ignored, None)
        why = nr.unavailable()
        if why:
            raise SandboxUnavailable(f"the namespace sandbox cannot run here: {why}")
        self.limits = replace(limits or Limits(), **limit_overrides)
        self.parallelism = max(1, parallelism or 2 * (os.cpu_count() or 1))
        self.max_snapshots = max(1, max_snapshots)
        self.base_url, self.docker = base_url, docker
        self.cgroups = nr.Cgroups.version()
        self.stats = Stats()
        self.token = f"{os.getpid()}-{id(self):x}"
        self._launcher = Launcher(self.limits, self.token, self.stats)
        self.folder = self._launcher.folder
        self._lock = threading.RLock()
        self._closing = threading.Event()
        self._key_locks: dict[str, threading.Lock] = {}
        self._snapshots: OrderedDict[str, tuple[Path, Root]] = OrderedDict()
        self._refused: dict[str, str] = {}  # snapshot key -> why its Docker-built state cannot be taken over
        # snapshot key -> (processes, why) of a state whose processes cannot be restarted
        self._not_restored: dict[str, tuple[tuple[str, ...], str]] = {}
        self._daemon_why: list[str | None] = []  # `nl.daemon_refusal`, asked once
        self._workers = ThreadPoolExecutor(self.parallelism, thread_name_prefix="pivot-ns")
        # starts sandboxes ahead and removes used ones, off the candidates' path
        self._janitor = Janitor("pivot-ns-janitor")
        pool_size = self.parallelism if pool_size is None else max(0, pool_size)
        self._pool = SandboxPool(self._launcher, self._janitor, self._snapshots, self._lock, self._closing, pool_size)
        self._images = ImageRoots(base_url, images)
        atexit.register(self.close)

    @property
    def client(self) -> docker.DockerClient:
        """The Docker client that builds and exports images."""
        return self._images.client

    def image_id(self, tag: str) -> str | None:
        """The Docker image id behind `tag` (the reward cache keys verdicts by it)."""
        return image_id(tag, self.base_url)

    @property
    def closed(self) -> bool:
        """True once `close` ran."""
        return self._closing.is_set()

    def transcript(
        self, spec: SandboxSpec, commands: Sequence[str], timeout: float | None = None, stop: StopRule | None = None
    ) -> list[tuple[Step, str]]:
        """Run commands one by one in one sandbox at the set-up state (`replay/session.transcript`).

        Commands that reach the network (`needs_network`: `pip install`, `apt-get`, `curl`) with
        registry access (`replay_access`) are Docker's to run, whole: it gives them the host network, as it
        does to such a state's history for a verdict; the others run here (a state with services is
        Docker's through `backend_for`). Until 2026-12-06 only the set-up was handed over, and every
        recorded `pip install` failed in `check_replay` for want of a network.
        """
        spec = self._numeric(spec)
        if spec.replay_access and needs_network(list(commands)):
            if self.docker is None:
                raise SandboxError("this transcript reaches the registries, which only the Docker backend gives")
            docker = self.docker(limits=self.limits, base_url=self.base_url)
            try:
                return docker.transcript(spec, commands, timeout, stop)
            finally:
                docker.close()
        ran, _ = self.backend_for(spec, ())
        if ran is not self:
            return ran.transcript(spec, commands, timeout, stop)
        root = self._images.root(spec.image)
        box = self._launcher.launch(spec, root, (root.path,), self._launcher.path("transcript"), "replay")
        try:
            rs.replay_state(box, spec, self.limits, ())
            return transcript(box, spec, self.limits, commands, timeout, stop)
        finally:
            self._launcher.discard(box)

    # -- snapshots -------------------------------------------------------------------------

    def _prepare(self, spec: SandboxSpec, history: Sequence[str], upper: Path) -> tuple[Root, rs.Running]:
        """Replay set-up (as root) and history (as the user) on `upper`, as `Fleet.replayed` does for Docker.

        Also returns what the replay left running (`_restore.replay_state`): stopped with the
        replay's sandbox, as `docker commit` keeps no process, and restarted on every sandbox.
        """
        root = self._images.root(spec.image)
        box = self._launcher.launch(spec, root, (root.path,), upper, "replay")
        try:
            running = rs.replay_state(box, spec, self.limits, history)
            self.stats.add("replayed_commands", len(history))
        except BaseException:
            self._launcher.discard(box)
            raise
        self._launcher.discard(box, keep_upper=True)
        return root, running

    def snapshot(self, spec: SandboxSpec, history: Sequence[str]) -> tuple[Path, Root]:
        """The snapshot's upper folder at this state (replayed on a cache miss) and the root it lies on.

        Raises:
            SandboxError: a spec with services, which no namespace sandbox starts (`backend_for` hands it to Docker).
        """
        if spec.services:
            raise SandboxError(f"the namespace backend does not run this state: {self.cannot_run(spec)}")
        key = spec.key(history)
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                if key in self._snapshots:
                    self._snapshots.move_to_end(key)
                    self.stats.add("snapshot_hits")
                    return self._snapshots[key]
                if key in self._refused:
                    raise StateRefused(self._refused[key])
                if key in self._not_restored:
                    raise ProcessesNotRestored(*self._not_restored[key])
            upper = self._launcher.path(f"snapshot-{key[:16]}")  # a rebuilt state is another snapshot
            nr.remove_tree(upper)
            try:
                make = self._take_over if spec.replay_access else self._prepare
                root, running = make(spec, history, upper)
                refused = running.refusal()
                if refused is not None:
                    raise refused
                if running:
                    self.stats.add("states_with_processes")
                    plain = self._pool.fresh(spec, root, upper, running=rs.Running())  # restarted by `measured`
                    running = rs.measured(plain, spec, self.limits, running, self._launcher.discard)
            except ProcessesNotRestored as e:  # replayed here or by Docker (`_take_over`)
                nr.remove_tree(upper)
                with self._lock:
                    self._not_restored[key] = (e.running, e.why)
                raise
            except BaseException:
                nr.remove_tree(upper)
                raise
            self.stats.add("snapshots_built")
            with self._lock:
                self._snapshots[key] = (upper, root)
                if running:
                    self._pool.running[upper] = running
                evicted = self._snapshots.popitem(last=False) if len(self._snapshots) > self.max_snapshots else None
                if evicted:
                    self._key_locks.pop(evicted[0], None)
            if evicted:
                self._pool.drop(evicted[1][0])
                # a candidate still running on it keeps its lower folder: overlay holds the open tree
                for folder in (evicted[1][0], *evicted[1][1].stack[:1]):  # a taken-over state's init layer too
                    nr.remove_tree(folder)
            return self._snapshots.get(key) or (upper, root)

    def _take_over(self, spec: SandboxSpec, history: Sequence[str], upper: Path) -> tuple[Root, rs.Running]:
        """Docker replays and commits the state (registry access; its LRU keeps the image); `nl.take_over`.

        What the state runs is Docker's record of the replay; its sockets are measured here again.
        """
        try:
            if self.docker is None:
                raise StateRefused("its replay needs registry access, and no Docker backend is given to replay it")
            builder = self.docker(limits=self.limits, base_url=self.base_url)
            root, spent = nl.take_over(builder, self.client, spec, history, self._images.root(spec.image), upper)
        except StateRefused as e:
            with self._lock:
                self._refused[spec.key(history)] = str(e)
            raise
        for name, ms in spent.items():
            self.stats.add(name, ms)
        self.stats.add("snapshots_taken_over")
        return root, replace(builder.running_of(spec.key(history)), listening=None)

    # -- running actions -------------------------------------------------------------------

    def _numeric(self, spec: SandboxSpec) -> SandboxSpec:
        """The spec with its user as uid:gid (resolved in the image's own /etc/passwd)."""
        user = resolve_user(self._images.root(spec.image).path, spec.user)
        return spec if user == spec.user else replace(spec, user=user)

    def run(self, spec: SandboxSpec, history: Sequence[str], commands: Sequence[str]) -> Effect:
        """The effect of one action (its shell commands) at the state after `history`."""
        self.stats.add("actions_run")
        spec = self._numeric(spec)
        snapshot, root = self.snapshot(spec, history)
        box = self._pool.acquire(spec, root, snapshot)
        clean = False
        try:
            effect, clean = act.effect_of(box, spec, self.limits, commands)
            return effect
        finally:
            self._pool.release(snapshot, box, clean)  # as Docker's pool: kept only while exactly the state

    def run_group(
        self, spec: SandboxSpec, history: Sequence[str], actions: Sequence[Sequence[str]]
    ) -> list[Effect | SandboxError]:
        """Effects of several actions at one state, in parallel; one action's failure is returned in its place.

        A state whose replay needs registry access (`SandboxSpec.replay_access`: the host network
        for `pip install` in the history) is replayed by the Docker backend, which has it, and taken
        over (`_take_over`); one that cannot be taken over exactly is run by the Docker backend.
        """
        spec = self._numeric(spec)
        try:
            backend, _ = self.backend_for(spec, history)
        except SandboxError as e:
            return [e for _ in actions]
        if backend is not self:
            return backend.run_group(spec, history, actions)
        snapshot, root = self.snapshot(spec, history)

        def one(commands: Sequence[str]) -> Effect | SandboxError:
            try:
                return self.run(spec, history, commands)
            except SandboxError:
                raise
            except Exception as e:  # noqa: BLE001 - one candidate's failure is its own, never the group's
                return SandboxError(f"{type(e).__name__}: {e}")

        effects = list(self._workers.map(one, actions))
        # this state is hot: sandboxes wait for its next group (the next epoch), as many as this one used
        try:
            self._janitor.submit(self._pool.refill, spec, root, snapshot, min(self._pool.size, len(actions)))
        except RuntimeError:
            pass  # closing
        return effects

    def snapshot_id(self, spec: SandboxSpec, history: Sequence[str]) -> str:
        """Which build of the state's snapshot serves it now (built on a miss): a rebuilt one has another id."""
        return str(self.snapshot(self._numeric(spec), history)[0])

    def backend_for(self, spec: SandboxSpec, history: Sequence[str]) -> tuple[SandboxBackend, str | None]:
        """The backend that runs this state, and why it is not this one (None when it is).

        The one place a state is handed to Docker: `run_group` and `docker_shell` (whose verdicts
        name the backend that ran them) both ask here. Raises `SandboxError` when this backend
        cannot run the state and has no Docker backend to hand it to.
        """
        why = self.cannot_run(self._numeric(spec), history)
        if not why:
            return self, None
        if self.docker is None:
            raise SandboxError(why)
        self.stats.add("groups_run_by_docker")
        return self.docker(limits=self.limits, base_url=self.base_url), why

    def cannot_run(self, spec: SandboxSpec, history: Sequence[str] | None = None) -> str | None:
        """Why this backend cannot run `spec`'s state (None when it can): `backend_for` then hands it to Docker.

        A replay with registry access (`pip install` in the history) needs the host network, which
        no namespace sandbox has: Docker replays it and its layer is taken over where the daemon's can
        be read here. With `history`, the state is built now: one not copied exactly is Docker's to run.
        """
        if spec.services:  # sidecar containers on a private network: only Docker starts them
            return f"its services ({', '.join(s.name for s in spec.services)}) run as containers beside it"
        if not spec.replay_access:
            return None
        with self._lock:
            if not self._daemon_why:
                self._daemon_why.append(
                    nl.daemon_refusal(self.client, self.base_url) if self.docker else "none is given"
                )
            why = self._daemon_why[0]
        if why or history is None:
            return why and f"its replay needs registry access, which only the Docker backend gives, and {why}"
        try:
            self.snapshot(self._numeric(spec), history)
        except StateRefused as e:
            return f"its replay needs registry access (Docker replayed it), but {e}"
        return None

    # -- lifecycle -------------------------------------------------------------------------

    def drain(self) -> None:
        """Wait until the background work queued so far (removals, refills) is done."""
        self._janitor.drain()

    def close(self) -> None:
        """Stop the workers and remove every folder of this backend (snapshots included)."""
        with self._lock:
            if self._closing.is_set():
                return
            self._closing.set()
        self._workers.shutdown(wait=True)
        self._janitor.shutdown()
        for box in self._pool.take_all():
            self._launcher.discard(box)
        nr.remove_tree(self.folder)
        atexit.unregister(self.close)

    def gc(self, everything: bool = False) -> dict[str, int]:
        """Remove folders and cgroups of backends whose process is gone (all with `everything`)."""
        return nr.gc(everything)


__all__ = ["NamespaceBackend"]
