"""A task's own tests, run in a live sandbox session: the library half of the `task_tests` verifier.

`run_task_tests(session, task)` runs a task's tests as its harness runs them (Terminal-Bench's:
`tasks/harness.py`) in a session's sandbox: the state frozen first (`Session.freeze`: what the
agent left is stopped, what ran is started again), then, unless the agent changed the test run's own
tools (`tampered_tools`: the venv, the tests' folder, the interpreter, a shadowing copy of bash, sh,
env, tail or uv on its PATH, the dynamic loader's preload, pytest's configuration above the tests,
an installed pytest plugin), the tests are put in place through the engine (owned by root, whatever
the agent left at their path) and run with `run_argv` as the session's user in a fresh shell with
the image's environment; the status line carries a fresh nonce and must agree with the exit status
the runner reports. After the run, the tests' files and the tools are checked again.

`run_tests` plays commands in a fresh session then runs the tests; `oracle_check` runs them on the
initial state and after the oracle solution. Both take the backend (one with live sessions).
`task_dir_digest` is what a verdict on a task folder's tests is cached by.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from pivot_sandbox.contract.backend import SandboxBackend
from pivot_sandbox.contract.spec import Json, Limits, SandboxSpec
from pivot_sandbox.errors import SandboxError, TaskError
from pivot_sandbox.replay import box as ct
from pivot_sandbox.replay.action import changed_paths
from pivot_sandbox.replay.session import Session, open_session
from pivot_sandbox.tasks.folders import resolve_task_dir
from pivot_sandbox.tasks.harbor import container_limits
from pivot_sandbox.tasks.harness import (
    PLUGINS_FILE,
    SUSPECT_FILES,
    TESTS_DIR,
    TESTS_GRACE,
    TESTS_VENV,
    TestOutcome,
    new_nonce,
    run_argv,
    tampered_tools,
    test_outcome,
    test_tools_tar,
    tests_tar,
)
from pivot_sandbox.tasks.terminal_bench import Task, load_task

# Limits of a test run: the tests of a task need more than a candidate's 10 s and 256 MB.
# the outcome is read from the end of the output (pytest's summary, the status line): keep all of what the
# output cap lets through (a candidate's and the remaining expert commands' output comes first)
TEST_LIMITS = {"memory": "2g", "pids": 1024, "replay_timeout": 900.0, "compare_chars": 1024 * 1024}
MAX_TASK_FILES = 4096  # a task folder is a Dockerfile, tests and a solution: more is not a task folder
# the tamper check reads a whole run's changes, not one candidate's: an agent's install of a large package
# (torch, a conda env) changes tens of thousands of paths, and a check that stops at a candidate's cap
# scored such a run 0 without its tests (a resolved one included)
TAMPER_SCAN_PATHS, TAMPER_SCAN_SECONDS = 500_000, 120.0
_DIGESTS: dict[tuple[str, tuple[tuple[str, int, int], ...]], str] = {}
_DIGESTS_LOCK = threading.Lock()


def task_context(task: Task) -> dict[str, Json]:
    """A pivot's `context.task` for a task folder: its id, folder, test timeout, and its container limits if any."""
    out: dict[str, Json] = {"task_id": task.task_id, "dir": str(task.dir.resolve()), "test_timeout": task.tests.timeout}
    limits = container_limits(task.harbor) if task.harbor is not None else {}
    return {**out, "limits": limits} if limits else out


