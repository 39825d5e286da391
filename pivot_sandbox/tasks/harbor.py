"""Harbor task folders (Terminal-Bench 2.0 and the tasks written for Harbor), read and checked.

A Harbor task folder holds `instruction.md` (the prompt), `task.toml` (timeouts and resources),
`environment/Dockerfile` (its build context is `environment/`), `solution/solve.sh` (the oracle,
copied to /solution by Harbor's oracle agent only) and `tests/test.sh` with the test files (copied to
/tests after the agent is done; `test.sh` writes `/logs/verifier/reward.json` or `reward.txt`).

`load_harbor_task(folder)` reads it into the same `Task` the Terminal-Bench loader gives
(`tasks/terminal_bench.py`, whose `load_task` dispatches here for a folder with a `task.toml` and no
`task.yaml`), with the reading of `task.toml` in `Task.harbor` (`HarborConfig`). What matters here
is read and checked; every other key is kept as written (`HarborConfig.raw`), as Harbor keeps what its
models do not declare. Schema versions 1.0 (`version = "1.0"`, TB2's: `memory = "2G"`), 1.1 to 1.3
(`schema_version`, `memory_mb`) load alike; Harbor never checks the value either.

A malformed file raises `TaskError` naming the file and the key ("task.toml: [verifier].timeout_sec:
expected a number of seconds, got 'soon'").

Public API:
    load_harbor_task(folder) -> Task        is_harbor_task(folder) -> bool
    read_task_toml(path) -> HarborConfig    harbor_limits(config) -> dict (the sandbox's limits)
    container_limits(config) -> dict        (cpus, memory, storage: a pivot's `context.task.limits`)
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pivot_sandbox.errors import TaskError
from pivot_sandbox.tasks.harness import TestPlan

# Harbor's defaults (harbor-format.md §2): the verifier 600 s; the agent none, bounded here by the
# longest agent timeout TB2 gives (a replayed oracle must end).
VERIFIER_TIMEOUT = 600.0
AGENT_TIMEOUT = 900.0
BUILD_TIMEOUT = 600.0
NETWORK_MODES = ("public", "no-network", "allowlist")


@dataclass(frozen=True)
class HarborConfig:
    """What `task.toml` says that a sandbox of the task needs; everything else stays in `raw`.

    Attributes:
        path: the file read (for messages).
        schema_version: `schema_version` (or 1.0's `version`), "" when absent.
        agent_timeout: `[agent].timeout_sec` (`AGENT_TIMEOUT` when absent: Harbor has no limit).
        verifier_timeout: `[verifier].timeout_sec` (default 600).
        build_timeout: `[environment].build_timeout_sec` (default 600).
        cpus: `[environment].cpus`, None when unset.
        memory_mb: `[environment].memory_mb`, or the deprecated `memory` ("2G") in MB; None when unset.
        storage_mb: likewise `storage_mb` / `storage`.
        docker_image: `[environment].docker_image`, the prebuilt image (never pullable here).
        network_mode: `[environment].network_mode`, or the deprecated `allow_internet` mapped to it.
        verifier_user: `[verifier].user` ("" = the image's USER).
        verifier_env: `[verifier].env`.
        solution_env: `[solution].env`.
        workdir: `[environment].workdir`, "" when unset (the Dockerfile's WORKDIR stands).
        os: `[environment].os` ("linux" unless said).
        metadata: `[metadata]`, free.
        raw: the whole file as TOML read it.
    """

    path: Path
    schema_version: str = ""
    agent_timeout: float = AGENT_TIMEOUT
    verifier_timeout: float = VERIFIER_TIMEOUT
    build_timeout: float = BUILD_TIMEOUT
    cpus: float | None = None
    memory_mb: int | None = None
    storage_mb: int | None = None
    docker_image: str = ""
    network_mode: str = "public"
    verifier_user: str = ""
    verifier_env: Mapping[str, str] = field(default_factory=dict)
    solution_env: Mapping[str, str] = field(default_factory=dict)
    workdir: str = ""
    os: str = "linux"
    metadata: Mapping[str, Any] = field(default_factory=dict)
    raw: Mapping[str, Any] = field(default_factory=dict)


class _Reader:
    """Typed reads of one table of a task.toml; a wrong type raises `TaskError` naming file and key."""

    def __init__(self, path: Path, data: Mapping[str, Any], table: str) -> None:
        self.path, self.table = path, table
        value = data.get(table, {}) if table else data
        if not isinstance(value, Mapping):
            self._fail("", "a table", value)
        self.data: Mapping[str, Any] = value

    def _fail(self, key: str, expected: str, got: Any) -> None:
        where = f"[{self.table}]" + (f".{key}" if key else "") if self.table else key
        raise TaskError(f"{self.path}: {where}: expected {expected}, got {got!r}")

    def number(self, key: str, default: float | None, minimum: float = 0.0) -> float | None:
        value = self.data.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
            self._fail(key, f"a number >= {minimum:g}", value)
        return float(value)

    def text(self, key: str, default: str = "", choices: tuple[str, ...] = ()) -> str:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, str) or (choices and value.lower() not in choices):
            self._fail(key, f"one of {list(choices)}" if choices else "a string", value)
        return value.lower() if choices else value

    def strings(self, key: str) -> dict[str, str]:
        value = self.data.get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping) or not all(isinstance(v, str | int | float) for v in value.values()):
            self._fail(key, "a table of strings", value)
        return {str(k): str(v) for k, v in value.items()}

    def size_mb(self, new: str, legacy: str) -> int | None:
        """`<new>` in MB, or the deprecated `<legacy>` ("2G", "512M", "1024K") converted as Harbor does."""
        mb = self.number(new, None)
        text = self.data.get(legacy)
        if text is None:
            return None if mb is None else int(mb)
        if not isinstance(text, str):
            self._fail(legacy, "a size like '2G' or '512M'", text)
        size = text.strip().upper()
        scale = {"G": 1024.0, "M": 1.0, "K": 1 / 1024}.get(size[-1:])
        try:
            legacy_mb = int(float(size[:-1]) * scale) if scale else None
        except ValueError:
            legacy_mb = None
        if legacy_mb is None:
            self._fail(legacy, "a size like '2G' or '512M'", text)
        if mb is not None and int(mb) != legacy_mb:
            self._fail(legacy, f"the same size as {new} = {int(mb)}", text)
        return legacy_mb


def _network_mode(env: _Reader) -> str:
    """`network_mode` (1.3), else the deprecated `allow_internet` (true: public, false: no-network)."""
    mode = env.text("network_mode", "", NETWORK_MODES)
    allow = env.data.get("allow_internet")
    if allow is not None and not isinstance(allow, bool):
        env._fail("allow_internet", "true or false", allow)
    return mode or ("no-network" if allow is False else "public")


def read_task_toml(path: Path) -> HarborConfig:
    """A task.toml as a `HarborConfig` (see the module docstring); a malformed one raises `TaskError`."""
    try:
        data = tomllib.loads(path.read_text(errors="replace"))
    except tomllib.TOMLDecodeError as e:
        raise TaskError(f"{path}: not valid TOML: {e}") from e
    top = _Reader(path, data, "")
    version = top.text("schema_version") or top.text("version")
    agent, verifier = _Reader(path, data, "agent"), _Reader(path, data, "verifier")
    env, solution = _Reader(path, data, "environment"), _Reader(path, data, "solution")
    _Reader(path, data, "metadata")  # a table, if present
    user = verifier.data.get("user")
    if user is not None and (isinstance(user, bool) or not isinstance(user, str | int)):
        verifier._fail("user", "a user name or uid", user)
    return HarborConfig(
        path=path,
        schema_version=version,
        agent_timeout=agent.number("timeout_sec", AGENT_TIMEOUT) or AGENT_TIMEOUT,
        verifier_timeout=verifier.number("timeout_sec", VERIFIER_TIMEOUT) or VERIFIER_TIMEOUT,
        build_timeout=env.number("build_timeout_sec", BUILD_TIMEOUT) or BUILD_TIMEOUT,
        cpus=env.number("cpus", None),
        memory_mb=env.size_mb("memory_mb", "memory"),
        storage_mb=env.size_mb("storage_mb", "storage"),
        docker_image=env.text("docker_image"),
        network_mode=_network_mode(env),
        verifier_user="" if user is None else str(user),
        verifier_env=verifier.strings("env"),
        solution_env=solution.strings("env"),
        workdir=env.text("workdir"),
        os=env.text("os", "linux", ("linux", "windows")),
        metadata=dict(data.get("metadata") or {}),
        raw=data,
    )


def is_harbor_task(folder: Path | str) -> bool:
    """True for a Harbor task folder: a `task.toml`, and no Terminal-Bench `task.yaml` beside it."""
    folder = Path(folder)
    return (folder / "task.toml").is_file() and not (folder / "task.yaml").is_file()


def _problem(folder: Path, config: HarborConfig) -> str:
    """Why the task's tests cannot run here ("" when they can)."""
    if config.os != "linux":
        return f"{config.path}: [environment].os = {config.os!r}: only Linux tasks run here"
    if not (folder / "tests" / "test.sh").is_file():
        return f"{folder}: no tests/test.sh"
    return ""


def load_harbor_task(folder: Path | str) -> Any:
    """A Harbor task folder as a `Task` (`tasks/terminal_bench.py`) with `Task.harbor` set.

    Raises:
        TaskError: no task.toml or a malformed one (file and key named), or no instruction.md.
    """
    from pivot_sandbox.tasks.terminal_bench import Task  # that module dispatches here from `load_task`

    folder = Path(folder)
    if not (folder / "task.toml").is_file():
        raise TaskError(f"{folder}: no task.toml (not a Harbor task folder)")
    config = read_task_toml(folder / "task.toml")
    instruction = folder / "instruction.md"
    if not instruction.is_file():
        raise TaskError(f"{folder}: no instruction.md (every Harbor task has its prompt there)")
    context = folder / "environment"
    dockerfile = context / "Dockerfile"
    compose = ""
    if not dockerfile.is_file() and any((context / n).is_file() for n in ("docker-compose.yaml", "docker-compose.yml")):
        compose = f"{context}: a docker-compose environment, which is not built here (only environment/Dockerfile)"
    tests = TestPlan((), (), "", config.verifier_timeout, _problem(folder, config))
    return Task(
        task_id=folder.name,
        dir=folder,
        instruction=instruction.read_text(errors="replace"),
        dockerfile=dockerfile.read_text(errors="replace") if dockerfile.is_file() else "",
        compose=compose,
        context=context,
        agent_timeout=config.agent_timeout,
        tests=tests,
        meta=dict(config.raw),
        harbor=config,
    )


def container_limits(config: HarborConfig) -> dict[str, Any]:
    """What `task.toml` says of the task's container, as a pivot's `context.task.limits` carries it.

    `memory` (Docker's syntax, from `memory_mb` or 1.0's `memory = "4G"`) and `cpus`, where the file
    sets them: `Limits` fields, applied to the container by either backend (Docker's `mem_limit` and
    `nano_cpus`, the namespace backend's cgroup). `storage_mb` where set, carried but not enforced:
    Docker limits a container's disk only on overlay2 over xfs with project quotas (`--storage-opt
    size`), which the engines here lack, and the namespace backend has no disk quota.
    """
    out: dict[str, Any] = {}
    if config.memory_mb:
        out["memory"] = f"{config.memory_mb}m"
    if config.cpus:
        out["cpus"] = float(config.cpus)
    if config.storage_mb:
        out["storage_mb"] = config.storage_mb
    return out


def harbor_limits(config: HarborConfig) -> dict[str, Any]:
    """The sandbox limits `task.toml` gives (`Limits` fields, for `docker_backend(**...)`).

    Memory and cpus as the file says (Harbor's defaults where unset: 2 GB, 1 cpu); set-up and history
    commands (the oracle's replay) may run as long as the agent may, and an action as long as the tests.
    """
    return {
        "memory": f"{config.memory_mb or 2048}m",
        "cpus": float(config.cpus or 1.0),
        "pids": 4096,
        "replay_timeout": float(config.agent_timeout),
        "action_timeout": float(config.verifier_timeout),
        "compare_chars": 1024 * 1024,
    }


__all__ = ["HarborConfig", "container_limits", "harbor_limits", "is_harbor_task", "load_harbor_task", "read_task_toml"]
