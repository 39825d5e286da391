"""Harbor task folders (Terminal-Bench 2.0's) built offline and checked by their own tests: oracle 1, untouched 0.

For every task folder: its image from `environment/Dockerfile` (`pivot sandbox build-tasks`: base
images mapped to local stand-ins, `ubuntu:24.04` swapped for Debian trixie and the swap recorded in
the image's labels), the layer its `test.sh` would download (`tasks/harbor_layer.py`: uv, the pinned
pytest and plugins, test-time apt packages, from the registries), then `test.sh` as Harbor's verifier
runs it, on the untouched image (reward 0 expected) and after `solution/solve.sh` (reward 1
expected). One JSON row per task (to `--out` as each finishes); the counts last, with `--held-out`
tasks (ones not looked at while the loader was written) counted apart.

`--pivots-of ROWS.jsonl` measures the pivots of the tasks those rows found sound (oracle 1, untouched
0), without checking them again: the oracle synthesized into Terminus pivots in the task's image
(`pivot synthesize harbor`), `docker_shell` alone on the expert of every sandboxed pivot that runs a
command offline (up to `--max-pivots`, spread over the solution), the state-changing audit variants
of the expert (`rm -rf` after it, writes hidden in it, a background job, shell state, test-tool
tampering) on up to `--variant-pivots` of them, and the warm per-candidate latency of each backend.
`docker_shell` runs under the task's limits (`harbor_limits`: memory, cpus, history commands as long
as the agent's timeout), an action for at most `ACTION_SECONDS`.

    nice python bench/harbor_tasks.py --tasks-dir DIR [--only a,b] [--held-out c,d] [--out F] [--json]
    nice python bench/harbor_tasks.py --tasks-dir DIR --pivots-of ROWS.jsonl [--held-out c,d] [--out F] [--json]
    python bench/harbor_tasks.py --tasks-dir DIR --static     # no build: what is refused before building

Reads the task folders by path at run time (TB2 carries a canary: benchmarks and tests only).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter
from pathlib import Path

from inert import is_inert  # bench/inert.py, beside this script

import pivot_envs  # noqa: F401  (imports the package before verifiers_plugins)
from pivot_sandbox import docker_backend
from pivot_sandbox.tasks.harbor import harbor_limits
from pivot_sandbox.tasks.harbor_layer import verifier_layer
from pivot_sandbox.tasks.harbor_verify import check_harbor_task
from pivot_sandbox.tasks.terminal_bench import load_task, task_dirs, task_image

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "terminal" / "tb2" / "tasks"
# the audit cases that change the sandbox's state beyond the expert's effect: each must score 0
DESTRUCTIVE = (
    *("destructive_suffix", "destructive_home", "hidden_write", "hidden_substitution", "background_job"),
    *("shell_state_path", "shell_state_alias", "test_environment", "etc_hosts", "faked_test_tool", "tests_race"),
)
BACKENDS = ("docker", "namespace")
ACTION_SECONDS = 120.0  # one candidate's action at a pivot (an oracle step that compiles or renders)


def one_task(folder: Path, keep: int) -> dict:
    """Build, make the test-run layer, and run the tests untouched and after the oracle: one row."""
    task = load_task(folder)
    if task.harbor is None:
        return {"task_id": folder.name, "stage": "load", "reason": "not a Harbor task folder"}
    backend = docker_backend(**harbor_limits(task.harbor))
    report = task_image(backend.client, task, keep=keep)
    row = {"task_id": task.task_id, "build": report.status, "build_s": round(report.seconds, 1), "base": report.base}
    row["base_note"] = report.base_note
    if report.status == "skipped":
        return {**row, "built": False, "stage": "build", "reason": report.reason}
    started = time.monotonic()
    layer = verifier_layer(backend.client, task, report.image)
    row.update(built=True, image=report.image, layer_s=round(time.monotonic() - started, 1), layer_mb=layer.bytes >> 20)
    row["verifiable"] = layer.tar is not None
    if layer.tar is None:
        return {**row, "stage": "verifier layer", "reason": layer.problem}
    started = time.monotonic()
    checks = check_harbor_task(backend, task, report.image, layer, report.workdir, report.user)
    row["tests_s"] = round(time.monotonic() - started, 1)
    untouched, oracle = checks["untouched"], checks["oracle"]
    row.update(untouched_reward=untouched.reward, untouched_reason=untouched.reason)
    row.update(
        oracle_reward=oracle.reward if oracle else None, oracle_reason=oracle.reason if oracle else "no solve.sh"
    )
    if oracle is not None:
        row["oracle_tests"] = (oracle.details.get("ctrf") or {}).get("summary")
        if not oracle.passed:
            row.update(
                stage="oracle", reason=oracle.reason, oracle_log=str(oracle.details.get("test_stdout", ""))[-600:]
            )
    if untouched.reward != 0.0:
        row.setdefault("stage", "untouched")
        row.setdefault("reason", f"untouched: {untouched.reason}")
    return row


def spread(items: list, n: int) -> list:
    """Up to `n` of `items`, evenly spread from the first to the last."""
    if len(items) <= n:
        return list(items)
    return [items[round(i * (len(items) - 1) / (n - 1))] for i in range(n)] if n > 1 else items[:1]


def judged_pivots(pivots: list) -> list:
    """The sandboxed pivots whose expert runs a command without the network (the ones `docker_shell` judges)."""
    from pivot_core import action_commands

    return [
        p
        for p in pivots
        if p.context.get("sandbox")
        and not p.context["sandbox"].get("expert_needs_network")
        and action_commands(p.expert)
    ]


def pivot_row(folder: Path, max_pivots: int, variant_pivots: int) -> dict:
    """Synthesize one sound task's oracle and score its pivots (see the module docstring): one row."""
    import gymnasium as gym

    from pivot_envs import render_completion
    from pivot_tasks import synthesize_harbor
    from verifiers_plugins import adversarial_completions

    row: dict = {"task_id": folder.name}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "pivots.jsonl"
        started = time.monotonic()
        report = synthesize_harbor(folder, out)
        row["synth_s"] = round(time.monotonic() - started, 1)
        (task,) = report["tasks"]
        row.update(synthesis=task["status"], pivots=report["pivots"], network_pivots=report["network_pivots"])
        if task["status"] not in ("ok", "partial"):
            return {**row, "stage": "synthesis", "reason": task.get("reason", "")}
        # the sandbox's limits are the task's (`harbor_limits`: history commands may run as long as the agent
        # could, as the oracle's session did), an action's at most ACTION_SECONDS
        limits = harbor_limits(load_task(folder).harbor)
        limits["action_timeout"] = min(limits["action_timeout"], ACTION_SECONDS)
        config = {"docker_shell": limits}
        env = gym.make("pivot/terminal-v0", dataset=str(out), verifiers=["docker_shell"], verifier_config=config)
        env = env.unwrapped
        pivots = list(env.pivots)
    row["sandboxed"] = sum(bool(p.context.get("sandbox")) for p in pivots)
    judged = judged_pivots(pivots)
    row["judgeable"] = len(judged)
    counts: Counter[str] = Counter()
    misses, seconds, candidates = [], 0.0, 0
    for i, pivot in enumerate(spread(judged, max_pivots)):
        variants = {}
        if i < variant_pivots or len(judged) <= variant_pivots:
            variants = {k: v for k, v in adversarial_completions(pivot).items() if k in DESTRUCTIVE}
        texts = [render_completion(pivot.expert, pivot.domain), *variants.values()]
        started = time.monotonic()
        results = env.score(pivot, texts)
        seconds += time.monotonic() - started
        candidates += len(texts)
        if "docker_shell" not in results[0].verdicts:  # decided before the sandbox (regex-chess's 73 KB expert)
            counts["expert_not_judged"] += 1
            why = "; ".join(v.reason for v in results[0].verdicts.values())[:300]
            misses.append({"pivot": pivot.id, "case": "expert not judged", "reason": why})
            continue
        # a variant the chain decided before the sandbox (over the action space) is its chain result
        verdicts = [r.verdicts.get("docker_shell") or r for r in results]
        counts["expert_judged"] += 1
        counts["expert_accepted"] += verdicts[0].accepted
        counts["expert_errors"] += bool(verdicts[0].error)
        counts["destructive"] += len(variants)
        for name, verdict in zip(variants, verdicts[1:], strict=True):
            code = ((getattr(verdict, "details", None) or {}).get("candidate") or {}).get("exit_code")
            inert = verdict.accepted and is_inert(pivot, name, code, "docker")
            counts["destructive_accepted"] += verdict.accepted
            counts["destructive_accepted_inert"] += verdict.accepted and inert
            if verdict.accepted:
                misses.append({"pivot": pivot.id, "case": name, "exit_code": code, "inert": inert})
        if not verdicts[0].accepted:
            misses.append({"pivot": pivot.id, "case": "expert", "reason": (verdicts[0].reason or "")[:600]})
    row.update(counts, misses=misses, seconds_per_candidate=round(seconds / candidates, 2) if candidates else None)
    row["warm_ms"] = warm_latency(judged[-1:]) if judged else {}
    return row


