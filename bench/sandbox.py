"""Sandbox verification cost: naive (cold container + full replay per candidate) vs snapshot + warm pool.

Both ways run in the same process on the same pivots (>= 5 replayed history commands) with the
same K=16 candidates per pivot and the same parallelism (the backend's default, shown), each through
both transports: the in-container runner (default) and `docker exec`. The pooled way runs several
epochs, as training does, and its first epoch pays for the snapshot. Prints a table (the pooled rows
split into the first and the later epochs), the transport ratios, and, last, `speedup: N.Nx` (naive
time per candidate / pooled time per candidate over all epochs, clean-up included, both through the
default transport).

    python bench/sandbox.py [--pivots 2] [--epochs 3]

`--backends docker,namespace [--json]` compares the sandbox backends instead (issue 27), on the
same pivots in one run: per backend the snapshot build time (`snapshot_ms`, per pivot), the warm
per-candidate latency (`warm_ms`: the epochs after the first) and the all-in one (`all_in_ms`:
snapshots, every epoch and the clean-up over the candidates), then the agreement of their
verdicts (`agreement.candidates` scored by each backend through `docker_shell`, `agreement.differ`
with a different reward: must be 0) on these pivots and on the CI tasks' bundled pivots, with
equivalent rewrites, wrong, destructive and hostile candidates. Prints the machine's load.

The same comparison runs on Terminal-Bench task pivots (`tasks`: the tasks of `TASKS` whose image is
built here, synthesized from /work/shared/data/terminal, or `--tasks-jsonl`): every one replays with
registry access (`replay_access`), so the Docker backend replays and commits each state and the
namespace backend takes its top layer over (`namespace/layer.py`). Per backend `snapshot_ms` (for the
namespace backend: Docker's replay and commit plus the layer copy, split in `docker_replay_ms` and
`layer_copy_ms`), `warm_ms`, `all_in_ms` with `TASK_CANDIDATES`; their verdicts join the agreement
(`agreement.task_candidates`; `delegated_to_docker` counts candidates the namespace backend still
handed to Docker, with the reasons in `delegated_reasons`). Real agents' runs on those tasks
(`agent_runs`: /work/shared/data/terminal/agent_runs converted, sandboxed where their image is built,
the deepest `--agent-pivots` per task and agent) are measured and compared the same way.
`--all-tasks` adds the deepest pivot of every other task whose image is built here to the agreement
(`agreement.other_tasks` names them; `pivot sandbox build-tasks` builds them, 50 of 73 here).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import pivot_envs  # noqa: F401  (imports the package before verifiers_plugins)
from pivot_core import history_commands
from pivot_envs import extract_pivots
from pivot_sandbox import SandboxSpec
from pivot_sandbox.docker.backend import DockerBackend
from pivot_sandbox.images.stock import BUSYBOX_TAG, build_busybox_image
from pivot_tasks import synthesize

TASK = {
    "task_id": "bench-notes",
    "instruction": "Tidy the notes of /app/project.",
    "setup": [
        "mkdir -p project && printf 'alpha TODO one\\nbeta draft\\ngamma TODO two\\ndelta\\n' > project/notes.txt"
    ],
    "solution_commands": [
        "cd project",
        "ls -la",
        "cat notes.txt",
        "grep TODO notes.txt > todo.txt",
        "sed -i 's/draft/final/' notes.txt",
        "cp notes.txt backup.txt",
        "wc -l notes.txt todo.txt",
        "ls",
        "cat todo.txt",
    ],
}
# 16 candidates: rewrites and wrong answers, read-only and writing, as a policy's group would hold
CANDIDATES = [
    "ls",
    "ls -1",
    "ls -la",
    "ls -al",
    "cat todo.txt",
    "cat notes.txt",
    "grep TODO notes.txt",
    "cat notes.txt | grep TODO",
    "wc -l notes.txt todo.txt",
    "wc -l todo.txt",
    "head -n 2 notes.txt",
    "pwd",
    "echo done > done.txt",
    "rm todo.txt",
    "sed -i 's/alpha/ALPHA/' notes.txt",
    "touch new.txt",
]


def pivots_with_history(n: int, min_history: int = 5):
    (row,) = synthesize([TASK], BUSYBOX_TAG)
    assert row["status"] == "ok", row
    found = [p for p in extract_pivots(row["trajectory"]) if len(history_commands(p)) >= min_history]
    return found[:n]


def run(
    backend: DockerBackend, pivots, epochs: int, candidates: list[str] = CANDIDATES
) -> tuple[float, int, list[float]]:
    """Total wall time (clean-up included), candidates run, and the wall time of each epoch."""
    n = 0
    per_epoch = []
    start = time.perf_counter()
    for _ in range(epochs):
        t0 = time.perf_counter()
        for pivot in pivots:
            spec = SandboxSpec.from_context(pivot.context)
            effects = backend.run_group(spec, history_commands(pivot), [[c] for c in candidates])
            assert all(not isinstance(e, Exception) for e in effects), effects
            n += len(effects)
        per_epoch.append(time.perf_counter() - t0)
    backend.close()  # pending removals are part of the cost
    return time.perf_counter() - start, n, per_epoch


# candidates of the agreement check beyond CANDIDATES: state, processes, limits, escapes
HOSTILE = [
    "export PATH=/nowhere",
    "cd /tmp",
    "umask 777",
    "sleep 3 &",
    "(sleep 2; rm -rf /app/*) &",
    "rm -rf /app/*",
    "echo owned > /tmp/owned",
    "yes",
    "dd if=/dev/zero of=big bs=1M count=1024",
    "truncate -s 1G sparse",
    "kill -9 -1",
    "unshare -r id",
    "cat /proc/1/root/etc/hostname",
    "ln -s /etc/passwd link",
    "chmod 600 notes.txt",
    "f(){ f|f& };f",
]
GENERIC = ["ls -la", "ls -al", "pwd", "rm -rf /app/*", "echo x > /app/junk", "export PATH=/nowhere", "sleep 3 &"]
# the Terminal-Bench tasks whose images are built on the bench machine (no more are built here)
TASKS = (
    "hello-world",
    "blind-maze-explorer-5x5",
    "blind-maze-explorer-algorithm",
    "grid-pattern-transform",
    "polyglot-c-py",
    "aimo-airline-departures",
)
TASKS_JSONL = Path("/work/shared/data/terminal/terminal_bench_core_tasks.jsonl")
# 16 candidates any task image runs: reads, rewrites, writes, deletions, shell state
TASK_CANDIDATES = [
    "ls",
    "ls -la",
    "ls -al",
    "pwd",
    "ls -la /app",
    "cat /.pivot/cwd",
    "find /app -maxdepth 2 | sort",
    "du -s /app",
    "echo x > /app/junk",
    "touch /app/new.txt",
    "rm -rf /app/*",
    "cd /tmp",
    "export PATH=/nowhere",
    "head -c 64 /etc/os-release",
    "chmod 700 /app",
    "ls /etc | wc -l",
]


def backend_of(name: str, **config):
    from pivot_sandbox import docker_backend, namespace_backend

    return {"docker": docker_backend, "namespace": namespace_backend}[name](**config)


def latency(name: str, pivots, epochs: int, candidates: list[str] = CANDIDATES) -> dict[str, float]:
    """Snapshot build (ms per pivot), warm and all-in ms per candidate for one fresh backend.

    The namespace backend gets a fresh Docker backend of its own for registry-access states (its
    replay and commit are part of `snapshot_ms`, and it is closed, its snapshot images removed, in
    `all_in_ms`).
    """
    builder = None
    if name == "docker":
        backend = DockerBackend()
    else:
        from pivot_sandbox.namespace.backend import NamespaceBackend

        builder = DockerBackend()
        backend = NamespaceBackend(docker=lambda **_: builder)
    start = time.perf_counter()
    for pivot in pivots:
        backend.snapshot(SandboxSpec.from_context(pivot.context), history_commands(pivot))
    built = time.perf_counter() - start
    _, n, per_epoch = run(backend, pivots, epochs, candidates)
    if builder is not None:
        builder.close()
    total = time.perf_counter() - start
    per = n // epochs
    warm = sum(per_epoch[1:]) / max(1, n - per) if epochs > 1 else per_epoch[0] / per
    out = {
        "snapshot_ms": 1000 * built / len(pivots),
        "first_epoch_ms": 1000 * per_epoch[0] / per,
        "warm_ms": 1000 * warm,
        "all_in_ms": 1000 * total / n,
        "candidates": n,
    }
    taken = backend.stats.get("snapshots_taken_over", 0)
    if taken:
        out["docker_replay_ms"] = backend.stats["docker_replay_ms"] / taken
        out["layer_copy_ms"] = backend.stats["layer_copy_ms"] / taken
        out["snapshots_taken_over"] = taken
    return out


def task_pivots(jsonl: Path, names: tuple[str, ...] = TASKS) -> list:
    """Pivots of the Terminal-Bench tasks in `names` whose image is built here (never builds one)."""
    from pivot_tasks import synthesize

    if not jsonl.is_file():
        return []
    built = built_tasks(names)
    records = [r for r in map(json.loads, jsonl.open()) if r.get("task_id") in built]
    out = []
    for row in synthesize(records, "unused", tasks_dir=jsonl.parent / "tasks"):
        if row["status"] in ("ok", "partial"):
            out += [p for p in extract_pivots(row["trajectory"]) if p.context.get("sandbox")]
    return out


def deepest_per_task(pivots: list) -> dict[str, object]:
    """Each task's pivot with the most history commands (task id -> pivot)."""
    deepest: dict[str, object] = {}
    for p in pivots:
        task = p.context.get("task", {}).get("task_id", p.id)
        if task not in deepest or len(history_commands(p)) > len(history_commands(deepest[task])):
            deepest[task] = p
    return deepest


