"""Sandbox contexts for pivots of mini-swe-agent's SWE-bench runs (`pivot convert --swe-instances`).

A run's pivots name their instance (`context.instance_id`); each gets the sandbox of its instance's
image (`pivot_sandbox.swe_image`: the repository at its base commit in `/testbed`, its environment),
where the run's commands replay as its harness ran them (`pivot_core.harness_action`: each in a fresh
`bash -lc` from `/testbed`), with registry access for the replay as the agent had a network. The
pivots get `context.swe` beside the sandbox: the instances file, and the instance's validity as
SWE-bench validates it (`validate_instance`: the base fails FAIL_TO_PASS, the gold patch passes all),
with the tests the sandbox fails whatever the patch (`offline_failures`: a network it lacks), which a
submission's grading leaves out. What follows is the terminal runs' own machinery
(`apply_sandboxes`, the replay check).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pivot_core import Pivot
from pivot_sandbox.errors import SandboxError, TaskError
from pivot_tasks._agent_runs import Sandbox, apply_sandboxes
from pivot_tasks._synthesize import REPLAY_LIMITS


def instance_sandbox(instance: Any, instances: Path, backend: Any, tests_backend: Any) -> Sandbox:
    """(the sandbox, context.swe, "") of one instance, or (None, {}, why) when its image cannot be built."""
    from pivot_sandbox import swe_image, swe_spec, validate_instance

    built = swe_image(backend.client, instance)
    if built.status == "skipped":
        return None, {}, f"image not built: {built.reason}"
    validity = validate_instance(tests_backend, instance, built.image)
    meta = {
        "instance_id": instance.instance_id,
        "instances": str(Path(instances).resolve()),
        "valid": validity.valid,
        "offline_failures": list(validity.offline_failures),
    }
    if not validity.valid:
        meta["invalid"] = validity.reason
    return dataclasses.replace(swe_spec(built.image), replay_access=True), meta, ""


def unresolved_submissions(pivots: Sequence[Pivot]) -> tuple[list[Pivot], list[Pivot]]:
    """(the pivots to keep, the submissions of runs not known to be resolved, left out).

    A run's submission is an acceptable action only if the run resolved its instance: the expert turn
    of an unresolved run's submission submits a patch the tests reject, and the chain accepts an
    action identical to the expert's outright, so a candidate repeating it would score 1. Those
    pivots are left out (a run whose outcome is unknown too: when in doubt, no pivot).
    """
    from pivot_core import mini_swe_agent_action, mini_swe_agent_submits

    kept, left = [], []
    for pivot in pivots:
        submits = mini_swe_agent_submits(mini_swe_agent_action(pivot.expert.content))
        resolved = pivot.context.get("trajectory_reward") == 1.0
        (left if submits and not resolved else kept).append(pivot)
    return kept, left


def swe_sandbox_pivots(
    pivots: Sequence[Pivot], instances: Path, backend: Any = None
) -> tuple[list[Pivot], dict[str, Any]]:
    """The pivots with `context.sandbox` and `context.swe` where their instance builds; the report.

    The report is `apply_sandboxes`'s, with `valid` (instances that pass SWE-bench's validity check),
    `invalid` (`{instance_id: reason}`) and `unresolved_submissions` (left out: `unresolved_submissions`).
    """
    from pivot_sandbox import SWE_LIMITS, docker_backend, load_instances

    backend = backend or docker_backend(**REPLAY_LIMITS)
    tests_backend = docker_backend(**SWE_LIMITS)
    wanted = sorted({str(p.context["instance_id"]) for p in pivots if p.context.get("instance_id")})
    known = {i.instance_id: i for i in load_instances(instances)}
    by_instance: dict[str, Sandbox] = {}
    for name in wanted:
        if name not in known:
            by_instance[name] = (None, {}, f"no instance {name!r} in {instances}")
            continue
        try:
            by_instance[name] = instance_sandbox(known[name], instances, backend, tests_backend)
        except (SandboxError, TaskError) as e:
            by_instance[name] = (None, {}, f"image not built: {e}")
    kept, unresolved = unresolved_submissions(pivots)
    out, report = apply_sandboxes(kept, by_instance, "instance_id", "swe")
    report["unresolved_submissions"] = len(unresolved)  # left out: see `unresolved_submissions`
    metas = [meta for spec, meta, _ in by_instance.values() if spec is not None]
    report["valid"] = sum(bool(m["valid"]) for m in metas)
    report["invalid"] = {m["instance_id"]: m["invalid"] for m in metas if not m["valid"]}
    return out, report