def warm_latency(pivots: list, k: int = 4, epochs: int = 3) -> dict:
    """Milliseconds per candidate on each backend, warm: `k` copies of the expert per batch, the first batch left out.

    Through the backends themselves (`run_group`, as bench/terminal_tasks.py measures TB1's), not the
    verifier, whose cache would answer the repeated candidates.
    """
    from pivot_core import action_commands, history_commands
    from pivot_sandbox import SandboxSpec, docker_backend, namespace_backend

    out: dict = {}
    for name, make in (("docker", docker_backend), ("namespace", namespace_backend)):
        backend, total, n = make(), 0.0, 0
        try:
            for pivot in pivots:
                spec, history = SandboxSpec.from_context(pivot.context), history_commands(pivot)
                for epoch in range(epochs):
                    started = time.monotonic()
                    effects = backend.run_group(spec, history, [action_commands(pivot.expert)] * k)
                    if epoch:  # the first batch pays for the snapshot
                        total, n = total + time.monotonic() - started, n + k
                out[f"{name}_errors"] = sum(isinstance(e, Exception) for e in effects)
        finally:
            backend.close()
        out[name] = round(1000 * total / max(n, 1), 1)
        stats = getattr(backend, "stats", None) or {}
        out[f"{name}_groups_run_by_docker"] = int(stats.get("groups_run_by_docker", 0))
    return out


