"""The Docker sandbox backend: snapshots of replayed pivot states, a warm pool, parallel groups.

State at a pivot = base image + set-up (as root) + the history's shell commands replayed in order.
A spec with services (a compose task's) gets fresh ones beside every container (`docker/services.py`);
they are not part of the snapshot: a candidate meets each service as the task starts it.
That replay runs once per state: the container is committed to a snapshot image keyed by
`SandboxSpec.key(history)`; snapshots live in a bounded LRU cache whose evicted images are removed
(`docker/snapshots.py`). Each action then runs in a fresh container of the snapshot, taken from a
small pool of started containers (`docker/pool.py`); a container whose action changed nothing (no
file, no process left) goes back to the pool, since it is still an exact copy of the state.
Commands reach a container through its in-container runner (`replay/runner.py`: one socket round
trip instead of a `docker exec`) when this machine can build it and the daemon is local, else
through `docker exec` (`docker/connection.py`). Containers are made and retired by the backend's
fleet (`docker/fleet.py`), its background work done by a janitor (`replay/janitor.py`).
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import docker
import docker.errors

from pivot_sandbox.contract.backend import ImageResolver, StopRule
from pivot_sandbox.contract.spec import LABEL, Effect, Limits, SandboxSpec, labels
from pivot_sandbox.docker import cleanup as _cleanup
from pivot_sandbox.docker import registries
from pivot_sandbox.docker.connection import Connection
from pivot_sandbox.docker.fleet import Fleet
from pivot_sandbox.docker.pool import BASELINE_PROCESSES, WarmPool
from pivot_sandbox.docker.snapshots import SnapshotCache
from pivot_sandbox.errors import ProcessesNotRestored, SandboxError
from pivot_sandbox.images.build import COMMIT_TIMEOUT, api_timeout
from pivot_sandbox.images.stock import ensure_stock_image, image_id
from pivot_sandbox.replay import action as act
from pivot_sandbox.replay import box as ct
from pivot_sandbox.replay import restore as rs
from pivot_sandbox.replay.janitor import Janitor, Stats
from pivot_sandbox.replay.session import transcript

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
        images: makes sure a spec's image exists (`ImageResolver`; default: the engine's images and the
            stock busybox; the plugin factory hands the task home's, which builds bundled task images).
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
        images: ImageResolver = ensure_stock_image,
        **limit_overrides: str | float,
    ) -> None:
        self.limits = replace(limits or Limits(), **limit_overrides)
        self.parallelism = max(1, parallelism or 2 * (os.cpu_count() or 1))
        pool_size = self.parallelism if pool_size is None else max(0, pool_size)
        self.snapshots, self.base_url = snapshots, base_url
        self.stats = Stats()
        self.token = f"{os.getpid()}-{id(self):x}"  # the `pivot-gym.backend` label of its containers
        # one lock for the connection, the snapshot cache and the pool: a container is pooled only
        # while its state is cached, and `close` empties both at once
        self._lock = threading.RLock()
        self._closing = threading.Event()
        self._workers = ThreadPoolExecutor(self.parallelism, thread_name_prefix="pivot-sandbox")
        # background removals and refills
        self._janitor = Janitor("pivot-sandbox-janitor")
        self._connection = Connection(base_url, runner, self._lock, self._closing)
        self._cache = SnapshotCache(self._lock, max_snapshots)
        self._fleet = Fleet(
            self._connection,
            self._cache,
            limits=self.limits,
            token=self.token,
            images=images,
            janitor=self._janitor,
            stats=self.stats,
            closing=self._closing,
            holders=2 * self.parallelism + pool_size,
        )
        max_pooled = 4 * self.parallelism if max_pooled is None else max(0, max_pooled)
        self._pool = WarmPool(self._fleet, self._cache, self._lock, self._closing, pool_size, max_pooled)

    # -- connection ------------------------------------------------------------------------

    @property
    def client(self) -> docker.DockerClient:
        """The docker client; the first use checks the daemon and removes dead owners' leftovers."""
        return self._connection.client

    @property
    def transport(self) -> str:
        """How commands reach containers: "runner" or "docker exec"."""
        return self._connection.transport

    @property
    def runner_note(self) -> str | None:
        """Why commands do not go through the runner (None when they do)."""
        return self._connection.note

    # -- state preparation -----------------------------------------------------------------

    def snapshot(self, spec: SandboxSpec, history: Sequence[str]) -> tuple[str, str]:
        """(key, image) of the snapshot at this state, replaying the history only on a cache miss.

        A state that runs processes is restarted once on its new snapshot (`_restore.measured`) before it is
        kept; one whose processes cannot be restarted raises `ProcessesNotRestored`, remembered.
        """
        key = spec.key(history)
        with self._cache.key_lock(key):
            found = self._cache.lookup(key)
            if found is not None:
                self.stats.add("snapshot_hits")
                return key, found
            box, running = self._fleet.replayed(spec, history)
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
                    self.stats.add("states_with_processes")
                    box_on_it = self._fleet.create(image, spec, "pool")
                    running = rs.measured(box_on_it, spec, self.limits, running, self._fleet.discard)
            except ProcessesNotRestored as e:
                self._cache.refuse(key, e)
                if committed:  # the image serves nothing now
                    self._janitor.submit(self._fleet.remove_image, image)
                raise
            finally:
                self._fleet.discard(box)
            self.stats.add("snapshots_built")
            evicted = self._cache.keep(key, image, running)
            if evicted:
                _forget(self, *evicted)
            return key, image

    def snapshot_id(self, spec: SandboxSpec, history: Sequence[str]) -> str:
        """Which build of the state's snapshot serves it now (built on a miss): a rebuilt one has another id."""
        return self.snapshot(spec, history)[1]

    def running_of(self, key: str) -> rs.Running:
        """What the state of snapshot `key` runs (empty when nothing, or when it is not built)."""
        return self._cache.running_of(key)

    def at_state(self, key: str, image: str, spec: SandboxSpec, kind: str, network: str = "none") -> ct.Box:
        """A container on the snapshot `key` (`image`: from `snapshot`), the processes its state runs started again.

        `kind` labels it ("episode": a `Session`'s); `discard` removes it. `network="registries"`
        (an episode's only): it reaches the package registries until `registries.disconnect`.
        """
        return self._fleet.at_state(key, image, spec, kind, network)

    def discard(self, box: ct.Box) -> None:
        """Remove a container of this backend (`at_state`'s) in the background."""
        self._fleet.discard(box)

    def image_env(self, image: str) -> list[str]:
        """The image's own environment (`KEY=value` each), as its config holds it."""
        config = self.client.images.get(image).attrs.get("Config") or {}
        return list(config.get("Env") or [])

    def disconnect(self, box: ct.Box) -> None:
        """Take every network away from a container of this backend (an episode's, before its tests)."""
        registries.disconnect(self.client, box.id)

    # -- running actions -------------------------------------------------------------------

    def run(self, spec: SandboxSpec, history: Sequence[str], commands: Sequence[str]) -> Effect:
        """The effect of one action (its shell commands) at the state after `history`."""
        self.stats.add("actions_run")
        if not self.snapshots:
            box, running = self._fleet.replayed(spec, history)
            # what the history left runs on here
            box = replace(box, running=running.processes, running_listing=ct.running_processes(box))
            try:
                return act.effect_of(box, spec, self.limits, commands)[0]
            finally:
                self._fleet.discard(box)
        key, image = self.snapshot(spec, history)
        try:
            box = self._pool.acquire(key, image, spec)
        except docker.errors.ImageNotFound:
            # Someone removed the snapshot under us (`pivot sandbox gc --all`, a user's `docker rmi`):
            # forget it and rebuild the state once rather than failing the verification.
            _forget(self, key)
            self.stats.add("snapshots_lost")
            key, image = self.snapshot(spec, history)
            box = self._pool.acquire(key, image, spec)
        clean = False
        try:
            effect, clean = act.effect_of(box, spec, self.limits, commands)
            # with services, never reused: the action may have changed a service (a request that writes),
            # which no change set of the main container shows; the next candidate gets fresh ones
            clean = clean and not spec.services
            return effect
        finally:
            self._pool.release(key, box, clean)

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
        target = min(self._pool.size, len(actions), self._pool.max_pooled)
        self._janitor.submit(self._pool.refill, key, image, spec, target)
        return effects

    def transcript(
        self, spec: SandboxSpec, commands: Sequence[str], timeout: float | None = None, stop: StopRule | None = None
    ) -> list[tuple[ct.RawRun, str]]:
        """Run commands one by one in one replay container at the set-up state (`replay/session.transcript`)."""
        box, _ = self._fleet.replayed(spec, ())  # set-up only: what it starts runs on for the commands
        try:
            return transcript(box, spec, self.limits, commands, timeout, stop)
        finally:
            self._fleet.discard(box)

    def backend_for(self, spec: SandboxSpec, history: Sequence[str]) -> tuple[DockerBackend, str | None]:
        """This backend runs every state itself."""
        return self, None

    def image_id(self, tag: str) -> str | None:
        """The Docker image id behind `tag` (the reward cache keys verdicts by it)."""
        return image_id(tag, self.base_url)

    @property
    def closed(self) -> bool:
        """True once `close` ran (or the process began to exit)."""
        return self._closing.is_set()

    # -- lifecycle -------------------------------------------------------------------------

    def drain(self) -> None:
        """Wait until the background work queued so far (removals, refills) is done."""
        self._janitor.drain()

    def close(self) -> None:
        """Remove pooled containers and snapshot images; wait for pending removals."""
        with self._lock:
            if self._closing.is_set():
                return
            self._closing.set()
            pooled = self._pool.take_all()
            images = self._cache.clear()
        self._workers.shutdown(wait=True)
        # removals wait on the daemon (kill, unmount): run them side by side, not one after another
        with ThreadPoolExecutor(self.parallelism, thread_name_prefix="pivot-sandbox-close") as removers:
            for box in pooled:
                removers.submit(self._fleet.retire, box)
        self._janitor.shutdown()
        self._fleet.close(self.parallelism)
        if self._connection.connected is not None:
            for image in images:
                self._fleet.remove_image(image)
        _cleanup.forget(self._connection.at_exit)

    def gc(self, everything: bool = False) -> dict[str, int]:
        """Remove leftovers of dead owners (or every pivot-gym container and snapshot with `everything`)."""
        return _cleanup.gc(self.client, everything=everything).to_json()


def _forget(backend: DockerBackend, key: str, image: str | None = None) -> None:
    """Drop a snapshot from the backend's cache; remove its image too when given (evicted), not when gone already."""
    with backend._lock:  # the cache and the pool at once, as a snapshot is kept
        backend._cache.forget(key, evicted=image is not None)
        pooled = backend._pool.drop(key)
    for box in pooled:
        backend._pool.discard(box)
    if image is not None:
        backend._janitor.submit(backend._fleet.remove_image, image)
        backend.stats.add("snapshots_evicted")


__all__ = ["BASELINE_PROCESSES", "LABEL", "DockerBackend"]