def task_limits(context: Mapping[str, Json]) -> dict[str, Json]:
    """The container limits of a pivot's task (`Limits` fields: `memory`, `cpus`); {} when it names none.

    A Harbor task's `task.toml` gives them (`[environment]` cpus, memory): the pivot carries them in
    `context.task.limits` (`harbor.container_limits`, written by `pivot synthesize` and `pivot convert
    --tasks-dir`); a pivot written before that key reads them from its task folder. The episode env and
    the `task_tests` verifier run the task's containers under them (`storage_mb` is carried, not enforced).

    Raises:
        SandboxError: a malformed `context.task.limits` (the key named), or a task folder that cannot be read.
    """
    task = context.get("task")
    if not isinstance(task, Mapping) or not task.get("dir"):
        return {}
    limits = task.get("limits")
    if limits is None:
        config = load_task(resolve_task_dir(str(task["dir"]))).harbor
        limits = container_limits(config) if config is not None else {}
    if not isinstance(limits, Mapping):
        raise SandboxError(f"context.task.limits: expected a table, got {type(limits).__name__} {limits!r}")
    memory, cpus = limits.get("memory"), limits.get("cpus")
    if memory is not None and not isinstance(memory, str):
        raise SandboxError(f"context.task.limits.memory: expected a size like '2048m', got {memory!r}")
    if cpus is not None and (isinstance(cpus, bool) or not isinstance(cpus, int | float) or cpus <= 0):
        raise SandboxError(f"context.task.limits.cpus: expected a number > 0, got {cpus!r}")
    return {k: v for k, v in (("memory", memory), ("cpus", None if cpus is None else float(cpus))) if v is not None}


def run_task_tests(session: Session, task: Task, timeout: float | None = None) -> TestOutcome:
    """The task's own tests in the session's sandbox; their `TestOutcome` (see the module docstring)."""
    if task.harbor is not None:  # Harbor's verifier: test.sh, its reward files (`harbor_verify.py`, built on this)
        from pivot_sandbox.tasks.harbor_verify import run_harbor_in_session

        return run_harbor_in_session(session, task, timeout).to_test_outcome()
    stopped = session.freeze()
    if stopped:
        return TestOutcome(False, False, {}, stopped)
    box, limits = session.live(), session.backend.limits
    tampered = _tampered_tools(box, limits, autoload=False)
    if tampered:
        return TestOutcome(False, False, {}, f"the agent changed the test run's own tools: {tampered}")
    problem, plugins = _deliver(session, box, task)
    if problem:
        return TestOutcome(False, False, {}, problem)
    delivered = _tests_files(box)
    nonce = new_nonce()
    raw = ct.run(
        box,
        run_argv(session.image_env(), task.tests, session.spec.workdir, nonce, plugins),
        user=session.spec.user,
        timeout=timeout or task.tests.timeout + TESTS_GRACE,
        output_cap=limits.output_cap,
        keep=True,  # the state's servers keep running for what the tests ask them
    )
    output = (raw.stdout + raw.stderr).decode(errors="replace")
    outcome = test_outcome(output, nonce, None if raw.killed else raw.exit_code)
    if raw.killed:
        return TestOutcome(False, outcome.ran, outcome.counts, f"stopped by the sandbox ({raw.killed})")
    # the delivered files only (tests may write beside themselves): unchanged since delivery, and
    # the task's own bytes (a process the agent left may have rewritten one before it was read)
    local, found, now = _local_digests(task.dir / "tests"), _tests_digests(box), _tests_files(box)
    if any(found.get(path) != digest or now.get(path) != delivered.get(path) for path, digest in local.items()):
        return TestOutcome(False, outcome.ran, outcome.counts, "the tests' own files changed while they ran")
    venv = {p: v for p, v in now.items() if p == TESTS_VENV or p.startswith(TESTS_VENV + "/")}
    if venv != {p: v for p, v in delivered.items() if p == TESTS_VENV or p.startswith(TESTS_VENV + "/")}:
        return TestOutcome(False, outcome.ran, outcome.counts, f"the tests' venv ({TESTS_VENV}) changed while they ran")
    tampered = _tampered_tools(box, limits, exclude_tests=True, autoload=False)
    if tampered:
        return TestOutcome(False, outcome.ran, outcome.counts, f"the test run's own tools changed: {tampered}")
    return outcome


