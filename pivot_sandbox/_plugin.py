"""The factory of the built-in Docker backend (registered by `builtin/docker_shell.py`'s `register_sandboxes`).

The factory imports the docker SDK only when a backend is first asked for, so loading plugins
(which every env does) never imports docker. Backends are shared per configuration: their
snapshot cache and warm pool serve every verifier of the process.
"""

from __future__ import annotations

import importlib
import json
import threading
from typing import Any

from pivot_sandbox.errors import SandboxUnavailable

_BACKENDS: dict[str, Any] = {}
_LOCK = threading.Lock()


def docker_backend(**config: Any) -> Any:
    """The process-wide `DockerBackend` for this configuration."""
    key = json.dumps(config, sort_keys=True, default=str)
    with _LOCK:
        backend = _BACKENDS.get(key)
        if backend is None or backend._closed:
            try:
                module = importlib.import_module("pivot_sandbox._docker")
            except ImportError as e:
                if (e.name or "").split(".")[0] != "docker":
                    raise
                # the minimal install (`pip install pivot-gym`) has no docker SDK: say what to install
                raise SandboxUnavailable(
                    "the docker sandbox needs the Docker SDK and a Docker engine: "
                    "pip install 'pivot-gym[sandbox]', then start a Docker engine (dockerd) or set DOCKER_HOST"
                ) from e
            backend = _BACKENDS[key] = module.DockerBackend(**config)
        return backend
