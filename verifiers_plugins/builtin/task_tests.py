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
environment (nothing the candidate exported: `BASH_ENV`, `PYTHONPATH`, `PYTEST_PLUGINS`), the tests and
the venv the image build set aside for them (`TESTS_VENV`) copied in only now, the interpreter checked
unchanged first, `--network none` like every candidate container; their status line carries a nonce the candidate
cannot know. A test run the sandbox stops, or whose tools the candidate changed, is a rejection; a sandbox
that fails is an error verdict. A Harbor task's test run stops at its `[verifier].timeout_sec`, and its
containers get the cpus and memory its `task.toml` gives (`pivot_sandbox.task_limits`).

The library half (running a task's tests in a session, their limits, the task folder's digest, the
oracle check) is the sandbox's task home: `pivot_sandbox.tasks.verification`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pivot_core import Message, Pivot, harness_action, history_commands, history_typed
from pivot_sandbox import (
    TEST_LIMITS,
    SandboxContext,
    SandboxSpec,
    limits_of,
    load_task,
    needs_network,
    resolve_task_dir,
    run_tests,
    state_bound,
    task_dir_digest,
    task_limits,
    tests_bound,
    verification_backend,
)
from pivot_sandbox.errors import SandboxError
from verifiers_plugins._verdict import Verdict
from verifiers_plugins.builtin.docker_shell import sandbox_fingerprint
from verifiers_plugins.hookspecs import hookimpl

MODES = ("continuation", "final")


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
    # 7: a Harbor task's float reward in the details (`test_reward`). 8: a Harbor task's test run stops at its
    # `[verifier].timeout_sec` (no grace), its containers under task.toml's cpus and memory
    version = "8"

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
        spec, task, history, remaining = plan
        limits = limits_of(TEST_LIMITS)
        tests = load_task(resolve_task_dir(str(task["dir"]))).tests.timeout
        pending = history_typed(pivot).pending
        one = state_bound(limits, spec, history) + tests_bound(tests, limits)
        return sum(one + self._budget(self._commands(pivot, a, pending), remaining) for a in actions)

    def _plan(self, pivot: Pivot) -> tuple[SandboxSpec, Mapping[str, Any], list[str], list[str]] | Verdict:
        """What every candidate's test run needs (state, task, history, the solution's rest), or the verdict all get."""
        try:
            sandbox = SandboxContext.from_context(pivot.context)
        except SandboxError as e:
            return Verdict.failed(f"task_tests: {e}")
        task = pivot.context.get("task")
        if sandbox is None or not isinstance(task, Mapping) or not task.get("dir"):
            return Verdict.skip("pivot has no task context (not synthesized from a task folder)")
        spec = sandbox.spec
        if sandbox.expert_needs_network:
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
        if needs_network(remaining, [s.name for s in spec.services]):
            # the rest of the solution would run in the candidate's container, which has no network
            return Verdict.skip("the rest of the expert's solution needs the network")
        return spec, task, history, remaining

    @staticmethod
    def _commands(pivot: Pivot, action: Message, pending: str) -> list[str]:
        """The action's commands as the pivot's harness runs them (a mini-swe-agent command: a fresh subshell)."""
        return list(harness_action(action, pivot.context, pending).commands)

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
        commands = self._commands(pivot, action, pending)
        if not commands and self._commands(pivot, pivot.expert, pending):
            return Verdict.reject("the completion runs no shell command")
        timeout = self._budget(commands, remaining)
        try:
            task_dir = resolve_task_dir(str(task["dir"]))
            backend = verification_backend(timeout, task_limits(pivot.context))  # a Harbor task's cpus, memory
            outcome = run_tests(backend, task_dir, spec, history, [*commands, *remaining], timeout)
        except SandboxError as e:
            return Verdict.failed(f"task_tests: {e}")
        except Exception as e:  # noqa: BLE001 - an exception is an error verdict, never a crash
            return Verdict.failed(f"task_tests: {type(e).__name__}: {e}")
        details = {"mode": self.mode, "tests": dict(outcome.counts), "replayed": len(remaining)}
        if outcome.reward is not None:  # a Harbor task's float: the verdict stays 0/1 (accepted at reward 1)
            details["test_reward"] = outcome.reward  # not `reward`: that is the verdict's own (0 or 1)
        if outcome.passed:
            return Verdict.accept(f"task tests pass ({self.mode}): {outcome.reason}", **details)
        return Verdict.reject(f"task tests fail ({self.mode}): {outcome.reason}", **details)


@hookimpl
def register_verifiers(register: Callable[..., None]) -> None:
    """Register `task_tests`."""
    register("task_tests", TaskTests)
