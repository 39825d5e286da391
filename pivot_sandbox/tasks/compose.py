"""A Terminal-Bench task's docker-compose file, read: the `client` service's build and the other services'.

Terminal-Bench's compose files run the agent in a `client` service built from a folder of the task; its
volumes, logs path and DNS settings are the harness's and are not needed here. Another service is
accepted when it is built from a folder of the task (`build:` with an optional `dockerfile`), or runs
an image one of the local stand-ins serves (`images/bases.py`: `python:3.13-slim` and the like, with
the `command` it is given); it keeps its name (the host name the client reaches it by), its
`environment` and its `entrypoint`/`command`. A service that runs an image no registry here serves
cannot be started offline: that, or a malformed file, is the problem (naming the file and the key).
Its image is built by `tasks/compose_images.py`; the sandbox runs it (`docker/services.py`).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pivot_core import AliasBudgetExceeded, load_yaml
from pivot_sandbox.contract.services import NAME
from pivot_sandbox.errors import ComposeError
from pivot_sandbox.images.bases import map_base

COMPOSE_FILES = ("docker-compose.yaml", "docker-compose.yml")
MAIN = "client"  # the service the agent works in
_CONTEXT_VAR = "${T_BENCH_TASK_BUILD_CONTEXT_DIR}"  # the harness's name for the task folder


@dataclass(frozen=True)
class ComposeService:
    """A service beside the client, to build and run.

    Attributes:
        name: its compose name (the client reaches it by this host name).
        context: its build context (inside the task folder).
        dockerfile: the Dockerfile's text (`FROM <image>` for a service that only names a stand-in's image).
        where: the Dockerfile's path, for messages.
        env: its `environment`.
        command: its `entrypoint` then its `command` (argv); () runs the Dockerfile's CMD or ENTRYPOINT.
    """

    name: str
    context: Path
    dockerfile: str
    where: str
    env: Mapping[str, str] = field(default_factory=dict)
    command: tuple[str, ...] = ()


@dataclass(frozen=True)
class Compose:
    """What a task folder's compose file (or its absence) says: the client's build and the other services."""

    context: Path
    dockerfile: Path
    services: tuple[ComposeService, ...] = ()
    problem: str = ""


def read_compose(task_dir: Path) -> Compose:
    """The task's compose file read (a folder without one: its own Dockerfile); a problem names file and key."""
    path = next((task_dir / n for n in COMPOSE_FILES if (task_dir / n).is_file()), None)
    plain = Compose(task_dir, task_dir / "Dockerfile")
    if path is None:
        return plain
    try:
        services = (load_yaml(path.read_text()) or {}).get("services") or {}
    except (yaml.YAMLError, AliasBudgetExceeded) as e:
        return Compose(task_dir, task_dir / "Dockerfile", problem=f"{path}: not valid YAML: {e}")
    except AttributeError:
        return Compose(task_dir, task_dir / "Dockerfile", problem=f"{path}: expected a mapping at the top")
    try:
        if not isinstance(services, Mapping):
            raise ComposeError(f"services: expected a mapping of names to services, got {type(services).__name__}")
        context, dockerfile = _build_of(task_dir, services.get(MAIN) or {}, MAIN)
        others = tuple(_service(task_dir, str(n), s, len(services)) for n, s in services.items() if n != MAIN)
    except ComposeError as e:
        return Compose(task_dir, task_dir / "Dockerfile", problem=f"{path}: {e}")
    return Compose(context, dockerfile, others)


def _build_of(task_dir: Path, service: Any, name: str) -> tuple[Path, Path]:
    """(context, Dockerfile path) of a service's `build` (a string or a mapping), inside the task folder."""
    if not isinstance(service, Mapping):
        raise ComposeError(f"services.{name}: expected a mapping, got {type(service).__name__}")
    build = service.get("build") or {}
    if isinstance(build, str):
        build = {"context": build}
    if not isinstance(build, Mapping):
        raise ComposeError(f"services.{name}.build: expected a folder or a mapping, got {type(build).__name__}")
    for key in ("context", "dockerfile"):
        if build.get(key) is not None and not isinstance(build[key], str):
            raise ComposeError(f"services.{name}.build.{key}: expected a string, got {build[key]!r:.60}")
    raw = str(build.get("context") or ".").replace(_CONTEXT_VAR, ".")
    context = (task_dir / raw).resolve()
    if task_dir.resolve() not in (context, *context.parents):
        raise ComposeError(f"services.{name}.build.context: {raw!r} lies outside the task folder")
    dockerfile = (context / str(build.get("dockerfile") or "Dockerfile")).resolve()
    if task_dir.resolve() not in dockerfile.parents:
        raise ComposeError(f"services.{name}.build.dockerfile: {build['dockerfile']!r} lies outside the task folder")
    return context, dockerfile


def _service(task_dir: Path, name: str, service: Any, count: int) -> ComposeService:
    """A service beside the client: built from the task's folder, or on a local stand-in's image."""
    if not isinstance(service, Mapping):
        raise ComposeError(f"services.{name}: expected a mapping, got {type(service).__name__}")
    if not NAME.match(name):
        raise ComposeError(f"services.{name}: not a name a host can be reached by (letters, digits, '_.-')")
    env, command = _environment(service.get("environment"), name), _command(service, name)
    if service.get("build") is not None:
        context, path = _build_of(task_dir, service, name)
        if not path.is_file():
            raise ComposeError(f"services.{name}.build.dockerfile: no file {path.relative_to(task_dir.resolve())}")
        return ComposeService(name, context, path.read_text(errors="replace"), str(path), env, command)
    image = service.get("image")
    if not isinstance(image, str) or not image:
        raise ComposeError(f"services.{name}: neither build nor image")
    if map_base(image) is None:  # nothing pulls an image here
        raise ComposeError(f"{count} services; {name!r} runs image {image!r}, which no registry here serves")
    if not command:  # a stand-in has none of the original's own command (a database's server, say)
        raise ComposeError(f"services.{name}.command: {image!r} runs as a local stand-in, which needs the command")
    return ComposeService(name, task_dir.resolve(), f"FROM {image}\n", f"services.{name}.image", env, command)


def _environment(raw: Any, name: str) -> dict[str, str]:
    """A service's `environment`: a mapping, or a list of `KEY=value` (a bare `KEY` is the harness's: left out)."""
    if raw is None:
        return {}
    if isinstance(raw, Mapping):
        return {str(k): "" if v is None else str(v) for k, v in raw.items()}
    if isinstance(raw, list) and all(isinstance(e, str) for e in raw):
        return dict(e.split("=", 1) for e in raw if "=" in e)
    raise ComposeError(f"services.{name}.environment: expected a mapping or a list of KEY=value, got {raw!r:.60}")


def _command(service: Mapping[str, Any], name: str) -> tuple[str, ...]:
    """`entrypoint` then `command`, each a string (split as a shell would) or a list of strings."""
    argv: list[str] = []
    for key in ("entrypoint", "command"):
        raw = service.get(key)
        if raw is None:
            continue
        if isinstance(raw, str):
            argv += shlex.split(raw)
        elif isinstance(raw, list) and all(isinstance(a, str | int | float) for a in raw):
            argv += [str(a) for a in raw]
        else:
            raise ComposeError(f"services.{name}.{key}: expected a string or a list of strings, got {raw!r:.60}")
    return tuple(argv)


__all__ = ["COMPOSE_FILES", "MAIN", "Compose", "ComposeError", "ComposeService", "read_compose"]
