"""The Docker sandbox backend: snapshots of replayed pivot states, a warm pool, parallel groups.

State at a pivot = base image + set-up (as root) + the history's shell commands replayed in order.
That replay runs once per state: the container is committed to a snapshot image keyed by
`SandboxSpec.key(history)`; snapshots live in a bounded LRU cache whose evicted images are removed.
Each action then runs in a fresh container of the snapshot, taken from a small pool of started
containers; a container whose action changed nothing (no file, no process left) goes back to the
pool, since it is still an exact copy of the state. Commands reach a container through its
in-container runner (`replay/runner.py`: one socket round trip instead of a `docker exec`) when this
machine can build it and the daemon is local, else through `docker exec`.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections import Counter, OrderedDict, deque
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import replace
from pathlib import Path
from typing import Any

import docker
import docker.errors

from pivot_sandbox.contract.spec import LABEL, OWNER, Effect, Limits, SandboxSpec, labels
from pivot_sandbox.docker import cleanup as _cleanup
from pivot_sandbox.docker import containers as dc
from pivot_sandbox.docker.netns import NetnsHolders
from pivot_sandbox.errors import ProcessesNotRestored, SandboxError, SandboxUnavailable
from pivot_sandbox.images.build import COMMIT_TIMEOUT, api_timeout
from pivot_sandbox.images.stock import image_id
from pivot_sandbox.replay import action as act
from pivot_sandbox.replay import box as ct
from pivot_sandbox.replay import restore as rs
from pivot_sandbox.replay import runner as rn
from pivot_sandbox.replay.session import transcript
from pivot_sandbox.tasks.terminal_bench import ensure_image

BASELINE_PROCESSES = 2  # docker-init and the idle sleep
_BUILDS = itertools.count()  # snapshot builds of this process, across backends


class DockerBackend:
    """Runs shell actions at restored pivot states in isolated Docker containers.

    Args:
        limits: resource limits and timeouts (`Limits` fields may also be given as keywords).
        snapshots: False disables snapshots and the pool: every action gets a cold container and a
            full replay (the naive baseline of `bench/sandbox.py`).
        pool_size: ready containers kept per hot snapshot (default: `parallelism`, so that every worker
            of a group finds one; refilled in the background after each group).
        max_snapshots: snapshot images kept (LRU); evicted ones are removed from the engine.
        max_pooled: ready containers kept over all snapshots (default: four per worker); past it the
            pools of the least recently used states give theirs up (each idle container also costs
            the daemon a shim process).
        parallelism: actions of a group run at once (default: twice the number of cores: a worker
            mostly waits for the daemon, whose work is what the cores run; measured in `bench/sandbox.py`).
        base_url: Docker endpoint (default: `DOCKER_HOST` or the local socket).
        runner: send commands to an in-container runner instead of `docker exec` where it can be
            used (`runner_note` says why not otherwise); False forces `docker exec`.
    """

    name = "docker"
    live_sessions = True  # `open_session`: one container kept across an episode

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        snapshots: bool = True,
        pool_size: int | None = None,
        max_snapshots: int = 32,
        parallelism: int | None = None,
        base_url: str | None = None,
        runner: bool = True,
        max_pooled: int | None = None,
        **limit_overrides: Any,
    ) -> None:
        self.limits = replace(limits or Limits(), **limit_overrides)
        self.parallelism = max(1, parallelism or 2 * (os.cpu_count() or 1))
        self.pool_size = self.parallelism if pool_size is None else max(0, pool_size)
        self.max_pooled = 4 * self.parallelism if max_pooled is None else max(0, max_pooled)
        self.snapshots, self.max_snapshots = snapshots, max(1, max_snapshots)
        self.base_url = base_url
        self.use_runner = runner
        self.runner_note: str | None = None if runner else "turned off (runner=False)"
        self._runner: Path | None = None
        # network namespaces of retired containers, lent to their replacements (`docker/netns.py`)
        self._holders = NetnsHolders(dc.remove, keep=2 * self.parallelism + self.pool_size)
        self.stats: Counter[str] = Counter()
        self._client: docker.DockerClient | None = None
        self._lock = threading.RLock()
        self._key_locks: dict[str, threading.Lock] = {}
        self._images: OrderedDict[str, str] = OrderedDict()  # snapshot key -> image tag, LRU order
        # snapshot key -> what its state runs (`_restore.Running`): restarted in every container on it
        self._running: dict[str, rs.Running] = {}
        # snapshot key -> (processes, why) of a state whose processes cannot be restarted (a few bytes each)
        self._not_restored: dict[str, tuple[tuple[str, ...], str]] = {}
        self._pool: dict[str, deque[Any]] = {}
        self._procs: dict[str, str | None] = {}  # container id -> its cgroup.procs on this host (`dc.procs_file`)
        self._workers = ThreadPoolExecutor(self.parallelism, thread_name_prefix="pivot-sandbox")
        # background removals and refills; two, so that a removal does not wait behind a start
        self._janitor = ThreadPoolExecutor(2, thread_name_prefix="pivot-sandbox-janitor")
        self._pending: set[Future[Any]] = set()
        self._closed = False
        self.token = f"{os.getpid()}-{id(self):x}"  # the `pivot-gym.backend` label of its containers

    # -- connection ------------------------------------------------------------------------

    @property
    def client(self) -> docker.DockerClient:
        """The docker client; the first use checks the daemon and removes dead owners' leftovers."""
        with self._lock:
            if self._client is None:
                try:
                    client = docker.DockerClient(base_url=self.base_url) if self.base_url else docker.from_env()
                    client.ping()
                except (docker.errors.DockerException, OSError) as e:
                    where = self.base_url or os.environ.get("DOCKER_HOST") or "the local socket"
                    raise SandboxUnavailable(
                        f"Docker daemon not reachable at {where}: {e}. Start dockerd (CI: `.ci/run` does) "
                        "or point DOCKER_HOST at one"
                    ) from e
                _cleanup.gc(client)
                _cleanup.on_exit(self._at_exit)
                if self.use_runner:
                    found = rn.runner_for(self.base_url)
                    self._runner, self.runner_note = (found, None) if isinstance(found, Path) else (None, found)
                self._client = client
            return self._client

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self.stats[name] += n

    @property
    def transport(self) -> str:
        """How commands reach containers: "runner" or "docker exec"."""
        _ = self.client  # decided on connection
        return "runner" if self._runner else "docker exec"

    def _create(self, image: str, spec: SandboxSpec, kind: str) -> ct.Box:
        """A started container of `image`, in a borrowed network namespace when a holder is free."""
        _ = self.client  # connecting decides whether the runner is used
        for attempt in range(3):
            runner = self._runner
            # a replay with registry access uses the host network: no borrowed namespace
            holder = self._holders.lend() if runner and not (kind == "replay" and spec.replay_access) else None
            try:
                box = dc.create(self.client, image, spec, self.limits, kind, self.token, runner, holder)
            except docker.errors.APIError as e:
                if isinstance(e, docker.errors.ImageNotFound):
                    if holder is not None:
                        self._holders.give_back(holder)
                    raise
                if holder is not None:  # stopped or removed under us: never lend it again
                    self._background(dc.remove, holder)
                if attempt == 2:
                    raise
                if holder is None:
                    if runner is None or "mount" not in str(e).lower():
                        raise
                    # the daemon does not see this machine's files after all: docker exec from now on
                    with self._lock:
                        self._runner = None
                        self.runner_note = f"the daemon cannot mount the runner: {e.explanation or e}"
                continue
            self._count("containers_created")
            if holder is not None:
                self._count("netns_borrowed")
            return box
        raise AssertionError("unreachable: the last attempt returns or raises")

    # -- state preparation -----------------------------------------------------------------

    def _prepare(self, spec: SandboxSpec, history: Sequence[str]) -> tuple[ct.Box, rs.Running]:
        """A started container at the pivot state (set-up as root, then the history as the user).

        Also returns the processes the replay left running in it (`_restore.replay_state`).
        """
        ensure_image(self.client, spec.image)
        box = self._create(spec.image, spec, "replay")
        try:
            running = rs.replay_state(box, spec, self.limits, history)
            self._count("replayed_commands", len(history))
            return box, running
        except BaseException:
            self._discard(box)
            raise

    def snapshot(self, spec: SandboxSpec, history: Sequence[str]) -> tuple[str, str]:
        """(key, image) of the snapshot at this state, replaying the history only on a cache miss.

        A state that runs processes is restarted once on its new snapshot (`_restore.measured`) before it is
        kept; one whose processes cannot be restarted raises `ProcessesNotRestored`, remembered.
        """
        key = spec.key(history)
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                if key in self._images:
                    self._images.move_to_end(key)
                    self._count("snapshot_hits")
                    return key, self._images[key]
                if key in self._not_restored:
                    raise ProcessesNotRestored(*self._not_restored[key])
            box, running = self._prepare(spec, history)
            tag = f"{key[:16]}-{os.getpid()}-{next(_BUILDS)}"  # a rebuilt state is another snapshot
            image, committed = f"pivot-gym/snapshot:{tag}", False
            try:
                refused = running.refusal()
                if refused is not None:
                    raise refused
                changes = [f"LABEL {k}={v}" for k, v in labels("snapshot", self.token).items()]
                # a state holding a large install (torch with its CUDA wheels: GB) commits for minutes
                with api_timeout(self.client.api, COMMIT_TIMEOUT):
                    box.sandbox.container.commit(repository="pivot-gym/snapshot", tag=tag, changes=changes)
                committed = True
                if running:
                    self._count("states_with_processes")
                    box_on_it = self._create(image, spec, "pool")
                    running = rs.measured(box_on_it, spec, self.limits, running, self._discard)
            except ProcessesNotRestored as e:
                with self._lock:
                    self._not_restored[key] = (e.running, e.why)
                if committed:  # the image serves nothing now
                    self._background(self._remove_image, image)
                raise
            finally:
                self._discard(box)
            self._count("snapshots_built")
            with self._lock:
                self._images[key] = image
                if running:
                    self._running[key] = running
                evicted = self._images.popitem(last=False) if len(self._images) > self.max_snapshots else None
            if evicted:
                self._forget(*evicted)
            return key, image

    def snapshot_id(self, spec: SandboxSpec, history: Sequence[str]) -> str:
        """Which build of the state's snapshot serves it now (built on a miss): a rebuilt one has another id."""
        return self.snapshot(spec, history)[1]

    def running_of(self, key: str) -> rs.Running:
        """What the state of snapshot `key` runs (empty when nothing, or when it is not built)."""
        with self._lock:
            return self._running.get(key) or rs.Running()

    def _at_state(self, key: str, image: str, spec: SandboxSpec, kind: str) -> ct.Box:
        """A container on the snapshot `key`, the processes its state runs started again (`_restore.restart`)."""
        box = self._create(image, spec, kind)
        with self._lock:
            running = self._running.get(key)
        if not running:
            return box
        try:
            box = rs.restart(box, spec, self.limits, running)
        except BaseException:
            self._discard(box)
            raise
        self._count("processes_restarted", len(running.processes))
        return box

    def _forget(self, key: str, image: str | None = None) -> None:
        """Drop a snapshot from the cache; remove its image too when given (evicted), not when it is gone already."""
        with self._lock:
            self._images.pop(key, None)
            self._running.pop(key, None)
            pooled = list(self._pool.pop(key, ()))
            if image is not None:
                self._key_locks.pop(key, None)
        for c in pooled:
            self._discard(c)
        if image is not None:
            self._background(self._remove_image, image)
            self._count("snapshots_evicted")

    def _remove_image(self, image: str) -> None:
        try:
            self.client.images.remove(image, force=True)
        except docker.errors.APIError:
            pass  # still used by a running container: `gc` removes it once its owner is gone

    # -- the pool --------------------------------------------------------------------------

    def _acquire(self, key: str, image: str, spec: SandboxSpec) -> ct.Box:
        with self._lock:
            pool = self._pool.get(key)
            if pool:
                self._count("pool_hits")
                return pool.popleft()
        return self._at_state(key, image, spec, "pool")

    def _pristine(self, box: ct.Box) -> bool:
        """No process left: the runner has said so in `effect_of`; through docker exec, look."""
        if box.channel is not None:
            return True
        if box.id not in self._procs:
            self._procs[box.id] = dc.procs_file(box.sandbox.container)  # once per container: it is reused many times
        return dc.is_pristine(box.sandbox.container, BASELINE_PROCESSES, self._procs.get(box.id))

    def _release(self, key: str, box: ct.Box, clean: bool) -> None:
        if clean and self._pristine(box):
            with self._lock:
                pool = self._pool.setdefault(key, deque())
                kept = key in self._images and len(pool) < self.pool_size and not self._closed
                if kept:
                    pool.append(box)
                    self._count("containers_reused")
                    surplus = self._over_cap(key)
            if kept:
                for extra in surplus:
                    self._discard(extra)
                return
        self._discard(box)

    def _over_cap(self, hot: str) -> list[ct.Box]:
        """Pooled containers past `max_pooled`, taken from the least recently used states first (lock held)."""
        total = sum(len(pool) for pool in self._pool.values())
        surplus: list[ct.Box] = []
        for key in [k for k in self._images if k != hot] + [hot]:  # `_images` is in LRU order
            pool = self._pool.get(key)
            while total > self.max_pooled and pool:
                surplus.append(pool.popleft())
                total -= 1
        if surplus:
            self._count("pooled_dropped", len(surplus))
        return surplus

    def _refill(self, key: str, image: str, spec: SandboxSpec, target: int) -> None:
        """Top the snapshot's pool up to `target` containers (runs in the janitor thread)."""
        while True:
            with self._lock:
                if self._closed or key not in self._images or len(self._pool.get(key, ())) >= target:
                    return
            try:
                box = self._at_state(key, image, spec, "pool")
            except (docker.errors.APIError, SandboxError):
                return
            with self._lock:
                pool = self._pool.setdefault(key, deque())
                keep = not self._closed and key in self._images and len(pool) < target
                if keep:
                    pool.append(box)
                    surplus = self._over_cap(key)
            if not keep:  # closed, evicted or topped up by another refill meanwhile
                self._retire(box)
                return
            for extra in surplus:
                self._retire(extra)

    def _background(self, fn: Any, *args: Any) -> None:
        """Run `fn(*args)` in the janitor threads (`drain` waits for it)."""
        future = self._janitor.submit(fn, *args)
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._done)

    def _done(self, future: Future[Any]) -> None:
        with self._lock:
            self._pending.discard(future)

    def drain(self) -> None:
        """Wait until the background work queued so far (removals, refills) is done."""
        with self._lock:
            pending = list(self._pending)
        wait(pending)

    def _discard(self, box: ct.Box) -> None:
        self._procs.pop(box.id, None)
        try:
            self._background(self._retire, box)
        except RuntimeError:  # the janitor has shut down: remove inline
            self._retire(box)

    def _retire(self, box: ct.Box) -> None:
        """Remove a container, or keep it as a holder when it owns a namespace that nothing uses now.

        Only an offline one (`--network none`): a replay with registry access ran in the host's
        network, and a candidate container that joined it would have the network. Nor one whose
        state ran servers (`Box.running`): their closed connections linger in the namespace
        (TIME_WAIT), where the next container's restart of the same server would meet them.
        """
        lendable = box.offline and not box.running
        if box.holder is None and lendable and not self._closed and ct.settle(box) and self._holders.offer(box):
            self._count("netns_holders_kept")
            return
        dc.remove(box)
        if box.holder is not None:  # what ran in its namespace is gone with the container
            (dc.remove if box.running else self._holders.give_back)(box.holder)

    # -- running actions -------------------------------------------------------------------

    def run(self, spec: SandboxSpec, history: Sequence[str], commands: Sequence[str]) -> Effect:
        """The effect of one action (its shell commands) at the state after `history`."""
        self._count("actions_run")
        if not self.snapshots:
            box, running = self._prepare(spec, history)
            # what the history left runs on here
            box = replace(box, running=running.processes, running_listing=ct.running_processes(box))
            try:
                return act.effect_of(box, spec, self.limits, commands)[0]
            finally:
                self._discard(box)
        key, image = self.snapshot(spec, history)
        try:
            box = self._acquire(key, image, spec)
        except docker.errors.ImageNotFound:
            # Someone removed the snapshot under us (`pivot sandbox gc --all`, a user's `docker rmi`):
            # forget it and rebuild the state once rather than failing the verification.
            self._forget(key)
            self._count("snapshots_lost")
            key, image = self.snapshot(spec, history)
            box = self._acquire(key, image, spec)
        clean = False
        try:
            effect, clean = act.effect_of(box, spec, self.limits, commands)
            return effect
        finally:
            self._release(key, box, clean)

    def run_group(
        self, spec: SandboxSpec, history: Sequence[str], actions: Sequence[Sequence[str]]
    ) -> list[Effect | SandboxError]:
        """Effects of several actions at one state, in parallel (bounded by `parallelism`).

        A failure that concerns one action only is returned in its place; the daemon being
        unreachable or the state failing to build raises for the whole group.
        """

        def one(commands: Sequence[str]) -> Effect | SandboxError:
            try:
                return self.run(spec, history, commands)
            except docker.errors.APIError as e:
                return SandboxError(f"docker: {e.explanation or e}")
            except SandboxError:
                raise  # the daemon or the state: the whole group's
            except Exception as e:  # noqa: BLE001 - one candidate's failure is its own, never the group's
                return SandboxError(f"{type(e).__name__}: {e}")

        if not self.snapshots:
            return list(self._workers.map(one, actions))
        key, image = self.snapshot(spec, history)
        effects = list(self._workers.map(one, actions))
        # this state is hot: have ready containers waiting for its next group (the next epoch)
        # no more than this group used: a single verification (an expert run) keeps one ready, a
        # GRPO group a full pool; containers made for a state that is not verified again are waste
        target = min(self.pool_size, len(actions), self.max_pooled)
        self._background(self._refill, key, image, spec, target)
        return effects

    def transcript(
        self, spec: SandboxSpec, commands: Sequence[str], timeout: float | None = None, stop: Any = None
    ) -> list[tuple[ct.RawRun, str]]:
        """Run commands one by one in one replay container at the set-up state (`replay/session.transcript`)."""
        box, _ = self._prepare(spec, ())  # set-up only: what it starts runs on for the commands
        try:
            return transcript(box, spec, self.limits, commands, timeout, stop)
        finally:
            self._discard(box)

    def backend_for(self, spec: SandboxSpec, history: Sequence[str]) -> tuple[DockerBackend, str | None]:
        """This backend runs every state itself."""
        return self, None

    def image_id(self, tag: str) -> str | None:
        """The Docker image id behind `tag` (the reward cache keys verdicts by it)."""
        return image_id(tag, self.base_url)

    @property
    def closed(self) -> bool:
        """True once `close` ran."""
        return self._closed

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Remove pooled containers and snapshot images; wait for pending removals."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            pooled = [c for pool in self._pool.values() for c in pool]
            images = list(self._images.values())
            self._pool.clear()
            self._images.clear()
        self._workers.shutdown(wait=True)
        # removals wait on the daemon (kill, unmount): run them side by side, not one after another
        with ThreadPoolExecutor(self.parallelism, thread_name_prefix="pivot-sandbox-close") as removers:
            for c in pooled:
                self._procs.pop(c.id, None)
                removers.submit(self._retire, c)
        self._janitor.shutdown(wait=True)
        with ThreadPoolExecutor(self.parallelism, thread_name_prefix="pivot-sandbox-close") as removers:
            for holder in self._holders.close():
                removers.submit(dc.remove, holder)
        if self._client is not None:
            for image in images:
                self._remove_image(image)
        _cleanup.forget(self._at_exit)

    def _at_exit(self) -> None:
        """Exit or signal: the process is going away, so remove everything it made, without waiting."""
        with self._lock:
            self._closed = True
        if self._client is not None:
            _cleanup.gc(self._client, owner=OWNER)

    def gc(self, everything: bool = False) -> dict[str, int]:
        """Remove leftovers of dead owners (or every pivot-gym container and snapshot with `everything`)."""
        return _cleanup.gc(self.client, everything=everything).to_json()


__all__ = ["LABEL", "DockerBackend"]
