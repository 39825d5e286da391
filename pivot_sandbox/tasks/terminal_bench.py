"""Terminal-Bench task folders: their images, built offline from their own Dockerfiles, and their tests.

A task folder holds `Dockerfile`, `task.yaml`, `solution.sh` or `solution.yaml`, `tests/` and, where
present, `run-tests.sh` and the files the Dockerfile copies. Its image is the Dockerfile run by
`_build.build` on a locally built base mapped to the name the Dockerfile asks for (`_bases.BASES`),
with build-time registry access (`images/access.py`), plus the tests' tools: a venv at `/opt/pivot-tests`
holding pytest and what `run-tests.sh` would have installed (the tests run with `--network none`,
so their dependencies are fetched at build time), which the build sets aside before the commit (a
tar on this machine, `harness.test_tools_tar`, by image id): the image holds none of it, as the
agent's machine in Terminal-Bench's runs did not (its harness installs them after the agent is
done; an agent's `ls -la /opt` diverged on the venv), and the test run gets it with the tests.
Images are tagged by a content hash of (Dockerfile, copied files, base image id, test plan, builder
version) and an LRU bound removes the oldest.

The tests and the solution never reach the image: a `COPY`/`ADD` of `tests/` or `solution.*` (a
task-design leak: blind-maze copies its tests to /app/tests) is left out of the build, and the
report says so (`BuildReport.dropped`); where a later step uses what it copied (`RUN chmod +x
/app/solution.sh`), it is copied for the build and removed before the image is committed (said
in `dropped` too; the builder commits once, so no layer of the image holds it). The tests' run
itself is `tasks/harness.py`; bases `images/bases.py`. A docker-compose task's other services, built
from its folder, are read by `tasks/compose.py` and built by `tasks/compose_images.py` (`BuildReport.services`).

Public API (used by `pivot sandbox build-task(s)`, synthesis, `task_tests` and episode envs):
    load_task(dir) -> Task                                         (TaskError names file and line)
    task_image(client, task, *, force=False, keep=24) -> BuildReport
        builds or reuses the image; status "built" | "cached" | "skipped" with the one reason;
        `workdir`/`user` are what a `SandboxSpec` of the task needs
    build_tasks(client, dirs, *, force=False, keep=24) -> Iterator[BuildReport]
    task_dirs(root, only=()) -> list[Path]
    ensure_bundled_image(client, "pivot-gym/task:<id>")  (the package's own tasks, by stable name)
An episode env runs a task as: `SandboxSpec(image=report.image, workdir=report.workdir, user="root",
shell="/bin/bash", replay_access=True)`, the agent's commands in a session, then `Session.run_tests`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import secrets
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from pivot_core import AliasBudgetExceeded, load_yaml
from pivot_sandbox.contract.equivalents import registry_equivalent
from pivot_sandbox.contract.services import ServiceSpec
from pivot_sandbox.contract.spec import LABEL, Json
from pivot_sandbox.errors import TaskError
from pivot_sandbox.images import dockerfile as df
from pivot_sandbox.images.access import build_access
from pivot_sandbox.images.build import build
from pivot_sandbox.images.context_tar import checkout_mode
from pivot_sandbox.images.stock import ensure_stock_image, image_exists
from pivot_sandbox.images.task_bases import prepare
from pivot_sandbox.tasks.compose import ComposeService, read_compose
from pivot_sandbox.tasks.compose_images import service_images
from pivot_sandbox.tasks.folders import TASK_REPO, bundled_task_dir
from pivot_sandbox.tasks.harness import TESTS_VENV, TestPlan, test_plan, test_tools_tar
from pivot_sandbox.tasks.oracle_files import without_oracle
from pivot_sandbox.tasks.tests_venv import sweep_test_tools, tools_kept, tools_steps

if TYPE_CHECKING:
    import docker

    from pivot_sandbox.tasks.harbor import HarborConfig

BUILDER_VERSION = "7"  # 3: tests/ and solution.* are never copied into the image; 4: files have git's modes;
# 5: the folder a left-out or withheld copy of tests/ creates stays, empty (the runs list it);
# 6: the tests' venv is set aside out of the image (`harness.test_tools_tar`), delivered with the tests;
# 7: the pytest plugins the build registered are listed in the venv (`harness.PLUGINS_FILE`)
MAX_TASK_IMAGES = 24


@dataclass(frozen=True)
class Task:
    """A Terminal-Bench task folder.

    Attributes:
        task_id: the folder name.
        dir: the folder.
        instruction: the base description of task.yaml.
        dockerfile: Dockerfile text ("" when absent).
        compose: why the task's docker-compose file cannot be built here, "" when there is none or when
            its `client` service is built from a folder of the task (then `context` is that folder) and
            each other service is built from a folder of the task too (`services`: `tasks/compose.py`).
        context: the build context (the task folder, or the compose service's `build.context`).
        agent_timeout: task.yaml `max_agent_timeout_sec`.
        tests: the test plan.
        meta: the rest of task.yaml (a Harbor task: its task.toml as read).
        harbor: a Harbor task's `task.toml` (`tasks/harbor.py`), None for a Terminal-Bench folder: its tests
            run as Harbor runs them (`tasks/harbor_verify.py`), with no test-tools venv in its image.
        services: a compose task's services beside the client, to build (`BuildReport.services`) and run.
    """

    task_id: str
    dir: Path
    instruction: str
    dockerfile: str
    compose: str
    context: Path
    agent_timeout: float
    tests: TestPlan
    meta: Mapping[str, Json] = field(default_factory=dict)
    harbor: HarborConfig | None = None
    services: tuple[ComposeService, ...] = ()


@dataclass(frozen=True)
class BuildReport:
    """One task's build: `status` "built", "cached" or "skipped", with the image or the reason."""

    task_id: str
    status: str
    image: str = ""
    reason: str = ""
    seconds: float = 0.0
    base: str = ""
    base_note: str = ""
    workdir: str = "/app"
    user: str = "root"
    dropped: str = ""  # the COPY/ADD steps of the tests or the solution: left out, or removed before the commit
    substitutions: str = ""  # Ubuntu apt pins dropped and names mapped; stages built, images served (uv)
    # a compose task's other services: `SandboxSpec(services=...)` of the task (`tasks/compose_images.py`)
    services: tuple[ServiceSpec, ...] = ()

    def to_json(self) -> dict[str, Json]:
        """JSON-ready dict (the `--json` report rows)."""
        out: dict[str, Json] = {k: v for k, v in self.__dict__.items() if v not in ("", None, ())}
        if self.services:
            out["services"] = [s.to_json() for s in self.services]
        return out


def _instruction(meta: Mapping[str, Json]) -> str:
    if meta.get("instruction"):
        return str(meta["instruction"])
    for d in meta.get("descriptions") or []:
        if d.get("key") == "base":
            return str(d.get("description", ""))
    return ""


def load_task(task_dir: Path | str) -> Task:
    """A task folder as a `Task`; a folder without task.yaml or with a broken one raises `TaskError`."""
    task_dir = Path(task_dir)
    from pivot_sandbox.tasks.harbor import is_harbor_task, load_harbor_task  # it builds on `Task`

    if is_harbor_task(task_dir):
        return load_harbor_task(task_dir)
    meta_path = task_dir / "task.yaml"
    if not meta_path.is_file():
        raise TaskError(f"{task_dir}: no task.yaml (not a Terminal-Bench task folder)")
    try:
        meta = load_yaml(meta_path.read_text()) or {}
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{meta_path}:{mark.line + 1}" if mark else str(meta_path)
        raise TaskError(f"{where}: task.yaml is not valid YAML: {e}") from e
    except AliasBudgetExceeded as e:
        raise TaskError(f"{meta_path}: {e}") from e
    compose = read_compose(task_dir)
    context, dockerfile = compose.context, compose.dockerfile
    timeout = float(meta.get("max_test_timeout_sec") or 60.0)
    return Task(
        task_id=task_dir.name,
        dir=task_dir,
        instruction=_instruction(meta),
        dockerfile=dockerfile.read_text(errors="replace") if dockerfile.is_file() else "",
        compose=compose.problem,
        context=context,
        agent_timeout=float(meta.get("max_agent_timeout_sec") or 600.0),
        tests=test_plan(task_dir, timeout),
        meta=meta,
        services=compose.services,
    )


def compose_build(task_dir: Path) -> tuple[Path, Path, str]:
    """(build context, Dockerfile, problem) of a task's main image (`tasks/compose.py` reads the compose file)."""
    compose = read_compose(task_dir)
    return compose.context, compose.dockerfile, compose.problem


def script_hosts(task: Task, instructions: Sequence[df.Instruction], allowed: frozenset[str]) -> list[tuple[str, str]]:
    """(file, host) for copied files that a RUN step names and that fetch from a host beyond the registries."""
    run_text = " ".join(i.args for i in instructions if i.keyword == "RUN")
    found = []
    for path in df.context_files(instructions, task.context):
        if path.name in run_text and path.stat().st_size < 1_000_000:
            text = _without_heredocs(registry_equivalent(path.read_text(errors="replace")))  # what the build copies
            for host in df.hosts_in(text, allowed) + df.implicit_hosts(text):
                found.append((path.relative_to(task.context.resolve()).as_posix(), host))
    return found


def equivalent_instruction(ins: df.Instruction) -> df.Instruction:
    """A RUN step with its fetches from outside the registries replaced by the registry's package."""
    if ins.keyword != "RUN":
        return ins
    return dataclasses.replace(
        ins, args=registry_equivalent(ins.args), heredocs=tuple(registry_equivalent(h) for h in ins.heredocs)
    )


def _without_heredocs(script: str) -> str:
    """A script without its here-document bodies: files it writes (a workflow naming a URL) fetch nothing.

    Should such a file be run later and fetch after all, the build step fails and says so.
    """
    out, end = [], None
    for line in script.splitlines():
        if end is not None:
            end = None if line.strip() == end else end
            continue
        out.append(line)
        m = re.search(r"(?<!<)<<-?\s*[\"']?([A-Za-z_][A-Za-z0-9_]*)[\"']?", line)
        end = m.group(1) if m else None
    return "\n".join(out)


def content_hash(task: Task, instructions: Sequence[df.Instruction], base_id: str) -> str:
    """Hash of (Dockerfile, every file it copies, base image id, test plan, builder version)."""
    h = hashlib.sha256()
    h.update(json.dumps([BUILDER_VERSION, task.dockerfile, base_id, task.tests.pip, task.tests.apt]).encode())
    for path in df.context_files(instructions, task.context):
        h.update(path.relative_to(task.context.resolve()).as_posix().encode() + b"\0")
        h.update(str(checkout_mode(path.stat().st_mode) & 0o777).encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def _skip(task: Task, reason: str, started: float, base: str = "") -> BuildReport:
    return BuildReport(task.task_id, "skipped", reason=reason, seconds=time.monotonic() - started, base=base)


def _unbuildable(task: Task) -> str:
    """Why the task folder holds no image to build ("" when it does)."""
    if task.compose:
        return task.compose
    if not task.dockerfile and task.meta.get("env_name"):
        return (
            f"task.yaml names the shared environment {task.meta['env_name']!r} (Terminal-Bench's "
            "shared/environments/, which the task folder does not hold) and the folder has no Dockerfile"
        )
    if not task.dockerfile:
        return "no Dockerfile in the task folder"
    return ""


def task_image(
    client: docker.DockerClient, task: Task, *, force: bool = False, keep: int = MAX_TASK_IMAGES
) -> BuildReport:
    """Build the task's image (or reuse it by content hash); a task that cannot build says why in `reason`.

    A compose task's other services are built too (`tasks/compose_images.py`), each reused by its own
    hash: `services` in the report, for the task's `SandboxSpec`; one that cannot build skips the task.
    """
    started = time.monotonic()
    report = _main_image(client, task, force=force, keep=keep)
    if report.status == "skipped" or not task.services:
        return report
    touch = lambda tag: _touch(client, tag)  # noqa: E731 - the LRU stamp of each service's image
    services, problem = service_images(client, task.task_id, task.dir, task.services, force=force, touch=touch)
    if problem:
        return _skip(task, problem, started, report.base)
    evict(client, max(keep, 1 + len(services)))  # never the images of the task just built
    return dataclasses.replace(report, services=services, seconds=time.monotonic() - started)


def _main_image(client: docker.DockerClient, task: Task, *, force: bool, keep: int) -> BuildReport:
    """The task's own image (the client's, for a compose task): built, reused by content hash, or skipped."""
    started = time.monotonic()
    unbuildable = _unbuildable(task)
    if unbuildable:
        return _skip(task, unbuildable, started)
    try:
        # stages planned (a COPY --from an image no registry serves refused) before any base is built
        plan = prepare(client, df.parse(task.dockerfile, str(task.context / "Dockerfile")))
        base, note = plan.base, plan.note
        access = build_access(client.images.get(base).labels.get(f"{LABEL}.suite", "trixie"))
        tools, tools_after = _tools_instructions(task)
        instructions = [equivalent_instruction(i) for i in plan.instructions]
        instructions, withheld, dropped = without_oracle(task.dir, task.context, instructions)
        outside = _outside_host(task, instructions, access.hosts)
        if outside:
            return _skip(task, outside, started, base)
        tag = f"{TASK_REPO}:{task.task_id}-{content_hash(task, instructions, plan.base_ids)[:16]}"
        if not force and image_exists(client, tag) and (not tools or tools_kept(client, tag)):
            return _cached(client, task, tag, started, base=base, note=note, dropped=dropped)
        labels = {f"{LABEL}.task": task.task_id, f"{LABEL}.suite": access_suite(client, base), **plan.labels}
        # the tests' tools first (after the last FROM): a Dockerfile may break the network or pip on purpose
        # (broken-networking, broken-python); the venv sees what the Dockerfile installs later all the same
        last = max(n for n, i in enumerate(instructions) if i.keyword == "FROM") + 1
        steps = instructions[:last] + tools + instructions[last:] + tools_after
        options = {"labels": labels, "rewrite": registry_equivalent, "withheld": withheld}
        # the tests' venv is set aside, out of the image: delivered with the tests (`verification.run_task_tests`)
        building = test_tools_tar("").with_name(f".building-{os.getpid()}-{secrets.token_hex(4)}.tar")
        options["set_aside"] = (TESTS_VENV, building) if tools else None
        result = build(client, steps, task.context, base, tag, access, **options, stage_base=plan.stage_base)
        if result.set_aside is not None:
            result.set_aside.replace(test_tools_tar(result.image_id))
    except (df.DockerfileError, TaskError) as e:
        return _skip(task, str(e), started)
    _touch(client, tag)
    evict(client, keep)
    return BuildReport(
        task.task_id,
        "built",
        tag,
        seconds=result.seconds,
        base=base,
        base_note=note,
        workdir=result.workdir,
        dropped=dropped,
        user=result.user or "root",
        substitutions="; ".join([*plan.notes, *result.copied_from]),
    )


def _tools_instructions(task: Task) -> tuple[list[df.Instruction], list[df.Instruction]]:
    """The test tools' steps before and after the Dockerfile's own.

    None for a Harbor task: its test tools are a layer of their own, delivered with its tests (`harbor_layer.py`).
    """
    tools_in_image = not task.tests.problem and task.harbor is None
    before, after = tools_steps(task.tests) if tools_in_image else ("", "")
    return df.parse(before, "<test tools>", fragment=True), df.parse(after, "<test tools>", fragment=True)


def _outside_host(task: Task, instructions: Sequence[df.Instruction], hosts: frozenset[str]) -> str:
    """Why the build would reach a host outside the registries (a step or a script it runs), else ""."""
    foreign = df.foreign_hosts(instructions, hosts)
    if foreign:
        host, ins = foreign[0]
        return f"{ins.where}: needs {host}, outside the registries"
    for path, host in script_hosts(task, instructions, hosts):
        return f"{path}: needs {host} (run by the Dockerfile), outside the registries"
    return ""


def _cached(
    client: docker.DockerClient, task: Task, tag: str, started: float, *, base: str, note: str, dropped: str
) -> BuildReport:
    """The report of a task image built before (by content hash): its working directory and user from its config."""
    cfg = client.images.get(tag).attrs.get("Config") or {}
    _touch(client, tag)
    labels = cfg.get("Labels") or {}
    made = [n for key in ("apt", "copied-from") for n in json.loads(labels.get(f"{LABEL}.{key}") or "[]")]
    return BuildReport(
        task.task_id,
        "cached",
        tag,
        seconds=time.monotonic() - started,
        base=base,
        base_note=note,
        workdir=cfg.get("WorkingDir") or "/",
        user=cfg.get("User") or "root",
        dropped=dropped,
        substitutions="; ".join(made),
    )


def access_suite(client: docker.DockerClient, image: str) -> str:
    """The Debian suite an image was built from (its label), for the apt sources of its build."""
    return client.images.get(image).labels.get(f"{LABEL}.suite", "trixie")


def _stamp(tag: str) -> Path:
    """The file whose mtime is the last use of a task image, shared by every process of this machine."""
    from pivot_core import cache_dir

    return cache_dir("task-images", re.sub(r"[^A-Za-z0-9._-]", "_", tag))


def _touch(client: docker.DockerClient, tag: str) -> None:
    try:
        path = _stamp(tag)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    except OSError:
        pass  # an unwritable cache: the image's creation time stands in for its last use


def evict(client: docker.DockerClient, keep: int) -> list[str]:
    """Remove the least recently used task images past `keep` (use: built or reused by any process, else created)."""
    # one listing call: `client.images.list` inspects each image after listing, and an image that another
    # process evicted in between raised ImageNotFound here (two builds at once: a benchmark and the tests)
    rows = client.api.images(filters={"label": f"{LABEL}=task"})
    tagged = [(t, row) for row in rows for t in row.get("RepoTags") or () if t.startswith(TASK_REPO + ":")]

    def last_used(item: tuple[str, dict[str, Json]]) -> float:
        tag, row = item
        stamp = _stamp(tag)
        return stamp.stat().st_mtime if stamp.is_file() else float(row.get("Created") or 0)

    removed = []
    for tag, _img in sorted(tagged, key=last_used, reverse=True)[keep:]:
        try:
            client.images.remove(tag, force=True)
            removed.append(tag)
        except Exception:  # noqa: BLE001 - an image in use stays; the next eviction retries
            pass
    sweep_test_tools(client)
    return removed


def build_tasks(
    client: docker.DockerClient, dirs: Sequence[Path], *, force: bool = False, keep: int = MAX_TASK_IMAGES
) -> Iterator[BuildReport]:
    """Build every task folder in turn; one report per task (a broken folder is a skip with its reason)."""
    for task_dir in dirs:
        try:
            task = load_task(task_dir)
        except TaskError as e:
            yield BuildReport(Path(task_dir).name, "skipped", reason=str(e))
            continue
        yield task_image(client, task, force=force, keep=max(keep, 1))


def task_dirs(root: Path, only: Sequence[str] = ()) -> list[Path]:
    """Task folders under `root` (a task.yaml, or a Harbor task.toml), optionally only the named ones."""
    dirs = sorted(p for p in Path(root).iterdir() if (p / "task.yaml").is_file() or (p / "task.toml").is_file())
    if only:
        wanted = set(only)
        missing = wanted - {p.name for p in dirs}
        if missing:
            raise TaskError(f"{root}: no task folder named {', '.join(sorted(missing))}")
        dirs = [p for p in dirs if p.name in wanted]
    return dirs


def ensure_bundled_image(client: docker.DockerClient, tag: str) -> str:
    """Build a bundled task's image (by content hash) and tag it with its stable name `tag`."""
    folder = bundled_task_dir(tag)
    if folder is None:
        raise TaskError(f"{tag!r} names no bundled task")
    report = task_image(client, load_task(folder))
    if report.status == "skipped":
        raise TaskError(f"bundled task {folder.name}: {report.reason}")
    repo, _, name = tag.partition(":")
    client.images.get(report.image).tag(repo, name)
    return tag


def ensure_image(client: docker.DockerClient, tag: str) -> None:
    """The backends' image resolver (`ImageResolver`): bundled task images built on demand, others as stock ones.

    A bundled task's pivots name `pivot-gym/task:<task id>` (the content-hash tag depends on this
    machine's base images); it is built from the package's copy of the task folder the first time,
    and checked against its content hash once per process: a stable name an older builder tagged
    (its image holding the tests' venv, or another test plan) moves to the current build.
    """
    if bundled_task_dir(tag) is not None:
        # the check is once per process, the image's presence every time: another process (or an
        # eviction) may have removed the stable name since
        if tag not in _CURRENT_BUNDLED or not image_exists(client, tag):
            ensure_bundled_image(client, tag)
            _CURRENT_BUNDLED.add(tag)
        return
    ensure_stock_image(client, tag)


_CURRENT_BUNDLED: set[str] = set()  # the bundled stable names this process has checked (`ensure_image`)
