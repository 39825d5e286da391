"""The Docker wing's connection: the daemon, reached on first use, and how commands reach its containers.

Connecting checks the daemon, removes what dead owners left (`docker/cleanup.py`) and decides the
transport: the in-container runner (`replay/runner.py`: one socket round trip per command) when
this machine can build it and the daemon is local, else `docker exec`.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import docker
import docker.errors

from pivot_sandbox.contract.spec import OWNER
from pivot_sandbox.docker import cleanup as _cleanup
from pivot_sandbox.errors import SandboxUnavailable
from pivot_sandbox.replay import runner as rn


class Connection:
    """One backend's Docker client, connected on first use, and the runner its containers get.

    Args:
        base_url: Docker endpoint (default: `DOCKER_HOST` or the local socket).
        use_runner: send commands to an in-container runner where it can be used; False: `docker exec`.
        lock: the backend's lock, held while connecting and while the transport changes.
        closing: the backend's "closed" flag, set by `at_exit` as by `close`.

    Attributes:
        runner: the runner binary mounted into containers (None: `docker exec`).
        note: why the runner is not used (None when it is).
    """

    def __init__(self, base_url: str | None, use_runner: bool, lock: threading.RLock, closing: threading.Event) -> None:
        self.base_url, self.use_runner = base_url, use_runner
        self.note: str | None = None if use_runner else "turned off (runner=False)"
        self.runner: Path | None = None
        self.connected: docker.DockerClient | None = None  # None until the first use of `client`
        self._lock, self._closing = lock, closing

    @property
    def client(self) -> docker.DockerClient:
        """The docker client; the first use checks the daemon and removes dead owners' leftovers."""
        with self._lock:
            if self.connected is None:
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
                _cleanup.on_exit(self.at_exit)
                if self.use_runner:
                    found = rn.runner_for(self.base_url)
                    self.runner, self.note = (found, None) if isinstance(found, Path) else (None, found)
                self.connected = client
            return self.connected

    @property
    def transport(self) -> str:
        """How commands reach containers: "runner" or "docker exec" (decided on connection)."""
        _ = self.client
        return "runner" if self.runner else "docker exec"

    def drop_runner(self, why: str) -> None:
        """Use `docker exec` from now on (the daemon cannot mount the runner after all), saying why."""
        with self._lock:
            self.runner, self.note = None, why

    def at_exit(self) -> None:
        """Exit or signal: the process is going away, so remove everything it made, without waiting."""
        with self._lock:
            self._closing.set()
        if self.connected is not None:
            _cleanup.gc(self.connected, owner=OWNER)


__all__ = ["Connection"]