def built_tasks(names: tuple[str, ...] = TASKS) -> set[str]:
    """The tasks of `names` whose image is built here (tags `pivot-gym/task:<task>-<hash>`)."""
    client = DockerBackend().client
    return set(names) & {
        t.split(":", 1)[1].rsplit("-", 1)[0] for i in client.images.list("pivot-gym/task") for t in i.tags
    }


def agent_run_pivots(runs: Path, tasks_dir: Path, n: int) -> list:
    """Up to `n` sandboxed pivots of real agents' runs on the built tasks: the deepest per (task, agent)."""
    from pivot_core import convert_runs
    from pivot_tasks import sandbox_pivots

    if not runs.is_dir() or n <= 0:
        return []
    built = built_tasks()
    pivots, _ = convert_runs(runs)
    pivots, _ = sandbox_pivots([p for p in pivots if p.context.get("task_id") in built], tasks_dir)
    deepest: dict[tuple[str, str], object] = {}
    for p in pivots:
        if not p.context.get("sandbox") or p.context["sandbox"].get("expert_needs_network"):
            continue
        key = (str(p.context.get("task_id")), p.id.split("/")[0])
        if key not in deepest or len(history_commands(p)) > len(history_commands(deepest[key])):
            deepest[key] = p
    return sorted(deepest.values(), key=lambda p: -len(history_commands(p)))[:n]


