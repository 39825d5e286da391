"""The outcome of an episode on a SWE-bench run's pivot: what the agent submitted, graded as SWE-bench grades it.

`pivot/terminal-episode-v0` plays the pivots of a mini-swe-agent SWE-bench run (`pivot convert
--swe-instances`: `context.sandbox` is the instance's image, `context.swe` the instance) in the run's
own format, each command as the harness ran it. SWE-bench grades the patch a run submits
(`echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached`: the output after the
marker), applied to a fresh container of the instance's image, not the tree the agent left: so does this
(`pivot_sandbox.run_swe_tests`: the test patch applied only for that run, the tests with no network,
`swebench`'s log parser and grading, the instance's offline failures left out). An episode that ends
without a submission (turn budget, time limit) submitted nothing: outcome 0, as SWE-bench scores a run
with no patch. `details` holds FAIL_TO_PASS and PASS_TO_PASS (`{"success": [...], "failure": [...]}`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pivot_core import Pivot
from pivot_envs.episodes._base import EpisodeOutcome
from verifiers_plugins import sandbox_backend

RULE = "swe_tests"


def swe_outcome(pivot: Pivot, submission: str | None, ended_by: str) -> EpisodeOutcome:
    """The instance's tests on `submission` (None: nothing submitted, outcome 0); an error outcome when ungradable."""
    from pivot_sandbox import SWE_LIMITS, SandboxError, SandboxSpec, load_instances, run_swe_tests

    swe: Mapping[str, Any] = pivot.context["swe"]
    if submission is None:
        return EpisodeOutcome(0.0, ended_by, RULE, {"submitted": False, "resolved": False})
    spec = SandboxSpec.from_context(pivot.context)
    try:
        (instance,) = load_instances(str(swe["instances"]), only=[str(swe["instance_id"])])
        exclude = [str(t) for t in swe.get("offline_failures") or []]
        backend = sandbox_backend("docker", **SWE_LIMITS)  # SWE-bench's procedure: a fresh container per test run
        result = run_swe_tests(backend, instance, submission, image=spec.image if spec else "", exclude=exclude)
    except SandboxError as e:  # the tests cannot run here: no outcome rather than a guess
        return EpisodeOutcome(0.0, ended_by, RULE, error=f"swe tests: {e}")
    details = {"submitted": True, **result.to_json()}
    if result.resolved is None and result.applied:
        return EpisodeOutcome(0.0, ended_by, RULE, details, error=f"swe tests: {result.reason}")
    return EpisodeOutcome(1.0 if result.resolved else 0.0, ended_by, RULE, details)
