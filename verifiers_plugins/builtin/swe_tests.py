"""`swe_tests` acceptor: the submission of a SWE-bench run judged by the instance's tests, as SWE-bench grades it.

It applies at a sandboxed pivot of a mini-swe-agent SWE-bench run (`pivot convert --swe-instances`:
`context.sandbox`, `context.swe`) whose expert turn submits (`echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT
&& git add -A && git diff --cached`: `pivot_core.mini_swe_agent_submits`); elsewhere it stands aside
(`docker_shell` judges other turns by their effect, `swe_target` pivots without a sandbox).

The candidate's command runs at the restored state as the harness ran it (`harness_action`), in a live
session (its output whole, as the harness read it: an effect's output is normalised, and a diff whose
blank context lines lost their space no longer applies); what its output submits to mini-swe-agent
(`mini_swe_agent_submission`: the lines after the marker line) is the patch SWE-bench grades. It is
applied in a fresh sandbox of the instance's image, the test patch applied only then (never visible to
a candidate), the tests run with no network and graded by `swebench` (`pivot_sandbox.run_swe_tests`),
the tests the sandbox fails whatever the patch left out (`context.swe.offline_failures`). Accepted when
the instance is resolved. A candidate that submits nothing is rejected (the run ends at this turn); an
instance that failed SWE-bench's validity check here is not judged (a skip: its tests tell no patch
apart).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pivot_core import (
    Message,
    Pivot,
    harness_action,
    history_typed,
    mini_swe_agent_submission,
)
from pivot_sandbox import (
    SWE_LIMITS,
    SWE_STATE_LIMITS,
    SandboxContext,
    SandboxSpec,
    action_bound,
    docker_backend,
    limits_of,
    load_instances,
    open_session,
    run_swe_tests,
    state_bound,
    tests_bound,
)
from pivot_sandbox.errors import SandboxError
from verifiers_plugins._verdict import Verdict
from verifiers_plugins.builtin.docker_shell import sandbox_fingerprint, submission_pivot
from verifiers_plugins.hookspecs import hookimpl


class SweTests:
    """Accept a submission when SWE-bench would call the instance resolved (see the module docstring)."""

    role = "acceptor"
    cost = "sandbox"
    deterministic = True
    version = "1"

    def fingerprint(self, pivot: Pivot) -> str | None:
        """The instance image's id: the verdict is its tests' verdict there ("" where it does not apply)."""
        if not submission_pivot(pivot):
            return ""
        return sandbox_fingerprint("docker", {}, pivot)

    def timeout_for(self, pivot: Pivot, actions: Sequence[Message]) -> float | None:
        """Seconds the candidates may take (the chain's deadline for them): each restores the state, runs, is tested.

        Every part is bounded by the sandbox's limits: the state built (when not yet), the candidate's
        command, the instance's test run in a fresh sandbox under `SWE_LIMITS`.
        """
        plan = self._plan(pivot)
        if isinstance(plan, Verdict):
            return None  # a skip or an error verdict, at once: the per-call default holds
        spec, _ = plan
        state = limits_of(SWE_STATE_LIMITS)
        tests = limits_of(SWE_LIMITS)
        one = action_bound(state) + tests_bound(tests.action_timeout, tests)
        return state_bound(state, spec, history_typed(pivot).commands) + one * len(actions)

    def verify(self, pivot: Pivot, action: Message) -> Verdict:
        """Score one candidate."""
        return self.verify_batch(pivot, [action])[0]

    def verify_batch(self, pivot: Pivot, actions: Sequence[Message]) -> list[Verdict]:
        """Run each candidate at the restored state, then the tests on what it submits (each patch graded once)."""
        plan = self._plan(pivot)
        if isinstance(plan, Verdict):
            return [plan] * len(actions)
        spec, swe = plan
        try:
            instance = load_instances(str(swe["instances"]), only=[str(swe["instance_id"])])[0]
        except SandboxError as e:
            return [Verdict.failed(f"swe_tests: {e}")] * len(actions)
        history = list(history_typed(pivot).commands)
        backend = docker_backend(**SWE_STATE_LIMITS)  # live sessions: the output whole, as the harness read it
        graded: dict[str, Verdict] = {}
        ran: dict[tuple[str, ...], Verdict] = {}  # identical candidates run once
        out = []
        for action in actions:
            commands = tuple(harness_action(action, pivot.context).commands)
            if not commands:
                out.append(Verdict.reject("the completion runs no shell command"))
                continue
            if commands not in ran:
                ran[commands] = self._one(backend, spec, history, commands, instance, swe, graded)
            out.append(ran[commands])
        return out

    @staticmethod
    def _plan(pivot: Pivot) -> tuple[SandboxSpec, Mapping[str, Any]] | Verdict:
        """The state and the instance facts every candidate needs, or the verdict all of them get."""
        if not submission_pivot(pivot):
            return Verdict.skip("not the submission of a SWE-bench run")
        try:
            sandbox = SandboxContext.from_context(pivot.context)
        except SandboxError as e:
            return Verdict.failed(f"swe_tests: {e}")
        if sandbox is None:
            return Verdict.skip("pivot has no sandbox context")
        swe = pivot.context["swe"]
        if not swe.get("valid", False):
            return Verdict.skip(f"the instance fails SWE-bench's validity check here: {swe.get('invalid', '')}")
        return sandbox.spec, swe

    @staticmethod
    def _one(
        backend: Any,
        spec: SandboxSpec,
        history: list[str],
        commands: tuple[str, ...],
        instance: Any,
        swe: Mapping[str, Any],
        graded: dict[str, Verdict],
    ) -> Verdict:
        """One candidate: run at the state in a live session, its submission read from its output, then graded."""
        try:
            session = open_session(backend, spec, history)
            try:
                runs = [session.run(c) for c in commands]
            finally:
                session.close()
        except SandboxError as e:
            return Verdict.failed(f"swe_tests: the state could not be restored: {e}")
        if any(r.killed for r in runs):
            return Verdict.reject(f"the sandbox stopped the candidate ({runs[-1].killed}): nothing submitted")
        patch = mini_swe_agent_submission(runs[-1].output)
        if patch is None:
            return Verdict.reject("submits nothing: its output does not start with mini-swe-agent's submission marker")
        if patch not in graded:
            try:
                outcome = run_swe_tests(
                    docker_backend(**SWE_LIMITS),
                    instance,
                    patch,
                    image=spec.image,
                    exclude=[str(t) for t in swe.get("offline_failures") or []],
                )
            except SandboxError as e:
                return Verdict.failed(f"swe_tests: {e}")
            details = {"FAIL_TO_PASS": outcome.passed("fail_to_pass"), "PASS_TO_PASS": outcome.passed("pass_to_pass")}
            if outcome.resolved:
                graded[patch] = Verdict.accept("the submission resolves the instance", **details)
            else:
                why = f"the submission does not resolve the instance: {outcome.reason}"
                graded[patch] = Verdict.reject(why, **details)
        return graded[patch]


@hookimpl
def register_verifiers(register: Callable[..., None]) -> None:
    """Register `swe_tests`."""
    register("swe_tests", SweTests)