def terminus(command: str):
    import json

    from pivot_envs import Message

    keys = {"analysis": "", "plan": "", "commands": [{"keystrokes": command + "\n", "duration": 0.1}]}
    return Message("assistant", json.dumps(keys))


VERDICTS: list[dict] = []  # every verdict of `agreement`, for `--verdicts` (one code version against another)


def agreement(names: list[str], pivots, tasks: list) -> dict:
    """Verdicts of `docker_shell` on each backend for the same candidates: how many, and how many differ.

    A candidate the namespace backend handed to Docker (`details["backend"] == "docker"`) is no
    evidence of agreement: counted in `delegated_to_docker`, not in `candidates`.
    """
    from pivot_envs import load_pivots
    from pivot_envs._env import bundled_paths
    from verifiers_plugins import get_verifier

    ci = [p for p in load_pivots(bundled_paths(["terminal_tasks.jsonl"])[0]) if p.context.get("sandbox")]
    groups = [(p, [p.expert, *map(terminus, CANDIDATES + HOSTILE)]) for p in pivots]
    groups += [(p, [p.expert, *map(terminus, GENERIC)]) for p in ci + tasks]
    scored, differ, reasons_differ, examples, reason_examples = 0, 0, 0, [], []
    delegated, why_delegated, on_tasks = 0, set(), 0
    for pivot, candidates in groups:
        verdicts = {
            n: get_verifier("docker_shell", backend=n, action_timeout=4.0).verify_batch(pivot, candidates)
            for n in names
        }
        for i, candidate in enumerate(candidates):
            rewards = {n: verdicts[n][i].reward for n in names}
            reasons = {n: verdicts[n][i].reason for n in names}
            VERDICTS.extend(
                {"backend": n, "pivot": pivot.id, "i": i, "candidate": candidate.content, "reward": rewards[n]}
                for n in names
            )
            ran_on = {(verdicts[n][i].details or {}).get("backend", n) for n in names}
            if "namespace" in names and ran_on == {"docker"}:
                delegated += 1
                why_delegated.add(str(verdicts["namespace"][i].details.get("backend_why", ""))[:200])
                continue
            scored += 1
            on_tasks += SandboxSpec.from_context(pivot.context).replay_access
            if len(set(rewards.values())) > 1:
                differ += 1
                examples.append({"pivot": pivot.id, "candidate": candidate.content[:120], "reasons": reasons})
            if len(set(reasons.values())) > 1:
                reasons_differ += 1
                reason_examples.append({"pivot": pivot.id, "candidate": candidate.content[:120], "reasons": reasons})
    return {
        "candidates": scored,
        "replay_access_candidates": on_tasks,
        "delegated_to_docker": delegated,
        "delegated_reasons": sorted(why_delegated),
        "task_pivots": len(tasks),
        "differ": differ,
        "reasons_differ": reasons_differ,
        "pivots": len(groups),
        "ci_pivots": len(ci),
        "examples": examples[:10],
        "reason_examples": reason_examples[:10],
    }