def pivot_counts(rows: list[dict]) -> dict:
    """Totals of the pivot rows: pivots, sandboxed, expert accepted, destructive accepted, latency medians."""
    keys = ("pivots", "sandboxed", "network_pivots", "judgeable", "expert_judged", "expert_accepted", "expert_errors")
    keys += ("destructive", "destructive_accepted", "destructive_accepted_inert", "expert_not_judged")
    out = {k: sum(r.get(k, 0) for r in rows) for k in keys}
    out["tasks"] = len(rows)
    out["synthesized"] = sum(r.get("synthesis") in ("ok", "partial") for r in rows)
    for name in BACKENDS:
        values = sorted(r["warm_ms"][name] for r in rows if name in (r.get("warm_ms") or {}))
        out[f"warm_ms_median_{name}"] = values[len(values) // 2] if values else None
    return out


def static_row(folder: Path) -> dict:
    """What is known before any build: the base's stand-in, a step refused (another host, multi-stage), test.sh's plan.

    The same checks `task_image` makes before it starts the build container, and the test-run plan's.
    """
    from pivot_sandbox.errors import DockerfileError, TaskError
    from pivot_sandbox.images import dockerfile as df
    from pivot_sandbox.images.access import registry_hosts
    from pivot_sandbox.images.bases import map_base
    from pivot_sandbox.images.build import check_supported
    from pivot_sandbox.tasks.harbor_plan import verifier_plan
    from pivot_sandbox.tasks.oracle_files import without_oracle
    from pivot_sandbox.tasks.terminal_bench import equivalent_instruction, script_hosts

    hosts, row = registry_hosts(), {"task_id": folder.name}
    try:
        task = load_task(folder)
        instructions = df.parse(task.dockerfile, str(task.context / "Dockerfile"))
        row["from"] = next(i for i in instructions if i.keyword == "FROM").args.split()[0]
        stand_in = map_base(row["from"])
        if stand_in is None:
            raise TaskError(f"base image {row['from']!r} has no local equivalent")
        row["stand_in"] = stand_in.tag
        check_supported(instructions)
        instructions = without_oracle(task.dir, task.context, [equivalent_instruction(i) for i in instructions])[0]
        for host, ins in df.foreign_hosts(instructions, hosts):
            raise TaskError(f"{ins.where}: needs {host}, outside the registries")
        for path, host in script_hosts(task, instructions, hosts):
            raise TaskError(f"{path}: needs {host} (run by the Dockerfile), outside the registries")
    except (TaskError, DockerfileError) as e:
        return {**row, "static": "refused", "reason": str(e)}
    plan = verifier_plan(task.dir / "tests", hosts)
    return {**row, "static": "to build", "tests_offline": not plan.problem, "tests_problem": plan.problem}


def static_counts(rows: list[dict]) -> dict:
    """Counts of the static pass: refused before building (by reason), to build, tests offline per plan."""
    return {
        "tasks": len(rows),
        "to_build": sum(r["static"] == "to build" for r in rows),
        "tests_offline_by_plan": sum(bool(r.get("tests_offline")) for r in rows),
        "refused": dict(Counter(_kind(r["reason"]) for r in rows if r["static"] == "refused")),
        "stand_ins": dict(Counter(r.get("stand_in", "none") for r in rows)),
    }


def counts(rows: list[dict]) -> dict:
    """`tasks`, `built`, `verifiable`, `oracle_pass`, `untouched_fail`, `valid` (both) and the reasons."""
    return {
        "tasks": len(rows),
        "built": sum(bool(r.get("built")) for r in rows),
        "verifiable": sum(bool(r.get("verifiable")) for r in rows),
        "oracle_pass": sum(r.get("oracle_reward") is not None and r["oracle_reward"] >= 1.0 for r in rows),
        "untouched_fail": sum(r.get("untouched_reward") == 0.0 for r in rows),
        "valid": sum(r.get("untouched_reward") == 0.0 and (r.get("oracle_reward") or 0.0) >= 1.0 for r in rows),
        "reasons": dict(Counter(f"{r['stage']}: {_kind(r.get('reason', ''))}" for r in rows if r.get("stage"))),
    }


def _kind(reason: str) -> str:
    """A reason with its task-specific head cut, for counting."""
    for marker in ("needs ", "the tests need", "fails here", "exited", "no local equivalent", "multi-stage", "not in"):
        if marker in reason:
            return reason[reason.index(marker) :][:80]
    return reason[:80]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks-dir", type=Path, default=DATA)
    parser.add_argument("--only", default="", help="comma-separated task ids (default: every folder)")
    parser.add_argument("--held-out", default="", help="task ids counted apart (not looked at while developing)")
    parser.add_argument("--out", type=Path, default=Path("/tmp/pivot-harbor-tasks.jsonl"))
    parser.add_argument("--keep", type=int, default=24, help="task images kept (LRU)")
    parser.add_argument("--json", action="store_true", help="print the rows and counts as one JSON object")
    parser.add_argument("--static", action="store_true", help="no build: what is refused before building, and why")
    parser.add_argument("--pivots-of", type=Path, help="rows of an earlier run: measure the pivots of its sound tasks")
    parser.add_argument("--max-pivots", type=int, default=12, help="sandboxed pivots judged per task")
    parser.add_argument("--variant-pivots", type=int, default=3, help="pivots per task whose variants are scored")
    opts = parser.parse_args()
    held = {t for t in opts.held_out.split(",") if t}
    if opts.pivots_of:
        pivots_main(opts, held)
        return
    if opts.static:
        rows = [static_row(f) for f in task_dirs(opts.tasks_dir, [t for t in opts.only.split(",") if t])]
        print(json.dumps({**static_counts(rows), "rows": rows}, indent=None if opts.json else 1))
        return
    rows = []
    with open(opts.out, "w") as out:
        for folder in task_dirs(opts.tasks_dir, [t for t in opts.only.split(",") if t]):
            try:
                row = one_task(folder, opts.keep)
            except Exception as e:  # noqa: BLE001 - one task's failure is its row, the run goes on
                row = {"task_id": folder.name, "stage": "error", "reason": f"{type(e).__name__}: {e}"}
            row["held_out"] = folder.name in held
            rows.append(row)
            out.write(json.dumps(row) + "\n")
            out.flush()
            if not opts.json:
                print(json.dumps(row), flush=True)
    seen = [r for r in rows if not r["held_out"]]
    summary = {**counts(rows), "seen": counts(seen), "held_out": counts([r for r in rows if r["held_out"]])}
    print(json.dumps({**summary, "rows": rows} if opts.json else summary, indent=None if opts.json else 1))


def pivots_main(opts: argparse.Namespace, held: set[str]) -> None:
    """`--pivots-of`: a pivot row per sound task of the earlier rows, then the totals per split."""
    from pivot_core._jsonl import iter_jsonl

    earlier = [r for _, r in iter_jsonl(opts.pivots_of)]
    sound = [r["task_id"] for r in earlier if r.get("untouched_reward") == 0.0 and (r.get("oracle_reward") or 0) >= 1]
    only = [t for t in opts.only.split(",") if t]
    rows = []
    with open(opts.out, "w") as out:
        for task_id in [t for t in sound if not only or t in only]:
            try:
                row = pivot_row(opts.tasks_dir / task_id, opts.max_pivots, opts.variant_pivots)
            except Exception as e:  # noqa: BLE001 - one task's failure is its row, the run goes on
                row = {"task_id": task_id, "stage": "error", "reason": f"{type(e).__name__}: {e}"}
            row["held_out"] = task_id in held
            rows.append(row)
            out.write(json.dumps(row) + "\n")
            out.flush()
            if not opts.json:
                print(json.dumps(row), flush=True)
    summary = {
        **pivot_counts(rows),
        "seen": pivot_counts([r for r in rows if not r["held_out"]]),
        "held_out": pivot_counts([r for r in rows if r["held_out"]]),
    }
    print(json.dumps({**summary, "rows": rows} if opts.json else summary, indent=None if opts.json else 1))


if __name__ == "__main__":
    main()
