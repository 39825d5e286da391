"""Terminal-Bench task folders: their images, built offline from their own Dockerfiles, and their tests.

A task folder holds `Dockerfile`, `task.yaml`, `solution.sh` or `solution.yaml`, `tests/` and, where
present, `run-tests.sh` and the files the Dockerfile copies. Its image is the Dockerfile run by
`_dockerfile.build` on a locally built base mapped to the name the Dockerfile asks for (`BASES`),
with build-time registry access (`_access.py`), plus a test-tools layer: a venv at `/opt/pivot-tests`
holding pytest and what `run-tests.sh` would have installed (the tests run with `--network none`,
so their dependencies are fetched at build time). Images are tagged by a content hash of (Dockerfile,
copied files, base image id, test plan, builder version) and an LRU bound removes the oldest.

Public API (used by `pivot sandbox build-task(s)`, synthesis, `task_tests` and episode envs):
    load_task(dir) -> Task                                         (TaskError names file and line)
    task_image(client, task, *, force=False, keep=24) -> BuildReport
        builds or reuses the image; status "built" | "cached" | "skipped" with the one reason;
        `workdir`/`user` are what a `SandboxSpec` of the task needs
    build_tasks(client, dirs, *, force=False, keep=24) -> Iterator[BuildReport]
    task_dirs(root, only=()) -> list[Path]
    test_commands(task, nonce, workdir) -> list[str]   (deliver the tests after an action, run them)
    test_outcome(stdout, nonce) -> TestOutcome          (passed / ran / counts / reason)
    ensure_base(client, name) -> (local tag, note)      (a FROM name -> the local stand-in)
    ensure_bundled_image(client, "pivot-gym/task:<id>")  (the package's own tasks, by stable name)
An episode env runs a task as: `SandboxSpec(image=report.image, workdir=report.workdir, user="root",
shell="/bin/bash", replay_access=True)`, the agent's commands through the sandbox backend, then
`test_commands` + `test_outcome` (or `task_tests.run_tests`) for the outcome.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import io
import json
import re
import shlex
import tarfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pivot_sandbox import _dockerfile as df
from pivot_sandbox._access import build_access
from pivot_sandbox._equivalents import registry_equivalent
from pivot_sandbox._images import ROOTS, build_root_image, image_exists
from pivot_sandbox._spec import LABEL
from pivot_sandbox.errors import TaskError

BUILDER_VERSION = "2"
TASK_REPO = "pivot-gym/task"
TESTS_VENV = "/opt/pivot-tests"
TESTS_DIR = "/tests"
MAX_TASK_IMAGES = 24
TEST_LOG_TAIL = 200_000  # bytes of a test run's output kept: its end holds pytest's summary
CHUNK = 60_000  # bytes of base64 per delivery command: one argv string stays far below the kernel's 128 KiB


@dataclass(frozen=True)
class Base:
    """A locally built stand-in for a base image a Dockerfile names.

    Attributes:
        tag: the local image tag.
        root: the debootstrapped root it derives from (`_images.ROOTS`).
        workdir: the working directory the original image sets.
        managed: keep Debian's EXTERNALLY-MANAGED marker (Ubuntu keeps it; python.org images have none).
        note: how it differs from the original.
    """

    tag: str
    root: str
    workdir: str
    managed: bool
    note: str


# Matched on the image's path, never on a registry host name.
BASES: tuple[tuple[re.Pattern[str], Base], ...] = (
    (
        re.compile(r"(^|/)t-bench/python-3-13(:[\w.-]+)?$"),
        Base(
            "pivot-gym/base:t-bench-python-3-13",
            "pivot-gym/root:trixie",
            "/app",
            False,
            "Python 3.13 from Debian trixie's packages (in /usr/lib; pip installs to /usr/local), not python.org's",
        ),
    ),
    (
        re.compile(r"(^|/)t-bench/ubuntu-24-04(:[\w.-]+)?$"),
        Base(
            "pivot-gym/base:t-bench-ubuntu-24-04",
            "pivot-gym/root:trixie",
            "/app",
            True,
            "Debian trixie, not Ubuntu 24.04: same apt-get, Debian's packages (Python 3.13 not 3.12, glibc 2.41)",
        ),
    ),
    (
        # pins made for 3.8/3.9 (pandas 1.3, numpy 1.21) have wheels for 3.9, none for bookworm's 3.11
        re.compile(r"^python:3\.[89](\.\d+)?-slim(-bookworm|-bullseye)?$"),
        Base(
            "pivot-gym/base:python-3-slim-bullseye",
            "pivot-gym/root:bullseye",
            "/",
            False,
            "bullseye's Python 3.9 under the name asked for (the minor version differs unless 3.9 was asked; "
            "Debian bullseye, not bookworm)",
        ),
    ),
    (
        re.compile(r"^python:3\.\d+(\.\d+)?-slim(-bookworm)?$"),
        Base(
            "pivot-gym/base:python-3-slim-bookworm",
            "pivot-gym/root:bookworm",
            "/",
            False,
            "bookworm's Python 3.11 under the name asked for (the minor version differs unless 3.11 was asked)",
        ),
    ),
    (
        re.compile(r"^debian:bullseye(-slim)?$"),
        Base("pivot-gym/base:debian-bullseye", "pivot-gym/root:bullseye", "/", True, "Debian bullseye minbase"),
    ),
    (
        re.compile(r"^ubuntu:(22\.04|24\.04|latest)$"),
        Base("pivot-gym/base:ubuntu", "pivot-gym/root:trixie", "/", True, "Debian trixie, not Ubuntu"),
    ),
)


@dataclass(frozen=True)
class TestPlan:
    """How a task's tests run: what is installed at build time and the script run afterwards.

    Attributes:
        pip: packages installed into the tests venv at build time (pytest and run-tests.sh's own).
        apt: Debian packages run-tests.sh installs (installed into the image at build time).
        script: the test script, with its installation lines removed, run with `TEST_DIR=/tests`.
        timeout: seconds the tests may run (task.yaml `max_test_timeout_sec`).
        problem: why the tests cannot run here, "" when they can.
    """

    pip: tuple[str, ...]
    apt: tuple[str, ...]
    script: str
    timeout: float
    problem: str = ""


@dataclass(frozen=True)
class Task:
    """A Terminal-Bench task folder.

    Attributes:
        task_id: the folder name.
        dir: the folder.
        instruction: the base description of task.yaml.
        dockerfile: Dockerfile text ("" when absent).
        compose: why the task's docker-compose file cannot be built here, "" when there is none or when
            it is one `client` service built from a folder of the task (then `context` is that folder).
        context: the build context (the task folder, or the compose service's `build.context`).
        agent_timeout: task.yaml `max_agent_timeout_sec`.
        tests: the test plan.
        meta: the rest of task.yaml.
    """

    task_id: str
    dir: Path
    instruction: str
    dockerfile: str
    compose: str
    context: Path
    agent_timeout: float
    tests: TestPlan
    meta: Mapping[str, Any] = field(default_factory=dict)


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

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (the `--json` report rows)."""
        return {k: v for k, v in self.__dict__.items() if v not in ("", None)}


def _instruction(meta: Mapping[str, Any]) -> str:
    if meta.get("instruction"):
        return str(meta["instruction"])
    for d in meta.get("descriptions") or []:
        if d.get("key") == "base":
            return str(d.get("description", ""))
    return ""


_PIP = re.compile(r"^\s*(?:python3?\s+-m\s+)?(?:pip3?|uv\s+pip)\s+install\s+(.*)$")
_UV_ADD = re.compile(r"^\s*uv\s+add\s+(.*)$")
_APT = re.compile(r"^\s*(?:apt-get|apt)\s+(?:update|install)\b")


def test_plan(task_dir: Path, timeout: float, hosts: frozenset[str] | None = None) -> TestPlan:
    """Read run-tests.sh (or Terminal-Bench's default uv + pytest harness) into a `TestPlan`."""
    path = task_dir / "run-tests.sh"
    if not (task_dir / "tests").is_dir():
        return TestPlan((), (), "", timeout, "the task has no tests/ folder")
    if not path.is_file():
        script = f"cd {{workdir}} && pytest {TESTS_DIR}/test_outputs.py -rA"
        return TestPlan(("pytest",), (), script, timeout)
    pip, apt, kept = ["pytest"], [], []
    problem = ""
    for line in path.read_text(errors="replace").replace("\\\n", " ").splitlines():
        stripped = line.strip()
        if m := (_PIP.match(stripped) or _UV_ADD.match(stripped)):
            try:
                words = shlex.split(m.group(1).split(" #")[0])
            except ValueError:  # an unbalanced quote: plain words are close enough for package names
                words = m.group(1).split()
            for i, w in enumerate(words):
                if w in ("--index-url", "-i", "--extra-index-url") and i + 1 < len(words):
                    host = re.sub(r"^\w+://([^/]+).*$", r"\1", words[i + 1])
                    if hosts is not None and host not in hosts:
                        problem = f"run-tests.sh installs from {host}, outside the registries: {stripped[:80]!r}"
            pip += [w for i, w in enumerate(words) if not w.startswith("-") and not words[i - 1].startswith("--")]
        elif _APT.match(stripped):
            if "install" in stripped:
                apt += [w for w in stripped.split("install", 1)[1].split() if not w.startswith("-") and w != "&&"]
        elif "setup-uv-pytest.sh" in stripped:
            continue
        elif "run-uv-pytest.sh" in stripped:
            kept.append(f"pytest {TESTS_DIR}/test_outputs.py -rA")
        else:
            kept.append(re.sub(r"\bpython3?\s+-m\s+pytest\b", "pytest", line))
    return TestPlan(tuple(dict.fromkeys(pip)), tuple(dict.fromkeys(apt)), "\n".join(kept), timeout, problem)


def load_task(task_dir: Path | str) -> Task:
    """A task folder as a `Task`; a folder without task.yaml or with a broken one raises `TaskError`."""
    task_dir = Path(task_dir)
    meta_path = task_dir / "task.yaml"
    if not meta_path.is_file():
        raise TaskError(f"{task_dir}: no task.yaml (not a Terminal-Bench task folder)")
    try:
        meta = yaml.safe_load(meta_path.read_text()) or {}
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{meta_path}:{mark.line + 1}" if mark else str(meta_path)
        raise TaskError(f"{where}: task.yaml is not valid YAML: {e}") from e
    context, dockerfile, compose = compose_build(task_dir)
    timeout = float(meta.get("max_test_timeout_sec") or 60.0)
    return Task(
        task_id=task_dir.name,
        dir=task_dir,
        instruction=_instruction(meta),
        dockerfile=dockerfile.read_text(errors="replace") if dockerfile.is_file() else "",
        compose=compose,
        context=context,
        agent_timeout=float(meta.get("max_agent_timeout_sec") or 600.0),
        tests=test_plan(task_dir, timeout),
        meta=meta,
    )


def compose_build(task_dir: Path) -> tuple[Path, Path, str]:
    """(build context, Dockerfile, problem) of a task; a docker-compose file with one built service is read.

    Terminal-Bench's compose files run the agent in a `client` service built from a folder of the task;
    its volumes, logs path and DNS settings are the harness's and are not needed here. Other services
    (images pulled from a registry) cannot be started offline: that is the problem.
    """
    path = next((task_dir / n for n in ("docker-compose.yaml", "docker-compose.yml") if (task_dir / n).is_file()), None)
    if path is None:
        return task_dir, task_dir / "Dockerfile", ""
    try:
        services = (yaml.safe_load(path.read_text()) or {}).get("services") or {}
    except yaml.YAMLError as e:
        return task_dir, task_dir / "Dockerfile", f"{path}: not valid YAML: {e}"
    others = {k: v for k, v in services.items() if k != "client"}
    if others:
        name, service = next(iter(others.items()))
        image = (service or {}).get("image", "?")
        return (
            task_dir,
            task_dir / "Dockerfile",
            (f"{path}: {len(services)} services; {name!r} runs image {image!r}, which no registry here serves"),
        )
    build = (services.get("client") or {}).get("build") or {}
    if isinstance(build, str):
        build = {"context": build}
    raw = str(build.get("context") or ".").replace("${T_BENCH_TASK_BUILD_CONTEXT_DIR}", ".")
    context = (task_dir / raw).resolve()
    if task_dir.resolve() not in (context, *context.parents):
        return task_dir, task_dir / "Dockerfile", f"{path}: build context {raw!r} lies outside the task folder"
    return context, context / str(build.get("dockerfile") or "Dockerfile"), ""


def map_base(name: str) -> Base | None:
    """The local stand-in for the image a FROM names, None when there is none."""
    for pattern, base in BASES:
        if pattern.search(name.strip()):
            return base
    return None


def ensure_base(client: Any, name: str) -> tuple[str, str]:
    """(local tag, note) of the base a FROM names, building its root and itself when missing."""
    base = map_base(name)
    if base is None:
        raise TaskError(f"base image {name!r} has no local equivalent (no registry is reachable)")
    steps = [] if base.managed else ["RUN rm -f /usr/lib/python3*/EXTERNALLY-MANAGED", PIP_OWNS_PYTHON_PACKAGES]
    text = "\n".join([f"FROM {base.root}", *steps, f"WORKDIR {base.workdir}"]) + "\n"
    # a base built by an older recipe is rebuilt (its id changes, so the task images on it rebuild once)
    recipe = hashlib.sha256(text.encode()).hexdigest()[:16]
    if image_exists(client, base.tag) and client.images.get(base.tag).labels.get(f"{LABEL}.recipe") == recipe:
        return base.tag, base.note
    build_root_image(client, base.root)
    suite = ROOTS[base.root][0]
    instructions = df.parse(text, f"<base {base.tag}>")
    access = None if base.managed else build_access(suite)
    labels = {f"{LABEL}.suite": suite, f"{LABEL}.recipe": recipe}
    df.build(client, instructions, Path("/nonexistent"), base.root, base.tag, access, labels=labels)
    return base.tag, base.note


# python.org images (python:3.x-slim, t-bench's python-3-13) have pip, and every Python package, owned by
# pip in /usr/local. Debian's Python sees the packages Debian installed (pip, setuptools, wheel, packaging,
# asciinema, ...) in /usr/lib/python3/dist-packages, and pip cannot upgrade those ("installed by debian":
# `pip install transformers torch` failed on setuptools). So the base gets a pip-owned copy of each, at
# the same version, in /usr/local (first on sys.path: an upgrade replaces that copy), and python.org's
# `site-packages` path as a link to Debian's `dist-packages` (a Dockerfile that edits
# /usr/local/lib/python3.X/site-packages edits what Python imports). A release PyPI does not have stays
# Debian's (the build log says which).
PIP_OWNS_PYTHON_PACKAGES = (
    "RUN set -e; d=$(python3 -c 'import sys; print(\"/usr/local/lib/python%d.%d\" % sys.version_info[:2])');"
    ' mkdir -p "$d/dist-packages"; [ -e "$d/site-packages" ] || ln -s dist-packages "$d/site-packages";'
    " python3 -m pip list --path /usr/lib/python3/dist-packages --format freeze 2>/dev/null > /tmp/debian.txt;"
    " python3 -m pip install -q --no-cache-dir --no-deps --ignore-installed -r /tmp/debian.txt"
    ' || while read -r req; do python3 -m pip install -q --no-cache-dir --no-deps --ignore-installed "$req"'
    ' || echo "pivot-gym: $req stays Debian\x27s"; done < /tmp/debian.txt; rm -f /tmp/debian.txt'
)


def _tools_steps(plan: TestPlan) -> tuple[str, str]:
    """Dockerfile text of the test-tools layer (run as root, with build access): (before, after) the task's steps.

    The venv with pytest (and run-tests.sh's apt packages) comes before the Dockerfile's own steps, which
    may break the network or pip on purpose (broken-networking, broken-python). The rest of run-tests.sh's
    packages comes after them: the venv sees the image's own packages, so a torch the Dockerfile installed
    is not installed a second time (several GB).
    """
    lines = []
    if plan.apt:
        lines.append(
            "RUN --user=0 apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "
            + " ".join(shlex.quote(p) for p in plan.apt)
        )
    pip = f"{TESTS_VENV}/bin/python -m pip install -q --disable-pip-version-check"
    first = [p for p in plan.pip if re.match(r"pytest\b", p)] or ["pytest"]
    rest = [p for p in plan.pip if p not in first]
    lines.append(
        f"RUN --user=0 python3 -m venv --system-site-packages {TESTS_VENV}"
        f" && {pip} {' '.join(shlex.quote(p) for p in first)}"
    )
    after = f"RUN --user=0 {pip} {' '.join(shlex.quote(p) for p in rest)}\n" if rest else ""
    return "\n".join(lines) + "\n", after


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
        h.update(str(path.stat().st_mode & 0o777).encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def _skip(task: Task, reason: str, started: float, base: str = "") -> BuildReport:
    return BuildReport(task.task_id, "skipped", reason=reason, seconds=time.monotonic() - started, base=base)


def task_image(client: Any, task: Task, *, force: bool = False, keep: int = MAX_TASK_IMAGES) -> BuildReport:
    """Build the task's image (or reuse it by content hash); a task that cannot build says why in `reason`."""
    started = time.monotonic()
    if task.compose:
        return _skip(task, task.compose, started)
    if not task.dockerfile and task.meta.get("env_name"):
        return _skip(
            task,
            f"task.yaml names the shared environment {task.meta['env_name']!r} (Terminal-Bench's "
            "shared/environments/, which the task folder does not hold) and the folder has no Dockerfile",
            started,
        )
    if not task.dockerfile:
        return _skip(task, "no Dockerfile in the task folder", started)
    try:
        instructions = df.parse(task.dockerfile, str(task.context / "Dockerfile"))
        frm = next(i for i in instructions if i.keyword == "FROM")
        base_name = frm.args.split()[0]
        base, note = ensure_base(client, base_name)
        access = build_access(client.images.get(base).labels.get(f"{LABEL}.suite", "trixie"))
        before, after = _tools_steps(task.tests) if not task.tests.problem else ("", "")
        tools = df.parse(before, "<test tools>", fragment=True)
        tools_after = df.parse(after, "<test tools>", fragment=True)
        instructions = [equivalent_instruction(i) for i in instructions]
        foreign = df.foreign_hosts(instructions, access.hosts)
        if foreign:
            host, ins = foreign[0]
            return _skip(task, f"{ins.where}: needs {host}, outside the registries", started, base)
        for path, host in script_hosts(task, instructions, access.hosts):
            return _skip(task, f"{path}: needs {host} (run by the Dockerfile), outside the registries", started, base)
        base_id = client.images.get(base).id
        tag = f"{TASK_REPO}:{task.task_id}-{content_hash(task, instructions, base_id)[:16]}"
        if not force and image_exists(client, tag):
            cfg = client.images.get(tag).attrs.get("Config") or {}
            _touch(client, tag)
            return BuildReport(
                task.task_id,
                "cached",
                tag,
                seconds=time.monotonic() - started,
                base=base,
                base_note=note,
                workdir=cfg.get("WorkingDir") or "/",
                user=cfg.get("User") or "root",
            )
        labels = {f"{LABEL}.task": task.task_id, f"{LABEL}.suite": access_suite(client, base)}
        # the tests' tools first (FROM stays first): a Dockerfile may break the network or pip on purpose
        # (broken-networking, broken-python); the venv sees what the Dockerfile installs later all the same
        steps = instructions[:1] + tools + instructions[1:] + tools_after
        result = df.build(client, steps, task.context, base, tag, access, labels=labels, rewrite=registry_equivalent)
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
        user=result.user or "root",
    )


def access_suite(client: Any, image: str) -> str:
    """The Debian suite an image was built from (its label), for the apt sources of its build."""
    return client.images.get(image).labels.get(f"{LABEL}.suite", "trixie")


def _stamp(tag: str) -> Path:
    """The file whose mtime is the last use of a task image, shared by every process of this machine."""
    from pivot_core import cache_dir

    return cache_dir("task-images", re.sub(r"[^A-Za-z0-9._-]", "_", tag))


def _touch(client: Any, tag: str) -> None:
    try:
        path = _stamp(tag)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    except OSError:
        pass  # an unwritable cache: the image's creation time stands in for its last use


def evict(client: Any, keep: int) -> list[str]:
    """Remove the least recently used task images past `keep` (use: built or reused by any process, else created)."""
    # one listing call: `client.images.list` inspects each image after listing, and an image that another
    # process evicted in between raised ImageNotFound here (two builds at once: a benchmark and the tests)
    rows = client.api.images(filters={"label": f"{LABEL}=task"})
    tagged = [(t, row) for row in rows for t in row.get("RepoTags") or () if t.startswith(TASK_REPO + ":")]

    def last_used(item: tuple[str, Any]) -> float:
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
    return removed


def build_tasks(
    client: Any, dirs: Sequence[Path], *, force: bool = False, keep: int = MAX_TASK_IMAGES
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
    """Task folders under `root` (those with a task.yaml), optionally only the named ones."""
    dirs = sorted(p for p in Path(root).iterdir() if (p / "task.yaml").is_file())
    if only:
        wanted = set(only)
        missing = wanted - {p.name for p in dirs}
        if missing:
            raise TaskError(f"{root}: no task folder named {', '.join(sorted(missing))}")
        dirs = [p for p in dirs if p.name in wanted]
    return dirs


def bundled_task_dir(tag: str) -> Path | None:
    """The package's copy of the task a `pivot-gym/task:<task id>` tag names, None when it is not bundled."""
    from importlib import resources

    repo, _, name = tag.partition(":")
    if repo != TASK_REPO or not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", name):
        return None
    folder = Path(str(resources.files("pivot_core") / "data" / "terminal_tasks" / name))
    return folder if (folder / "task.yaml").is_file() else None


def ensure_bundled_image(client: Any, tag: str) -> str:
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


# -- tests ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TestOutcome:
    """The result of a test run: `passed` when every test passed (and at least one ran)."""

    passed: bool
    ran: bool
    counts: Mapping[str, int]
    reason: str


def _owned_by_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """A tests entry as `docker cp` leaves it for root: owned by root and writable by its owner.

    The task folder may be read-only (a shared data copy): tests that write beside themselves
    (`shutil.copytree(..., TEST_DIR + "/src")`) then failed, since the sandbox's root has no
    CAP_DAC_OVERRIDE to write into a mode-555 folder it owns no more than Terminal-Bench's root does.
    """
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    info.mode |= 0o200
    return info


def _tests_tar(task: Task) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(str(task.dir / "tests"), arcname=".", filter=_owned_by_root)
    return buf.getvalue()


def test_commands(task: Task, nonce: str, workdir: str) -> list[str]:
    """Commands that deliver the tests after the candidate has run, run them, and print `nonce` with the status.

    The tests arrive only now (a candidate cannot have edited them) and run from the venv built for
    them; the status line carries a nonce the candidate could not know.
    """
    if task.tests.problem:
        raise TaskError(task.tests.problem)
    payload = base64.b64encode(_tests_tar(task)).decode()
    stage = f"/tmp/.pivot-tests-{nonce}"
    commands = [f"rm -rf {TESTS_DIR} {stage} && mkdir -p {TESTS_DIR}"]
    for i in range(0, len(payload), CHUNK):
        commands.append(f"printf '%s' '{payload[i : i + CHUNK]}' >> {stage}")
    script = task.tests.script.replace("{workdir}", workdir)
    commands.append(
        f"base64 -d {stage} | tar -xz -C {TESTS_DIR} && rm -f {stage}; "
        f"cd {shlex.quote(workdir)} 2>/dev/null; "
        # only the end of a long log (path-tracing prints its progress) is kept: the output cap would cut
        # pytest's summary and the status line; pipefail keeps the tests' own status
        f"set -o pipefail; TEST_DIR={TESTS_DIR} PATH={TESTS_VENV}/bin:$PATH bash -c {shlex.quote(script)} 2>&1"
        f" | tail -c {TEST_LOG_TAIL}; "
        f'st=$?; echo; echo "{nonce} $st"'
    )
    return commands


_SUMMARY = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED)\s", re.M)


def test_outcome(output: str, nonce: str) -> TestOutcome:
    """Read a test run's output: pytest's `-rA` summary lines and the nonce status line."""
    m = re.search(rf"^{re.escape(nonce)} (\d+)$", output, re.M)
    counts: dict[str, int] = {}
    for word in _SUMMARY.findall(output):
        counts[word] = counts.get(word, 0) + 1
    if m is None:
        return TestOutcome(False, False, counts, "the test run did not finish (no status line)")
    status = int(m.group(1))
    bad = counts.get("FAILED", 0) + counts.get("ERROR", 0)
    if status == 0 and counts.get("PASSED", 0) > 0 and bad == 0:
        return TestOutcome(True, True, counts, f"{counts['PASSED']} tests passed")
    if not counts:
        tail = output.strip().splitlines()[-3:]
        return TestOutcome(
            False, False, counts, f"tests exited {status} without a pytest summary: {' | '.join(tail)[:200]}"
        )
    return TestOutcome(False, True, counts, f"tests exited {status}: {json.dumps(counts, sort_keys=True)}")
