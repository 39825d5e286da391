"""The services a sandbox runs beside its main container: a docker-compose task's other services.

A Terminal-Bench task may be a docker-compose file whose `client` service is where the agent works and
whose other services (a server, a database) are built from the task's own folder. Such a task's
`SandboxSpec.services` names each: the image built from its folder (`tasks/compose_images.py`), its
environment and its command. The Docker backend starts a fresh set of them, on a private internal
network of their own, for every container of the spec (`docker/services.py`): the replay's, each
candidate's, an episode's; the main container reaches them by their names and nothing else.

Nothing here imports docker: `context.sandbox.services` is read and written through this type.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pivot_sandbox.errors import SandboxError

# a compose service name, used as a DNS name on the private network (one label, at most 63 characters)
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
_KEYS = ("name", "image", "env", "command")


@dataclass(frozen=True)
class ServiceSpec:
    """One service beside a sandbox's main container.

    Attributes:
        name: the compose service name: the host name the main container reaches it by (`http://server:8000`).
        image: its image (built from the task's folder; never pulled).
        env: its environment.
        command: what it runs (argv); () runs its image's own command.
    """

    name: str
    image: str
    env: Mapping[str, str] = field(default_factory=dict)
    command: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check(self, "sandbox.services")

    def to_json(self) -> dict[str, Any]:
        """The `context.sandbox.services` entry (env and command only when set)."""
        out: dict[str, Any] = {"name": self.name, "image": self.image}
        if self.env:
            out["env"] = dict(self.env)
        if self.command:
            out["command"] = list(self.command)
        return out

    @classmethod
    def from_json(cls, raw: Any, where: str) -> ServiceSpec:
        """A service from its JSON entry; `where` names the entry in errors ("context.sandbox.services[0]").

        Raises:
            SandboxError: a malformed entry; the message names the key.
        """
        if isinstance(raw, ServiceSpec):
            return raw
        if not isinstance(raw, Mapping):
            raise SandboxError(f"{where}: expected an object with name and image, got {type(raw).__name__}")
        unknown = sorted(set(raw) - set(_KEYS))
        if unknown:
            raise SandboxError(f"{where}.{unknown[0]}: not a key of a service (expected {', '.join(_KEYS)})")
        env, command = raw.get("env") or {}, raw.get("command") or ()
        if not isinstance(env, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise SandboxError(f"{where}.env: expected an object of names to strings, got {env!r:.80}")
        if isinstance(command, str) or not all(isinstance(a, str) for a in command):
            raise SandboxError(f"{where}.command: expected a list of strings (argv), got {command!r:.80}")
        try:
            return cls(raw.get("name"), raw.get("image"), dict(env), tuple(command))
        except SandboxError as e:  # its own check names the field; the entry's place goes before it
            raise SandboxError(str(e).replace("sandbox.services", where, 1)) from None


def _check(service: ServiceSpec, where: str) -> None:
    """Raise `SandboxError` naming the key of a malformed field (`where`: the entry's place)."""
    if not isinstance(service.name, str) or not NAME.match(service.name):
        raise SandboxError(f"{where}.name: expected a service name (letters, digits, '_.-'), got {service.name!r}")
    if not isinstance(service.image, str) or not service.image:
        raise SandboxError(f"{where}.image: expected a non-empty image name, got {service.image!r}")
    object.__setattr__(service, "env", {str(k): str(v) for k, v in dict(service.env).items()})
    object.__setattr__(service, "command", tuple(str(a) for a in service.command))


def services_of(raw: Any, where: str = "sandbox.services") -> tuple[ServiceSpec, ...]:
    """The services of a spec: `ServiceSpec`s or their JSON entries, names unique.

    Raises:
        SandboxError: not a list, a malformed entry or a name given twice; the message names the key.
    """
    if isinstance(raw, str | bytes | Mapping) or not isinstance(raw, Sequence):
        raise SandboxError(f"{where}: expected a list of services, got {type(raw).__name__}")
    services = tuple(ServiceSpec.from_json(s, f"{where}[{i}]") for i, s in enumerate(raw))
    names = [s.name.lower() for s in services]  # host names: case does not tell two apart
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise SandboxError(f"{where}: the service name {twice[0]!r} is given twice")
    return services


__all__ = ["NAME", "ServiceSpec", "services_of"]
