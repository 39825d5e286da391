"""`task_tests` acceptor: the Terminal-Bench task's own tests decide, run in a copy of the pivot state.

A pivot from `pivot synthesize terminal-bench --tasks-dir` carries `context.sandbox` (its task image,
replayed history) and `context.task` (the task folder, the expert's whole solution, the test timeout).
The candidate runs at the restored state, then:

- `continuation` (default): the expert's remaining solution commands, then the tests; the candidate is
  accepted when the task is still solved (a harmless variant passes, a command that breaks the task fails);
- `final`: the tests right after the candidate; only at the last pivot of the solution (elsewhere the
  verifier does not apply: the task is not expected to be solved yet).

The commands run in one live container (a sandbox session, as in a terminal); the tests then run there
as Terminal-Bench's harness runs them (`Session.run_tests`): a fresh shell with the image's own
environment (nothing the candidate exported: `BASH_ENV`, `PYTHONPATH`, `PYTEST_PLUGINS`), the tests copied
in only now, the venv the image build made for them (`TESTS_VENV`) and the interpreter checked unchanged
first, `--network none` like every candidate container; their status line carries a nonce the candidate
cannot know. A test run the sandbox stops, or whose tools the candidate changed, is a rejection; a sandbox
that fails is an error verdict.

Public API (also for episode envs): `TaskTests(mode=...)`, `run_tests(task_dir, spec, history, commands,
timeout)` -> `TestOutcome`, and `oracle_check(context)` -> dict (tests before and after the oracle solution).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pivot_core import Message, Pivot, action_commands, history_commands, history_typed
from pivot_sandbox import SandboxSpec, limits_of, needs_network, state_bound, tests_bound
from pivot_sandbox.errors import SandboxError
from verifiers_plugins._verdict import Verdict
from verifiers_plugins.builtin.docker_shell import sandbox_fingerprint
from verifiers_plugins.hookspecs import hookimpl

MODES = ("continuation", "final")
# Limits of a test run: the tests of a task need more than a candidate's 10 s and 256 MB.
# the outcome is read from the end of the output (pytest's summary, the status line): keep all of what the
# output cap lets through (a candidate's and the remaining expert commands' output comes first)
TEST_LIMITS = {"memory": "2g", "pids": 1024, "replay_timeout": 900.0, "compare_chars": 1024 * 1024}


def _backend(timeout: float) -> Any:
    from pivot_sandbox import docker_backend

    return docker_backend(action_timeout=float(timeout), **TEST_LIMITS)


def resolve_task_dir(raw: str) -> Path:
    """The task folder a context names: an absolute path, or `bundled:<id>` for the package's own tasks."""
    if raw.startswith("bundled:"):
        from importlib import resources

        return Path(str(resources.files("pivot_core") / "data" / "terminal_tasks")) / raw.split(":", 1)[1]
    return Path(raw)


_DIGESTS: dict[tuple[str, tuple[tuple[str, int, int], ...]], str] = {}
_DIGESTS_LOCK = threading.Lock()
MAX_TASK_FILES = 4096  # a task folder is a Dockerfile, tests and a solution: more is not a task folder


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
    task_dir: Path, spec: SandboxSpec, history: Sequence[str], commands: Sequence[str], timeout: float
) -> Any:
    """Run `commands` at the state after `history`, then the task's tests; the `TestOutcome`.

    Raises:
        SandboxError: the state could not be built or the tests cannot run here (`TaskError`).
    """
    import time

    from pivot_sandbox import TaskError, TestOutcome, load_task, open_session

    task = load_task(task_dir)
    if task.tests.problem:
        raise TaskError(task.tests.problem)
    session = open_session(_backend(timeout), spec, list(history))
    try:
        deadline = time.monotonic() + timeout
        for command in commands:
            run = session.run(command, timeout=max(deadline - time.monotonic(), 0.001))
            if run.killed:
                return TestOutcome(False, False, {}, f"stopped by the sandbox ({run.killed})")
        # a fresh shell with the image's environment, the tests delivered now (`Session.run_tests`)
        return session.run_tests(task)
    finally:
        session.close()


