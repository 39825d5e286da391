"""The images the namespace backend runs: the Docker daemon that builds them, and their root file systems.

Docker stays the image builder; each image's root file system is exported once (`_nsroot.rootfs`,
cached by image id) and kept here with the layers it was exported from.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from pivot_sandbox.contract.backend import ImageResolver
from pivot_sandbox.errors import SandboxUnavailable
from pivot_sandbox.namespace import root as nr
from pivot_sandbox.namespace.box import Root

if TYPE_CHECKING:  # imported on the first use of `client`
    import docker


class ImageRoots:
    """The Docker client (connected on first use) and the exported root of each image asked for."""

    def __init__(self, base_url: str | None, resolve: ImageResolver) -> None:
        self.base_url, self.resolve = base_url, resolve
        self._lock = threading.Lock()
        self._client: docker.DockerClient | None = None
        self._roots: dict[str, Root] = {}

    @property
    def client(self) -> docker.DockerClient:
        """The Docker client that builds and exports images (raises `SandboxUnavailable` without a daemon)."""
        with self._lock:
            if self._client is None:
                import docker

                try:
                    self._client = docker.DockerClient(base_url=self.base_url) if self.base_url else docker.from_env()
                    self._client.ping()
                except Exception as e:  # noqa: BLE001 - any failure: no engine to build the images with
                    self._client = None
                    where = self.base_url or os.environ.get("DOCKER_HOST") or "the local socket"
                    raise SandboxUnavailable(
                        f"Docker daemon not reachable at {where} (the namespace sandbox takes its images from "
                        f"Docker): {e}. Start dockerd or point DOCKER_HOST at one"
                    ) from e
            return self._client

    def root(self, image: str) -> Root:
        """The image's exported root file system (built or pulled into Docker first where missing)."""
        with self._lock:
            found = self._roots.get(image)
        if found is None:
            client = self.client
            self.resolve(client, image)
            path, env = nr.rootfs(client, image)
            info = client.api.inspect_image(image)
            # the layers of the image exported (a tag moved meanwhile: none, so no snapshot lies on it)
            same = info["Id"].split(":")[-1][:32] == path.parent.name
            found = Root(path, env, tuple(info["RootFS"]["Layers"]) if same else ())
            with self._lock:
                self._roots[image] = found
        return found
