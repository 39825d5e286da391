"""SWE-bench Verified instance environments rebuilt offline: built, build seconds, tests before/after the gold patch.

For each instance: its image (`pivot_sandbox.tasks.swe_image`: base, environment, instance layers, each
cached by what it depends on) built, then built again from the cache; the tests run with no network on
the base commit and with the gold patch, graded by `swebench` (`validate_instance`): FAIL_TO_PASS before
and after, PASS_TO_PASS after, the tests the sandbox fails whatever the patch (offline failures); then the
recorded mini-swe-agent run's submission graded the same way (offline failures excluded) against the
resolution its run recorded.

Instances the staging rebuilt by hand (`offline_check` in their row, feasibility.md) are the dev split;
the others are held back and reported apart: the code was not tuned on them. The default set shares three
environments (requests 2.0-2.9, pytest 5.4/6.0, sympy) so that a run fits a 2-core machine.

    nice python bench/swe_envs.py [--instances F] [--only ID,...] [--json] [--out FILE] [--force]

Reads the instances by path at run time (SWE-bench Verified: tests, demos and benchmarks only).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from pivot_sandbox import docker_backend
from pivot_sandbox.tasks.swe import SWEInstance, default_instances, load_instances
from pivot_sandbox.tasks.swe_image import swe_base, swe_image
from pivot_sandbox.tasks.swe_tests import SWE_LIMITS, run_swe_tests, validate_instance

DEFAULT = (
    *("psf__requests-2931", "psf__requests-1766", "pytest-dev__pytest-7432", "sympy__sympy-24562"),
    *("pytest-dev__pytest-7521", "sympy__sympy-15345", "sympy__sympy-22714", "sympy__sympy-18199"),
)


def submission(instance: SWEInstance) -> str | None:
    """The recorded agent run's submitted diff, None when there is no run beside the instances."""
    if instance.trajectory is None:
        return None
    info = json.loads(instance.trajectory.read_text()).get("info") or {}
    return str(info.get("submission") or "")


def one(backend, instance: SWEInstance, force: bool) -> dict:  # noqa: ANN001 - a DockerBackend
    """Build (cold, then cached), validate, grade the recorded submission; one row."""
    row = {"instance_id": instance.instance_id, "split": "dev" if instance.offline_check else "held_back"}
    cold = swe_image(backend.client, instance, force=force)
    row.update(build=cold.status, build_s=round(cold.seconds, 1), env=cold.env_status)
    row.update(env_s=round(cold.env_seconds, 1), python=cold.python)
    if cold.status == "skipped":
        return {**row, "built": False, "reason": cold.reason}
    warm = swe_image(backend.client, instance)
    row.update(built=True, image=cold.image, cached_s=round(warm.seconds, 2))
    v = validate_instance(backend, instance, cold.image)
    row.update(
        valid=v.valid,
        reason=v.reason,
        f2p_before=v.before.passed("fail_to_pass"),
        f2p_after=v.gold.passed("fail_to_pass"),
        p2p_after=v.gold.passed("pass_to_pass"),
        p2p_intact=v.gold.resolved is not None and not v.regressions,
        offline_failures=list(v.offline_failures),
        tests_s=round(v.before.seconds + v.gold.seconds, 1),
    )
    patch = submission(instance)
    if patch is not None and v.valid:
        graded = run_swe_tests(backend, instance, patch, image=cold.image, exclude=v.offline_failures)
        row.update(submission_resolved=graded.resolved, recorded_resolved=instance.resolved)
    return row


def summary(rows: list[dict]) -> dict:
    """Counts and medians of one split."""
    built = [r for r in rows if r.get("built")]
    graded = [r for r in built if "submission_resolved" in r]
    cold = [r["build_s"] for r in built if r["build"] == "built"]
    return {
        "instances": len(rows),
        "built": len(built),
        "valid": sum(bool(r.get("valid")) for r in built),
        "f2p_fail_before": sum(r["f2p_before"].startswith("0/") for r in built),
        "f2p_pass_after": sum(r["f2p_after"].split("/")[0] == r["f2p_after"].split("/")[1] for r in built),
        "p2p_intact": sum(bool(r.get("p2p_intact")) for r in built),
        "build_s_median": statistics.median(cold) if cold else None,
        "cached_s_median": statistics.median([r["cached_s"] for r in built]) if built else None,
        "submissions_graded": len(graded),
        "submissions_as_recorded": sum(r["submission_resolved"] == r["recorded_resolved"] for r in graded),
        "not_valid": {r["instance_id"]: r.get("reason", "") for r in rows if not r.get("valid")},
    }


def main(argv: list[str] | None = None) -> int:
    """Run the bench; print the JSON report (or a table) and write rows to `--out` as they finish."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--instances", type=Path, default=None, help="an instances.jsonl (default: the shared data's)")
    ap.add_argument("--only", default=",".join(DEFAULT), help="comma-separated instance ids ('all' for every one)")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    ap.add_argument("--out", type=Path, default=None, help="append one JSON line per instance as it finishes")
    ap.add_argument("--force", action="store_true", help="rebuild the environment and instance layers")
    args = ap.parse_args(argv)
    path = args.instances or default_instances()
    if path is None:
        print("no instances file: pass --instances or set PIVOT_SHARED_DATA", file=sys.stderr)
        return 2
    only = [] if args.only == "all" else [s for s in args.only.split(",") if s]
    instances = load_instances(path, only)
    backend = docker_backend(**SWE_LIMITS)
    started = time.monotonic()
    swe_base(backend.client)  # layer 1, shared by every instance: built once per machine
    base_s = round(time.monotonic() - started, 1)
    rows = []
    for instance in instances:
        row = one(backend, instance, args.force)
        rows.append(row)
        if args.out:
            with args.out.open("a") as f:
                f.write(json.dumps(row) + "\n")
        if not args.json:
            print(json.dumps(row), flush=True)
    report = {
        "machine": {"cores": os.cpu_count()},
        "seconds": round(time.monotonic() - started, 1),
        "base_s": base_s,
        "dev": summary([r for r in rows if r["split"] == "dev"]),
        "held_back": summary([r for r in rows if r["split"] == "held_back"]),
        "instances": rows,
    }
    print(json.dumps(report, indent=1 if args.json else None))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