class TaskTests:
    """Accept a terminal action when the task's own tests pass after it (see the module docstring).

    Args:
        mode: "continuation" (default) or "final".
        command_timeout: seconds allowed per replayed expert command in continuation mode.
    """

    role = "acceptor"
    cost = "sandbox"
    deterministic = True
    # 2: tests delivered writable by root; long test logs keep their status line. 3: skips a cut solution.
    # 4: keystrokes without Enter are typed, not run. 5: tests in a fresh shell with the image's environment,
    # their tools checked unchanged. 6: the agent's processes stopped before the tamper check; every copy of
    # the harness's programs on the PATH guarded; the status must agree with the run's exit status (issue 38)
    version = "6"

    def __init__(self, mode: str = "continuation", command_timeout: float = 60.0) -> None:
        if mode not in MODES:
            raise ValueError(f"task_tests mode: expected one of {MODES}, got {mode!r}")
        self.mode = mode
        self.command_timeout = float(command_timeout)

    def fingerprint(self, pivot: Pivot) -> str | None:
        """The task image's id and the task folder's content: a verdict is the tests' verdict on that image.

        None (not cached) when either cannot be read: the engine is down, the image or folder is gone.
        """
        task = pivot.context.get("task")
        if not isinstance(task, Mapping) or not task.get("dir"):
            return ""  # not applicable here
        image = sandbox_fingerprint("docker", {}, pivot)
        folder = task_dir_digest(resolve_task_dir(str(task["dir"])))
        if image is None or folder is None:
            return None
        return f"{image}|task:{folder}"

    def verify(self, pivot: Pivot, action: Message) -> Verdict:
        """Score one candidate."""
        return self.verify_batch(pivot, [action])[0]

    def verify_batch(self, pivot: Pivot, actions: Sequence[Message]) -> list[Verdict]:
        """Score candidates one by one (each needs its own test run)."""
        plan = self._plan(pivot)
        if isinstance(plan, Verdict):
            return [plan] * len(actions)
        spec, task, history, remaining = plan
        return [self._one(pivot, spec, task, history, remaining, action) for action in actions]

    def timeout_for(self, pivot: Pivot, actions: Sequence[Message]) -> float | None:
        """Seconds the candidates' test runs may take: the chain's deadline for them (`call_timeout`).

        Per candidate: the state rebuilt, its commands and the rest of the solution (`_budget`), the
        tests under the task's own timeout; every part bounded by the sandbox's limits.
        """
        plan = self._plan(pivot)
        if isinstance(plan, Verdict):
            return None  # a skip or an error verdict, at once: the per-call default holds
        from pivot_sandbox import load_task

        spec, task, history, remaining = plan
        limits = limits_of(TEST_LIMITS)
        tests = load_task(resolve_task_dir(str(task["dir"]))).tests.timeout
        pending = history_typed(pivot).pending
        one = state_bound(limits, spec, history) + tests_bound(tests, limits)
        return sum(one + self._budget(action_commands(a, pending), remaining) for a in actions)

    def _plan(self, pivot: Pivot) -> tuple[SandboxSpec, Mapping[str, Any], list[str], list[str]] | Verdict:
        """What every candidate's test run needs (state, task, history, the solution's rest), or the verdict all get."""
        try:
            spec = SandboxSpec.from_context(pivot.context)
        except SandboxError as e:
            return Verdict.failed(f"task_tests: {e}")
        task = pivot.context.get("task")
        if spec is None or not isinstance(task, Mapping) or not task.get("dir"):
            return Verdict.skip("pivot has no task context (not synthesized from a task folder)")
        if (pivot.context.get("sandbox") or {}).get("expert_needs_network"):
            return Verdict.skip("the expert action needs the network: tests cannot run it")
        if truncated := pivot.context.get("truncated"):
            # the expert's session stops at a command that cannot run here: no finished state to test
            return Verdict.skip(f"the solution is cut here: {truncated.get('reason', '')}")
        history = history_commands(pivot)
        solution = [str(c) for c in task.get("solution") or []]
        at = len(history)
        if self.mode == "final" and at < len(solution) - 1:
            return Verdict.skip("final mode applies at the last pivot of the solution")
        remaining = solution[at + 1 :] if self.mode == "continuation" else []
        if needs_network(remaining):
            # the rest of the solution would run in the candidate's container, which has no network
            return Verdict.skip("the rest of the expert's solution needs the network")
        return spec, task, history, remaining

    def _budget(self, commands: Sequence[str], remaining: Sequence[str]) -> float:
        """Seconds the candidate's commands and the rest of the solution may run together."""
        return self.command_timeout * (len(commands) + len(remaining) + 1)

    def _one(
        self,
        pivot: Pivot,
        spec: SandboxSpec,
        task: Mapping[str, Any],
        history: list[str],
        remaining: list[str],
        action: Message,
    ) -> Verdict:
        pending = history_typed(pivot).pending  # a Terminus turn's keystrokes join what is typed at the prompt
        commands = action_commands(action, pending)
        if not commands and action_commands(pivot.expert, pending):
            return Verdict.reject("the completion runs no shell command")
        timeout = self._budget(commands, remaining)
        try:
            outcome = run_tests(resolve_task_dir(str(task["dir"])), spec, history, [*commands, *remaining], timeout)
        except SandboxError as e:
            return Verdict.failed(f"task_tests: {e}")
        except Exception as e:  # noqa: BLE001 - an exception is an error verdict, never a crash
            return Verdict.failed(f"task_tests: {type(e).__name__}: {e}")
        details = {"mode": self.mode, "tests": dict(outcome.counts), "replayed": len(remaining)}
        if outcome.passed:
            return Verdict.accept(f"task tests pass ({self.mode}): {outcome.reason}", **details)
        return Verdict.reject(f"task tests fail ({self.mode}): {outcome.reason}", **details)


def oracle_check(context: Mapping[str, Any]) -> dict[str, Any]:
    """Tests on the initial state and after the whole oracle solution: `{before, after, reason}`.

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
    out: dict[str, Any] = {}
    try:
        # the solution is replayed as history (set-up, with registry access), not run as a candidate
        for name, history in (("before", []), ("after", solution)):
            outcome = run_tests(task_dir, spec, history, [], 60.0)
            out[name] = outcome.passed if outcome.ran or outcome.passed else None
            out[f"{name}_reason"] = outcome.reason
    except SandboxError as e:
        return {"before": out.get("before"), "after": None, "reason": str(e)}
    return out


@hookimpl
def register_verifiers(register: Callable[..., None]) -> None:
    """Register `task_tests`."""
    register("task_tests", TaskTests)
