"""Sandbox verification cost: naive (cold container + full replay per candidate) vs snapshot + warm pool.

Both ways run in the same process on the same pivots (>= 5 replayed history commands) with the
same K=16 candidates per pivot and the same parallelism (the backend's default, shown), each through
both transports: the in-container runner (default) and `docker exec`. The pooled way runs several
epochs, as training does, and its first epoch pays for the snapshot. Prints a table (the pooled rows
split into the first and the later epochs), the transport ratios, and, last, `speedup: N.Nx` (naive
time per candidate / pooled time per candidate over all epochs, clean-up included, both through the
default transport).

    python bench/sandbox.py [--pivots 2] [--epochs 3]
"""

from __future__ import annotations

import argparse
import os
import time

import pivot_envs  # noqa: F401  (imports the package before verifiers_plugins)
from pivot_core import history_commands
from pivot_envs import extract_pivots
from pivot_sandbox import SandboxSpec
from pivot_sandbox._docker import DockerBackend
from pivot_sandbox._images import BUSYBOX_TAG, build_busybox_image
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


def run(backend: DockerBackend, pivots, epochs: int) -> tuple[float, int, list[float]]:
    """Total wall time (clean-up included), candidates run, and the wall time of each epoch."""
    n = 0
    per_epoch = []
    start = time.perf_counter()
    for _ in range(epochs):
        t0 = time.perf_counter()
        for pivot in pivots:
            spec = SandboxSpec.from_context(pivot.context)
            effects = backend.run_group(spec, history_commands(pivot), [[c] for c in CANDIDATES])
            assert all(not isinstance(e, Exception) for e in effects), effects
            n += len(effects)
        per_epoch.append(time.perf_counter() - t0)
    backend.close()  # pending removals are part of the cost
    return time.perf_counter() - start, n, per_epoch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pivots", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=3, help="epochs of the pooled way (naive costs the same each)")
    args = parser.parse_args()
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