def _deliver(session: Session, box: ct.Box, task: Task) -> tuple[str, list[str]]:
    """Put the tests at `TESTS_DIR` and their venv at `TESTS_VENV` through the engine, as root.

    Returns ("" or why not, the pytest plugins the image's build registered: `PLUGINS_FILE`, read
    from the venv just delivered). The venv is the one the build of the session's image set aside
    (`test_tools_tar`); its parent must be a folder of the image's, not a link the agent made (the
    venv would land where it points).
    """
    tools = test_tools_tar(session.backend.image_id(session.spec.image) or "")
    if not tools.is_file():
        why = f"the tests' venv of {session.spec.image} is not on this machine ({tools}): build the task's image again"
        return why, []
    parent = posixpath.dirname(TESTS_VENV)
    script = f"rm -rf -- {TESTS_DIR} {TESTS_VENV} && mkdir -p {parent} && test -d {parent} && ! test -L {parent}"
    raw = ct.run(box, ["/bin/sh", "-c", script], user="0", timeout=60, output_cap=64 * 1024, keep=True)
    if raw.exit_code != 0:
        return f"the agent changed the test run's own tools: {parent} is not a folder of the image's", []
    box.sandbox.put_archive("/", tests_tar(task.dir / "tests"))
    box.sandbox.put_archive(parent, tools.read_bytes())
    raw = ct.run(box, ["cat", "--", PLUGINS_FILE], user="0", timeout=30, output_cap=64 * 1024, keep=True)
    if raw.exit_code != 0:
        return f"the tests' venv holds no {PLUGINS_FILE}: build the task's image again", []
    return "", raw.stdout.decode(errors="replace").split()


def _tampered_tools(box: ct.Box, limits: Limits, exclude_tests: bool = False, autoload: bool = True) -> str:
    """The test run's own tools among what the agent changed, named ("" when none; `autoload`: `tampered_tools`)."""
    scan = replace(
        limits,
        max_changed_paths=max(limits.max_changed_paths, TAMPER_SCAN_PATHS),
        change_set_timeout=max(limits.change_set_timeout, TAMPER_SCAN_SECONDS),
    )
    changes, _, over = changed_paths(box, scan, time.monotonic() + scan.change_set_timeout)
    if over:
        return f"they could not be checked: {over}"
    if exclude_tests:  # delivered by the engine, compared by `_tests_files` and `_tests_digests`
        inside = (TESTS_DIR + "/", TESTS_VENV + "/")
        changes = [(p, k) for p, k in changes if p not in (TESTS_DIR, TESTS_VENV) and not p.startswith(inside)]
    present = [p for p, kind in changes if kind != 2 and SUSPECT_FILES.search(p)]
    suspects = {p: ct.read_text(box, p) for p in present[:100]}
    tampered = tampered_tools([p for p, _ in changes], suspects, autoload)
    return ", ".join(tampered[:3]) + (f" (+{len(tampered) - 3})" if len(tampered) > 3 else "")


def _tests_files(box: ct.Box) -> dict[str, str]:
    """Each file of the tests' folder and each entry of their venv: inode, size, change time, mode, owner.

    A rewrite, a rename or a new entry changes the listing (the change time is the kernel's to set).
    """
    listing = "%p\\t%i %s %C@ %m %U %l\\n"
    script = f"find {TESTS_DIR} -type f -printf '{listing}'; find {TESTS_VENV} -printf '{listing}'"
    raw = ct.run(box, ["/bin/sh", "-c", script], user="0", timeout=60, output_cap=32 << 20, keep=True)
    lines = raw.stdout.decode(errors="replace").splitlines()
    return dict(line.partition("\t")[::2] for line in lines)


def _tests_digests(box: ct.Box) -> dict[str, str]:
    """sha256 of each regular file in the tests' folder, by path (what a process the agent left may have rewritten)."""
    argv = ["find", TESTS_DIR, "-type", "f", "-exec", "sha256sum", "{}", "+"]
    raw = ct.run(box, argv, user="0", timeout=60, output_cap=4 << 20, keep=True)
    out = {}
    for line in raw.stdout.decode(errors="replace").splitlines():
        digest, _, path = line.partition("  ")
        out[path] = digest
    return out


