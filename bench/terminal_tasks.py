"""Terminal-Bench task environments over all public task folders: built / synthesized / tests pass after the oracle.

For every task folder: build its image from its own Dockerfile (cold, then again from the cache), run
the oracle solution in it (`pivot synthesize terminal-bench --tasks-dir`), and run the task's tests on
the initial state and after the oracle solution (`task_tests.oracle_check`). Then, on the first few
synthesized tasks, the per-candidate verify latency of `docker_shell` on task images, pooled (snapshot
+ warm pool) vs naive (cold container + full replay), same transport. One JSON line per task goes to
`--out` as it finishes (a long run can be read while it goes); the summary table is printed last.

    nice python bench/terminal_tasks.py [--tasks-dir DIR] [--only a,b] [--out FILE] [--latency-tasks 3]
    python bench/terminal_tasks.py --summarize A.jsonl B.jsonl     # the table of runs made in parts

Reads the task folders by path at run time (they carry the Terminal-Bench canary: tests and demos only).
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

import pivot_envs  # noqa: F401  (imports the package before verifiers_plugins)
from pivot_core import action_commands, history_commands
from pivot_core._jsonl import iter_jsonl
from pivot_envs import extract_pivots
from pivot_sandbox import SandboxSpec, oracle_check, verification_backend
from pivot_sandbox._plugin import docker_backend
from pivot_sandbox.docker.backend import DockerBackend
from pivot_sandbox.tasks import terminal_bench as _tasks
from pivot_tasks import REPLAY_LIMITS, mark_network_pivots, synthesize

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "terminal"


def one_task(record: dict, folder: Path, keep: int) -> tuple[dict, list]:
    """Build (cold and cached), synthesize and oracle-check one task; (row, pivots)."""
    backend = docker_backend(**REPLAY_LIMITS)
    client = backend.client
    task = _tasks.load_task(folder)
    cold = _tasks.task_image(client, task, keep=keep)
    row = {"task_id": task.task_id, "build": cold.status, "build_s": round(cold.seconds, 1)}
    if cold.status == "skipped":
        return {**row, "stage": "build", "reason": cold.reason}, []
    warm = _tasks.task_image(client, task, keep=keep)
    row.update(image=cold.image, cached_s=round(warm.seconds, 2), base=cold.base)
    started = time.monotonic()
    (result,) = list(synthesize([record], "pivot-gym/debian:bookworm", backend, tasks_dir=folder.parent))
    row["synth_s"] = round(time.monotonic() - started, 1)
    if result["status"] not in ("ok", "partial"):
        return {**row, "synthesized": False, "stage": "synthesis", "reason": result["reason"]}, []
    pivots = mark_network_pivots(extract_pivots(result["trajectory"]))
    row.update(synthesized=True, pivots=len(pivots))
    if result["status"] == "partial":  # up to a command that needs a host outside the registries
        row.update(partial=True, stage="synthesis (partial)", reason=result["reason"])
    row["network_pivots"] = sum(bool(p.context["sandbox"].get("expert_needs_network")) for p in pivots)
    started = time.monotonic()
    check = oracle_check(pivots[0].context, verification_backend)
    row.update(
        tests_before=check.get("before"),
        tests_after=check.get("after"),
        tests_s=round(time.monotonic() - started, 1),
        tests_reason=check.get("after_reason") or check.get("reason", ""),
    )
    if not check.get("after") and not row.get("partial"):
        row["stage"] = "tests"
        row["reason"] = check.get("after_reason") or check.get("reason", "")
    return row, pivots


def latency(pivots: list, k: int = 8, epochs: int = 3) -> dict:
    """ms per candidate of `docker_shell`'s backend on task-image pivots: naive vs pooled, same transport."""
    usable = [p for p in pivots if action_commands(p.expert) and not p.context["sandbox"].get("expert_needs_network")]
    out = {}
    for name, backend in (("naive", DockerBackend(snapshots=False)), ("pooled", DockerBackend())):
        total, n = 0.0, 0
        for pivot in usable[:3]:
            spec = SandboxSpec.from_context(pivot.context)
            history = history_commands(pivot)
            actions = [action_commands(pivot.expert)] * k
            for epoch in range(1 if name == "naive" else epochs):
                started = time.monotonic()
                backend.run_group(spec, history, actions)
                if name == "naive" or epoch > 0:  # pooled: the warm epochs (the first pays for the snapshot)
                    total += time.monotonic() - started
                    n += k
        out[name] = round(1000 * total / max(n, 1), 1)
        out["transport"] = backend.transport
        backend.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks-dir", type=Path, default=DATA / "tasks")
    parser.add_argument("--tasks-jsonl", type=Path, default=DATA / "terminal_bench_core_tasks.jsonl")
    parser.add_argument("--only", default="")
    parser.add_argument("--out", type=Path, default=Path("/tmp/pivot-terminal-tasks.jsonl"))
    parser.add_argument("--keep", type=int, default=12, help="task images kept (LRU)")
    parser.add_argument("--latency-tasks", type=int, default=3)
    parser.add_argument("--from", dest="start", default="", help="only task folders from this name on")
    parser.add_argument("--until", default="", help="only task folders before this name")
    parser.add_argument("--summarize", nargs="+", type=Path, help="print the table of earlier runs' JSONL")
    opts = parser.parse_args()
    if opts.summarize:
        rows = [json.loads(line) for path in opts.summarize for line in path.read_text().splitlines() if line]
        lat = next((r["latency"] for r in rows if "latency" in r), {})
        by_task = {r["task_id"]: r for r in rows if "task_id" in r}  # a task run twice: its last row
        summarize(list(by_task.values()), lat)
        return
    records = {str(r.get("task_id")): r for _, r in iter_jsonl(opts.tasks_jsonl)}
    only = [t for t in opts.only.split(",") if t]
    rows, latency_pivots = [], []
    with open(opts.out, "w") as out:
        folders = [
            f
            for f in _tasks.task_dirs(opts.tasks_dir, only)
            if f.name >= opts.start and (not opts.until or f.name < opts.until)
        ]
        for folder in folders:
            record = records.get(folder.name, {"task_id": folder.name, "solution_commands": []})
            try:
                row, pivots = one_task(record, folder, opts.keep)
            except Exception as e:  # noqa: BLE001 - one task's failure is its row, the run goes on
                row, pivots = {"task_id": folder.name, "stage": "error", "reason": f"{type(e).__name__}: {e}"}, []
            if pivots and len({id(p) for p in latency_pivots}) < 3 * opts.latency_tasks and row.get("tests_after"):
                latency_pivots.extend(pivots)
            rows.append(row)
            out.write(json.dumps(row) + "\n")
            out.flush()
            print(json.dumps(row), flush=True)
        lat = latency(latency_pivots) if latency_pivots else {}
        if lat:
            out.write(json.dumps({"latency": lat}) + "\n")
    summarize(rows, lat)


