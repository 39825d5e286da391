"""`sandbox_backend`: a registered sandbox backend by name, checked against the contract before its first use.

Backends register a factory through the `register_sandboxes` hook (the built-in `docker` and
`namespace`, and any plugin's). Every caller that needs one (the `docker_shell` verifier, the
episode envs, the replay check) asks here, so that a plugin's backend is held to the same
`SandboxBackend` contract (`pivot_sandbox.check_backend`, its static part) as the built-in ones,
and `PIVOT_SANDBOX` may name any of them.
"""

from __future__ import annotations

import threading
from typing import Any

from pivot_sandbox import SandboxBackend, check_backend, chosen_backend
from verifiers_plugins._host import get_host

_CHECKED: set[type] = set()  # backend classes that kept the contract once: checked again for nothing
_LOCK = threading.Lock()


def sandbox_backend(name: str | None = None, **config: Any) -> SandboxBackend:
    """The backend registered as `name` (default: `PIVOT_SANDBOX`, else the machine's default) for `config`.

    Raises `UnknownVerifier` (with a did-you-mean) for a name no plugin registered, `SandboxUnavailable`
    when the backend cannot run here, `BackendContractError` naming what a backend lacks.
    """
    factory = get_host().get("sandboxes", chosen_backend(name))
    backend = factory(**config)
    with _LOCK:
        known = type(backend) in _CHECKED
    if not known:
        check_backend(backend)
        with _LOCK:
            _CHECKED.add(type(backend))
    return backend


__all__ = ["sandbox_backend"]