def _local_digests(tests: Path) -> dict[str, str]:
    """sha256 of each file of a task's `tests/` folder as delivered at `TESTS_DIR` (`tests_tar`)."""
    return {
        f"{TESTS_DIR}/{f.relative_to(tests)}": hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(tests.rglob("*"))
        if f.is_file()
    }


def task_dir_digest(task_dir: Path) -> str | None:
    """SHA-256 of a task folder's files (names and bytes): the tests a verdict ran.

    Hashed again only when a file's name, size or modification time changed (one `stat` walk per
    call). None when the folder cannot be read or holds more than `MAX_TASK_FILES` files.
    """
    try:
        stats = []
        for root, dirs, files in os.walk(task_dir):
            dirs.sort()
            for name in sorted(files):
                path = Path(root, name)
                st = path.lstat()
                stats.append((str(path.relative_to(task_dir)), st.st_size, st.st_mtime_ns))
                if len(stats) > MAX_TASK_FILES:
                    return None
        key = (str(task_dir), tuple(stats))
        with _DIGESTS_LOCK:
            if key in _DIGESTS:
                return _DIGESTS[key]
        digest = hashlib.sha256()
        for rel, _, _ in stats:
            path = task_dir / rel
            digest.update(rel.encode("utf-8", "surrogateescape") + b"\0")
            digest.update(os.readlink(path).encode() if path.is_symlink() else path.read_bytes())
            digest.update(b"\0")
    except OSError:
        return None
    value = digest.hexdigest()
    with _DIGESTS_LOCK:
        if len(_DIGESTS) > 256:
            _DIGESTS.clear()
        _DIGESTS[key] = value
    return value


def run_tests(
    backend: SandboxBackend,
    task_dir: Path,
    spec: SandboxSpec,
    history: Sequence[str],
    commands: Sequence[str],
    timeout: float,
) -> TestOutcome:
    """Run `commands` at the state after `history` in a session of `backend`, then the task's tests.

    Raises:
        SandboxError: the state could not be built or the tests cannot run here (`TaskError`).
    """
    task = load_task(task_dir)
    if task.tests.problem:
        raise TaskError(task.tests.problem)
    session = open_session(backend, spec, list(history))
    try:
        deadline = time.monotonic() + timeout
        for command in commands:
            run = session.run(command, timeout=max(deadline - time.monotonic(), 0.001))
            if run.killed:
                return TestOutcome(False, False, {}, f"stopped by the sandbox ({run.killed})")
        # a fresh shell with the image's environment, the tests delivered now (`Session.run_tests`)
        return run_task_tests(session, task)
    finally:
        session.close()


def oracle_check(context: Mapping[str, Json], backend: Callable[..., SandboxBackend]) -> dict[str, bool | str | None]:
    """Tests on the initial state and after the whole oracle solution: `{before, after, reason}`.

    `backend(timeout, limits)` gives a backend with live sessions whose actions run up to `timeout`
    seconds, under the task's container limits (`task_limits`; `verification_backend`).

    `before`/`after` are True (pass), False (fail) or None (the tests could not run; `reason` says why).
    """
    spec = SandboxSpec.from_context(context)
    task = context.get("task") or {}
    if spec is None or not task.get("dir"):
        return {"before": None, "after": None, "reason": "no task context"}
    if truncated := context.get("truncated"):
        return {
            "before": None,
            "after": None,
            "reason": f"the oracle solution cannot run to its end here: {truncated.get('reason', '')}",
        }
    solution = [str(c) for c in task.get("solution") or []]
    task_dir = resolve_task_dir(str(task["dir"]))
    out: dict[str, bool | str | None] = {}
    try:
        limits = task_limits(context)
        # the solution is replayed as history (set-up, with registry access), not run as a candidate
        for name, history in (("before", []), ("after", solution)):
            outcome = run_tests(backend(60.0, limits), task_dir, spec, history, [], 60.0)
            out[name] = outcome.passed if outcome.ran or outcome.passed else None
            out[f"{name}_reason"] = outcome.reason
    except SandboxError as e:
        return {"before": out.get("before"), "after": None, "reason": str(e)}
    return out