def summarize(rows: list[dict], lat: dict) -> None:
    """Print the counts, build times, latency and reasons of the task rows."""
    built = sum(r.get("build") in ("built", "cached") for r in rows)
    synth = sum(bool(r.get("synthesized")) and not r.get("partial") for r in rows)
    partial = sum(bool(r.get("partial")) for r in rows)
    pivots = sum(r.get("pivots", 0) for r in rows)
    passed = sum(r.get("tests_after") is True for r in rows)
    fail_before = sum(r.get("tests_before") is False and r.get("tests_after") is True for r in rows)
    reasons = Counter(f"{r.get('stage')}: {_kind(r.get('reason', ''))}" for r in rows if r.get("reason"))
    cold = [r["build_s"] for r in rows if r.get("build") == "built"]
    cached = [r["cached_s"] for r in rows if "cached_s" in r]
    print(f"\n| of {len(rows)} tasks | count |\n|---|---|")
    print(f"| image built from its Dockerfile | {built} |\n| synthesized (the whole oracle solution) | {synth} |")
    print(f"| synthesized up to a command that needs a host outside the registries | {partial} |")
    print(f"| pivots (both kinds) | {pivots} |")
    print(f"| tests pass after the oracle | {passed} |\n| ... and fail on the initial state | {fail_before} |")
    if cold:
        print(
            f"\nbuild time per task: cold median {sorted(cold)[len(cold) // 2]:.0f} s (max {max(cold):.0f} s), ", end=""
        )
        print(f"cached median {sorted(cached)[len(cached) // 2]:.2f} s")
    if lat:
        print(f"verify latency per candidate ({lat['transport']}): naive {lat['naive']} ms, pooled {lat['pooled']} ms")
    print("\nreasons:")
    for reason, n in reasons.most_common():
        print(f"  {n:3d}  {reason}")


def _kind(reason: str) -> str:
    """A reason with its task-specific tail cut, for counting."""
    for marker in ("needs ", "exited", "no local equivalent", "docker-compose", "tests exited", "timed out"):
        if marker in reason:
            return reason[reason.index(marker) :][:70]
    return reason[:70]


if __name__ == "__main__":
    main()