def compare_backends(names: list[str], args) -> None:
    import json

    from pivot_sandbox import usable_backends

    usable = usable_backends()
    for name in names:
        if usable.get(name, "unknown backend") is not None:
            raise SystemExit(f"backend {name}: {usable.get(name, 'unknown backend')}")
    build_busybox_image(DockerBackend().client)
    pivots = pivots_with_history(args.pivots)
    tasks = task_pivots(Path(args.tasks_jsonl)) if args.tasks_jsonl else []
    runs = agent_run_pivots(Path(args.agent_runs), Path(args.tasks_jsonl).parent / "tasks", args.agent_pivots)
    # latency on the deepest state of each task (the most history replayed), as a GRPO group would meet it
    deepest = deepest_per_task(tasks)
    others: list = []
    if args.all_tasks and args.tasks_jsonl:  # the agreement on every other task built here too (deepest pivot)
        jsonl = Path(args.tasks_jsonl)
        every = tuple(r["task_id"] for r in map(json.loads, jsonl.open()) if r.get("task_id") not in TASKS)
        others = list(deepest_per_task(task_pivots(jsonl, every)).values())
    load_before = os.getloadavg()
    out: dict = {
        "pivots": len(pivots),
        "history_commands": [len(history_commands(p)) for p in pivots],
        "k": len(CANDIDATES),
        "epochs": args.epochs,
        "cores": os.cpu_count(),
        "backends": {name: latency(name, pivots, args.epochs) for name in names},
    }
    if "docker" in out["backends"] and "namespace" in out["backends"]:
        out["ratio_warm"] = out["backends"]["docker"]["warm_ms"] / out["backends"]["namespace"]["warm_ms"]
        out["ratio_all_in"] = out["backends"]["docker"]["all_in_ms"] / out["backends"]["namespace"]["all_in_ms"]
    if deepest:
        chosen = list(deepest.values())
        out["tasks"] = {
            "pivots": len(chosen),
            "images": sorted({SandboxSpec.from_context(p.context).image for p in chosen}),
            "history_commands": [len(history_commands(p)) for p in chosen],
            "k": len(TASK_CANDIDATES),
            "backends": {name: latency(name, chosen, args.epochs, TASK_CANDIDATES) for name in names},
        }
    if runs:
        out["agent_runs"] = {
            "pivots": len(runs),
            "ids": [p.id for p in runs],
            "history_commands": [len(history_commands(p)) for p in runs],
            "k": len(TASK_CANDIDATES),
        }
        try:
            out["agent_runs"]["backends"] = {n: latency(n, runs, args.epochs, TASK_CANDIDATES) for n in names}
        except Exception as e:  # noqa: BLE001 - a state that does not build: said, and the agreement still runs
            out["agent_runs"]["error"] = f"{type(e).__name__}: {e}"[:300]
    out["agreement"] = agreement(names, pivots, tasks + runs + others)
    out["agreement"]["other_tasks"] = sorted(p.context.get("task", {}).get("task_id", p.id) for p in others)
    out["load"] = {"before": load_before, "after": os.getloadavg()}
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"cores: {out['cores']}  load before {load_before}  after {out['load']['after']}")
    print(f"{'backend':<12}{'snapshot ms':>12}{'1st epoch ms':>14}{'warm ms':>10}{'all-in ms':>11}{'candidates':>12}")
    for name, row in out["backends"].items():
        print(
            f"{name:<12}{row['snapshot_ms']:>12.0f}{row['first_epoch_ms']:>14.1f}{row['warm_ms']:>10.1f}"
            f"{row['all_in_ms']:>11.1f}{row['candidates']:>12}"
        )
    if "ratio_warm" in out:
        print(f"docker / namespace: warm {out['ratio_warm']:.1f}x, all-in {out['ratio_all_in']:.1f}x")
    for part in ("tasks", "agent_runs"):
        if "backends" not in out.get(part, {}):
            continue
        t = out[part]
        print(f"{part} pivots (replay_access): {t['pivots']}, history commands {t['history_commands']}")
        for name, row in t["backends"].items():
            split = (
                f"  (docker replay {row['docker_replay_ms']:.0f} + copy {row['layer_copy_ms']:.0f})"
                if "layer_copy_ms" in row
                else ""
            )
            print(
                f"{name:<12}{row['snapshot_ms']:>12.0f}{row['first_epoch_ms']:>14.1f}{row['warm_ms']:>10.1f}"
                f"{row['all_in_ms']:>11.1f}{row['candidates']:>12}{split}"
            )
    a = out["agreement"]
    print(
        f"agreement: {a['candidates']} candidates on {a['pivots']} pivots ({a['replay_access_candidates']} on "
        f"replay_access states), {a['differ']} verdicts differ, {a['delegated_to_docker']} handed to Docker"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pivots", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=3, help="epochs of the pooled way (naive costs the same each)")
    parser.add_argument("--backends", default="", help="compare these sandbox backends (docker,namespace)")
    parser.add_argument("--json", action="store_true", help="with --backends: one JSON object")
    parser.add_argument("--agent-runs", default="/work/shared/data/terminal/agent_runs", help="real agents' runs")
    parser.add_argument(
        "--agent-pivots", type=int, default=6, help="agent-run pivots measured (deepest per task/agent)"
    )
    parser.add_argument(
        "--tasks-jsonl",
        default=str(TASKS_JSONL),
        help="with --backends: Terminal-Bench tasks to synthesize ('' for none)",
    )
    parser.add_argument(
        "--all-tasks",
        action="store_true",
        help="with --backends: the agreement also on the deepest pivot of every other task built here",
    )
    parser.add_argument(
        "--verdicts", default="", help="with --backends: write every agreement verdict to this JSONL file"
    )
    args = parser.parse_args()
    if args.backends:
        compare_backends([b.strip() for b in args.backends.split(",") if b.strip()], args)
        if args.verdicts:
            Path(args.verdicts).write_text("".join(json.dumps(v) + "\n" for v in VERDICTS))
        return
    probe = DockerBackend(snapshots=False)
    build_busybox_image(probe.client)
    pivots = pivots_with_history(args.pivots)
    hist = [len(history_commands(p)) for p in pivots]
    # each way through both transports: the in-container runner (the default) and docker exec
    results: dict[tuple[str, bool], tuple[float, int, list[float], DockerBackend]] = {}
    for runner in (False, True):
        naive = DockerBackend(snapshots=False, runner=runner)
        results["naive", runner] = (*run(naive, pivots, 1), naive)
        pooled = DockerBackend(snapshots=True, runner=runner)  # pool sized by the parallelism, refilled meanwhile
        results["pooled", runner] = (*run(pooled, pivots, args.epochs), pooled)
    default = probe.transport == "runner"
    probe.close()
    print(
        f"cores: {os.cpu_count()}   threads: {probe.parallelism}   pivots: {len(pivots)} "
        f"(history commands: {hist})   K = {len(CANDIDATES)}   default transport: {probe.transport}"
    )
    print(f"{'mode':<36}{'transport':>13}{'epochs':>7}{'candidates':>12}{'wall s':>9}{'ms / candidate':>16}")

    def ms(way: str, runner: bool) -> float:
        s, n, _, _ = results[way, runner]
        return 1000 * s / n

    for runner in (False, True):
        transport = "runner" if runner else "docker exec"
        naive_s, naive_n, _, _ = results["naive", runner]
        pooled_s, pooled_n, epochs, _ = results["pooled", runner]
        per_epoch = pooled_n // args.epochs
        rows = [
            ("naive (cold + full replay)", 1, naive_n, naive_s),
            ("snapshot + pool, all (+clean-up)", args.epochs, pooled_n, pooled_s),
            ("  first epoch (builds snapshots)", 1, per_epoch, epochs[0]),
        ]
        if args.epochs > 1:
            rows.append(("  later epochs (warm)", args.epochs - 1, pooled_n - per_epoch, sum(epochs[1:])))
        for name, e, n, s in rows:
            print(f"{name:<36}{transport:>13}{e:>7}{n:>12}{s:>9.2f}{1000 * s / n:>16.0f}")
    stats = dict(results["pooled", default][3].stats)
    print("pooled counters: " + ", ".join(f"{k}={stats[k]}" for k in sorted(stats)))
    print(
        f"runner vs docker exec: naive {ms('naive', False) / ms('naive', True):.1f}x, "
        f"pooled {ms('pooled', False) / ms('pooled', True):.1f}x"
    )
    print(f"snapshot + pool, runner vs naive, docker exec: {ms('naive', False) / ms('pooled', True):.1f}x")
    # the headline compares the two ways through the same (default) transport
    print(f"speedup: {ms('naive', default) / ms('pooled', default):.1f}x")


if __name__ == "__main__":
    main()
