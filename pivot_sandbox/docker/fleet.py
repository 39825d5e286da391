"""The containers one Docker backend makes: started at a state, in a borrowed network namespace, and retired.

A container is created through the backend's connection (`docker/connection.py`), in the network
namespace of a retired container where one is free (`docker/netns.py`: a new namespace costs the
daemon more than the container), and brought to its state: the replay of set-up and history, or
a snapshot with the processes its state runs started again (`replay/restore.py`). A used one is
removed in the background, or kept as a namespace holder for the next.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import docker.errors

from pivot_sandbox.contract.backend import ImageResolver
from pivot_sandbox.contract.spec import Limits, SandboxSpec
from pivot_sandbox.docker import containers as dc
from pivot_sandbox.docker.connection import Connection
from pivot_sandbox.docker.netns import NetnsHolders
from pivot_sandbox.docker.snapshots import SnapshotCache
from pivot_sandbox.replay import box as ct
from pivot_sandbox.replay import restore as rs
from pivot_sandbox.replay.janitor import Janitor, Stats


class Fleet:
    """Creates, prepares and retires the containers of one backend.

    Args:
        connection: the backend's daemon and transport.
        cache: the snapshot cache: what each state runs.
        limits: every container's limits.
        token: the `pivot-gym.backend` label of its containers.
        images: makes sure a spec's image exists (`ImageResolver`).
        janitor: the backend's background work (removals).
        stats: the backend's counters.
        closing: set once the backend closes (nothing is kept as a holder then).
        holders: retired containers kept to lend their network namespace (default: none).
    """

    def __init__(
        self,
        connection: Connection,
        cache: SnapshotCache,
        *,
        limits: Limits,
        token: str,
        images: ImageResolver,
        janitor: Janitor,
        stats: Stats,
        closing: threading.Event,
        holders: int = 0,
    ) -> None:
        self.connection, self.cache, self.limits, self.token, self.images = connection, cache, limits, token, images
        self.janitor, self.stats, self.closing = janitor, stats, closing
        # network namespaces of retired containers, lent to their replacements (`docker/netns.py`)
        self.holders = NetnsHolders(dc.remove, keep=holders)

    def create(self, image: str, spec: SandboxSpec, kind: str, network: str = "none") -> ct.Box:
        """A started container of `image`, in a borrowed network namespace when a holder is free.

        `network="registries"`: an episode's, on the registry network (`dc.create`).
        """
        client = self.connection.client  # connecting decides whether the runner is used
        for attempt in range(3):
            runner = self.connection.runner
            # a replay with registry access uses the host network, an episode's the registry network: no borrowed one
            # one with services is on their private network (`docker/services.py`): no borrowed one either
            own = (kind == "replay" and spec.replay_access) or network != "none" or bool(spec.services)
            holder = self.holders.lend() if runner and not own else None
            try:
                box = dc.create(client, image, spec, self.limits, kind, self.token, runner, holder, network)
            except docker.errors.APIError as e:
                if isinstance(e, docker.errors.ImageNotFound):
                    if holder is not None:
                        self.holders.give_back(holder)
                    raise
                if holder is not None:  # stopped or removed under us: never lend it again
                    self.janitor.submit(dc.remove, holder)
                if attempt == 2:
                    raise
                if holder is None:
                    if runner is None or "mount" not in str(e).lower():
                        raise
                    # the daemon does not see this machine's files after all: docker exec from now on
                    self.connection.drop_runner(f"the daemon cannot mount the runner: {e.explanation or e}")
                continue
            self.stats.add("containers_created")
            if holder is not None:
                self.stats.add("netns_borrowed")
            return box
        raise AssertionError("unreachable: the last attempt returns or raises")

    def replayed(self, spec: SandboxSpec, history: Sequence[str]) -> tuple[ct.Box, rs.Running]:
        """A started container at the pivot state (set-up as root, then the history as the user).

        Also returns the processes the replay left running in it (`restore.replay_state`).
        """
        self.images(self.connection.client, spec.image)
        box = self.create(spec.image, spec, "replay")
        try:
            running = rs.replay_state(box, spec, self.limits, history)
            self.stats.add("replayed_commands", len(history))
            return box, running
        except BaseException:
            self.discard(box)
            raise

    def at_state(self, key: str, image: str, spec: SandboxSpec, kind: str, network: str = "none") -> ct.Box:
        """A container on the snapshot `key` (`image`), the processes its state runs started again (`restart`)."""
        box = self.create(image, spec, kind, network)
        running = self.cache.running_of(key)
        if not running:
            return box
        try:
            box = rs.restart(box, spec, self.limits, running)
        except BaseException:
            self.discard(box)
            raise
        self.stats.add("processes_restarted", len(running.processes))
        return box

    def discard(self, box: ct.Box) -> None:
        """Retire a container in the background (inline once the janitor has shut down)."""
        try:
            self.janitor.submit(self.retire, box)
        except RuntimeError:
            self.retire(box)

    def retire(self, box: ct.Box) -> None:
        """Remove a container, or keep it as a holder when it owns a namespace that nothing uses now.

        Only an offline one (`--network none`): a replay with registry access ran in the host's
        network, and a candidate container that joined it would have the network. Nor one whose
        state ran servers (`Box.running`): their closed connections linger in the namespace
        (TIME_WAIT), where the next container's restart of the same server would meet them.
        """
        lendable = box.offline and not box.running
        if box.holder is None and lendable and not self.closing.is_set() and ct.settle(box) and self.holders.offer(box):
            self.stats.add("netns_holders_kept")
            return
        dc.remove(box)
        if box.holder is not None:  # what ran in its namespace is gone with the container
            (dc.remove if box.running else self.holders.give_back)(box.holder)

    def remove_image(self, image: str) -> None:
        """Remove a snapshot image (one still used by a container stays: `gc` removes it once its owner is gone)."""
        try:
            self.connection.client.images.remove(image, force=True)
        except docker.errors.APIError:
            pass

    def close(self, parallelism: int) -> None:
        """Remove the namespace holders, side by side (each removal waits on the daemon)."""
        with ThreadPoolExecutor(parallelism, thread_name_prefix="pivot-sandbox-close") as removers:
            for holder in self.holders.close():
                removers.submit(dc.remove, holder)


__all__ = ["Fleet"]
