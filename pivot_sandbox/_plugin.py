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

_BACKENDS: dict[str, Any] = {}
_LOCK = threading.Lock()


def docker_backend(**config: Any) -> Any:
    """The process-wide `DockerBackend` for this configuration."""
    key = json.dumps(config, sort_keys=True, default=str)
    with _LOCK:
        backend = _BACKENDS.get(key)
        if backend is None or backend._closed:
            module = importlib.import_module("pivot_sandbox._docker")
            backend = _BACKENDS[key] = module.DockerBackend(**config)
        return backend
