"""Reset latency and memory of a large pivot dataset: JSONL (loaded into a list) vs Parquet (lazy).

Writes N generated tool-use pivots (default 1,000,000) both ways into a temp folder, then measures
each format in a fresh child process: time to build the env, resident memory after it, and the
median latency of `reset()` (random pivot) and `reset(options={"pivot_id": ...})`.

    python bench/dataset_scale.py [--pivots N] [--resets R] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# bench/ itself must not be importable: bench/profile.py would shadow the stdlib `profile` (cProfile).
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))


def template_json() -> str:
    from pivot_envs import Message, Pivot, ToolCall

    tool = {
        "type": "function",
        "function": {
            "name": "get_reservation_details",
            "description": "Get a reservation.",
            "parameters": {
                "type": "object",
                "required": ["reservation_id"],
                "properties": {"reservation_id": {"type": "string"}},
            },
        },
    }
    pivot = Pivot(
        id="@ID@",
        domain="tool-use",
        history=(
            Message("system", "You are an airline customer service agent. Follow the policy. " * 3),
            Message("user", "Hi, I want to check reservation @ID@ before my trip next week."),
        ),
        expert=Message("assistant", None, (ToolCall("get_reservation_details", '{"reservation_id": "@ID@"}', "c0"),)),
        tools=(tool,),
    )
    return json.dumps(pivot.to_json())


def generate(n: int, folder: Path) -> tuple[Path, Path]:
    from pivot_core._parquet import ParquetPivotWriter

    text = template_json()
    jsonl, parquet = folder / "pivots.jsonl", folder / "pivots.parquet"
    with jsonl.open("w") as out, ParquetPivotWriter(parquet) as writer:
        for start in range(0, n, 100_000):
            ids = [f"gen/{i}#2" for i in range(start, min(n, start + 100_000))]
            rows = [text.replace("@ID@", i) for i in ids]
            out.write("\n".join(rows) + "\n")
            writer.write_rows(ids, ["tool-use"] * len(ids), rows)
    return jsonl, parquet


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def child(path: str, n: int, resets: int) -> None:
    import gymnasium as gym
    import numpy as np

    import pivot_envs  # noqa: F401

    base = rss_mb()
    if path.endswith(".parquet"):
        import pyarrow.parquet  # noqa: F401  (the library's own import, reported apart from the data)
    lib_mb = rss_mb() - base
    # Build the env once on its small bundled sample so the verifier stack's imports are paid
    # before the baseline: the RSS reported is what the dataset itself costs.
    gym.make("pivot/tool-use-v0").reset(seed=0)
    base = rss_mb()
    t0 = time.perf_counter()
    env = gym.make("pivot/tool-use-v0", dataset=path)
    env.reset(seed=0)
    open_s = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    lat, lat_id = [], []
    for _ in range(resets):
        t = time.perf_counter()
        env.reset()
        lat.append(time.perf_counter() - t)
    for i in rng.integers(0, n, resets):
        t = time.perf_counter()
        env.reset(options={"pivot_id": f"gen/{i}#2"})
        lat_id.append(time.perf_counter() - t)
    print(
        json.dumps(
            {
                "open_s": open_s,
                "rss_mb": rss_mb() - base,
                "lib_mb": lib_mb,
                "reset_ms": statistics.median(lat) * 1e3,
                "reset_id_ms": statistics.median(lat_id[1:]) * 1e3,
                "first_id_ms": lat_id[0] * 1e3,
            }
        )
    )


def measure(path: Path, n: int, resets: int) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(path), "--pivots", str(n), "--resets", str(resets)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(n: int, resets: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="pivot-bench-") as tmp:
        jsonl, parquet = generate(n, Path(tmp))
        sizes = {"jsonl_mb": jsonl.stat().st_size / 1e6, "parquet_mb": parquet.stat().st_size / 1e6}
        return {"pivots": n, **sizes, "jsonl": measure(jsonl, n, resets), "parquet": measure(parquet, n, resets)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--pivots", type=int, default=1_000_000)
    ap.add_argument("--resets", type=int, default=300)
    ap.add_argument("--child")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.child:
        child(args.child, args.pivots, args.resets)
        return
    r = run(args.pivots, args.resets)
    if args.json:
        print(json.dumps(r))
        return
    j, p = r["jsonl"], r["parquet"]
    print(f"{r['pivots']:,} pivots: JSONL {r['jsonl_mb']:.0f} MB, Parquet {r['parquet_mb']:.0f} MB on disk")
    print(f"{'':22}{'JSONL (list)':>14}{'Parquet (lazy)':>16}{'ratio':>8}")
    for key, label in (
        ("open_s", "env build (s)"),
        ("rss_mb", "RSS of the data (MB)"),
        ("reset_ms", "reset (ms, median)"),
        ("reset_id_ms", "reset by id (ms)"),
    ):
        print(f"{label:22}{j[key]:>14.3f}{p[key]:>16.3f}{j[key] / max(p[key], 1e-9):>7.1f}x")
    print(
        f"first reset by id (Parquet builds its sorted id index): {p['first_id_ms']:.0f} ms; "
        f"RSS is the dataset's own (after the env's imports); pyarrow's import adds {p['lib_mb']:.0f} MB"
    )


if __name__ == "__main__":
    main()
