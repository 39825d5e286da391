"""The factory of the built-in Docker backend (registered by `builtin/docker_shell.py`'s `register_sandboxes`).

The factory imports the docker SDK only when a backend is first asked for, so loading plugins
(which every env does) never imports docker. Backends are shared per configuration: their
snapshot cache and warm pool serve every verifier of the process.
"""

from __future__ import annotations

import importlib
import json
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pivot_sandbox.errors import SandboxUnavailable

if TYPE_CHECKING:  # the wings import docker's SDK: only once a backend is asked for
    from pivot_sandbox.docker.backend import DockerBackend
    from pivot_sandbox.namespace.backend import NamespaceBackend

_BACKENDS: dict[str, DockerBackend | NamespaceBackend] = {}
_LOCK = threading.Lock()
# the minimal install (`pip install pivot-gym`) has no docker SDK: say what to install
NO_SDK = (
    "needs the Docker SDK and a Docker engine: pip install 'pivot-gym[sandbox]', then start a Docker engine "
    "(dockerd) or set DOCKER_HOST"
)


def docker_backend(**config: Any) -> DockerBackend:
    """The process-wide `DockerBackend` for this configuration; its images resolved by the task home."""
    key = json.dumps(config, sort_keys=True, default=str)
    with _LOCK:
        backend = _BACKENDS.get(key)
        if backend is None or backend.closed:
            try:
                module = importlib.import_module("pivot_sandbox.docker.backend")
            except ImportError as e:
                if (e.name or "").split(".")[0] != "docker":
                    raise
                raise SandboxUnavailable(f"the docker sandbox {NO_SDK}") from e
            from pivot_sandbox.tasks.terminal_bench import ensure_image

            backend = _BACKENDS[key] = module.DockerBackend(images=ensure_image, **config)
        return backend


def namespace_backend(**config: Any) -> NamespaceBackend:
    """The process-wide `NamespaceBackend` for this configuration (raises `SandboxUnavailable` with the reason)."""
    key = "namespace:" + json.dumps(config, sort_keys=True, default=str)
    with _LOCK:
        backend = _BACKENDS.get(key)
        if backend is None or backend.closed:
            from pivot_sandbox.namespace.root import unavailable

            why = unavailable()
            if why:
                raise SandboxUnavailable(f"the namespace sandbox cannot run here: {why}")
            try:
                importlib.import_module("docker")
            except ImportError as e:  # the images come from Docker (the minimal install has no SDK)
                if (e.name or "").split(".")[0] != "docker":
                    raise
                raise SandboxUnavailable(f"the namespace sandbox takes its images from Docker, which {NO_SDK}") from e
            from pivot_sandbox.tasks.terminal_bench import ensure_image

            module = importlib.import_module("pivot_sandbox.namespace.backend")
            backend = _BACKENDS[key] = module.NamespaceBackend(docker=docker_backend, images=ensure_image, **config)
        return backend


BACKEND_NAMES = ("docker", "namespace")


def verification_backend(timeout: float, limits: Mapping[str, Any] | None = None) -> DockerBackend:
    """The backend a task's tests run on: Docker's (live sessions) under `TEST_LIMITS`, actions stopped at `timeout`.

    `limits`: the task's own container limits over `TEST_LIMITS` (`task_limits`: a Harbor task's cpus, memory).
    """
    from pivot_sandbox.tasks.verification import TEST_LIMITS

    return docker_backend(action_timeout=float(timeout), **{**TEST_LIMITS, **dict(limits or {})})


def default_backend() -> str:
    """The backend used when none is chosen: "namespace" where it runs here with its hardening, else "docker".

    The namespace backend gives the same verdicts (`bench/sandbox.py --backends docker,namespace`:
    docs/results/sandbox.md) at a fraction of the latency, and passes the escape suite
    (`tests/pivot_sandbox/test_escapes.py`: Docker's default covers, the runner's channel out of
    reach) where its seccomp filter loads (x86_64). Elsewhere it lacks one of Docker's covers, so it
    is never the default there (it still runs when named). What it lacks (a state whose replay needs
    registry access, live sessions) is run by Docker, and the verdict says so (`docker_shell`).
    """
    from pivot_sandbox.contract.hardening import seccomp_program

    hardened = seccomp_program() is not None
    return "namespace" if usable_backends()["namespace"] is None and hardened else "docker"


def chosen_backend(explicit: str | None = None) -> str:
    """The sandbox backend to use: `explicit`, else `PIVOT_SANDBOX`, else `default_backend()`.

    An explicit choice is never swapped for another: a namespace backend that cannot run fails
    with the reason when first used.
    """
    import os

    # any name a plugin registered through `register_sandboxes`: the registry says which exist
    # (`verifiers_plugins.sandbox_backend`, with a did-you-mean for a name none registered)
    return explicit or os.environ.get("PIVOT_SANDBOX") or default_backend()


def usable_backends() -> dict[str, str | None]:
    """Each backend's name -> None when this machine can run it, else why not (Docker: not probed here)."""
    from pivot_sandbox.namespace.root import unavailable

    return {"docker": None, "namespace": unavailable()}


def namespace_details() -> dict[str, str | bool]:
    """What holds the namespace backend's limits here (`cgroup v1|v2` or `rlimits`), and whether seccomp is on."""
    from pivot_sandbox.contract.hardening import seccomp_program
    from pivot_sandbox.namespace.root import Cgroups

    version = Cgroups.version()
    return {
        "namespace_limits": f"cgroup {version}" if version != "none" else "rlimits",
        "namespace_seccomp": seccomp_program() is not None,
    }


def namespace_gc(everything: bool = False) -> dict[str, int]:
    """Remove the namespace backend's folders and cgroups of processes that are gone (all with `everything`)."""
    from pivot_sandbox.namespace.root import gc

    return gc(everything)
