"""Benchmark: `tool_exec` on GRPO groups (K candidates per pivot), prefix cache vs replay per candidate.

    python bench/tool_exec.py [--k 16] [--limit N] [--min-history N] [--data FILE]

Both ways score the same candidates with the same comparison; they differ only in how the
state at the pivot is obtained:
- cached: `ToolExec.verify_batch` (state from the prefix cache, shared by the group through
  copy-on-write forks; the expert's effect computed once per group);
- replay: for every candidate, replay the history's calls from the initial state, then execute
  the expert and the candidate (what a verifier without the cache would do).
Pivots are visited in dataset order, as a profiling pass would. Times are process CPU time
(the machines are shared; wall time would measure the neighbours). Prints a table with the
per-candidate latency of each way and their ratio.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from pivot_envs import Message, ToolCall, load_pivots
from pivot_tool_worlds import replay_messages, tau_airline
from pivot_tool_worlds._effects import compare_effects, execute_turn
from pivot_tool_worlds._tau_airline import _bundled
from verifiers_plugins.builtin.tool_exec import ToolExec

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "tool_use" / "tau_bench_airline_gpt4o.jsonl"


def candidates(expert: Message, k: int) -> list[Message]:
    """K distinct candidates: the expert call, its arguments reordered, then one argument changed per variant.

    Distinct on purpose: `tool_exec` executes identical candidates once, which would flatter the cache.
    """
    call = expert.tool_calls[0]
    args = call.parsed_arguments() if isinstance(call.parsed_arguments(), dict) else {}
    variants = [args, dict(reversed(list(args.items())))]
    keys = list(args) or ["extra"]
    for i in range(2, k):
        key = keys[i % len(keys)]
        value = args.get(key)
        changed = value + i if isinstance(value, (int, float)) and not isinstance(value, bool) else f"{value}{i}"
        variants.append({**args, key: changed})
    return [
        Message("assistant", tool_calls=(ToolCall(call.name, json.dumps(v), f"c{i}"),))
        for i, v in enumerate(variants[:k])
    ]


def run_cached(pivots, groups) -> tuple[float, int]:
    verifier = ToolExec()
    accepted = 0
    start = time.process_time()
    for pivot, group in zip(pivots, groups, strict=True):
        accepted += sum(v.accepted for v in verifier.verify_batch(pivot, group))
    return time.process_time() - start, accepted


def run_replay(pivots, groups, world) -> tuple[float, int]:
    accepted = 0
    start = time.process_time()
    for pivot, group in zip(pivots, groups, strict=True):
        for action in group:
            _, state = replay_messages(world, pivot.history)
            expert = execute_turn(world, state, pivot.expert.tool_calls)
            got = execute_turn(world, state, action.tool_calls)
            accepted += compare_effects(world, expert, got, 0.6) is None
    return time.process_time() - start, accepted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--limit", type=int, default=0, help="Use only the first N tool-call pivots (0: all).")
    parser.add_argument(
        "--min-history",
        type=int,
        default=0,
        help="Keep only pivots with at least this many tool calls in their history.",
    )
    parser.add_argument(
        "--data", default=str(SHARED if SHARED.exists() else _bundled("tool_use_tau_airline_exec.jsonl"))
    )
    args = parser.parse_args()
    pivots = [p for p in load_pivots(args.data) if p.expert.tool_calls and p.context.get("world")]
    pivots = [p for p in pivots if sum(len(m.tool_calls) for m in p.history) >= args.min_history]
    pivots = pivots[: args.limit] if args.limit else pivots
    groups = [candidates(p.expert, args.k) for p in pivots]
    n = len(pivots) * args.k
    history_calls = sum(len(m.tool_calls) for p in pivots for m in p.history) / len(pivots)
    world = tau_airline()
    world.initial_state()  # load the database before timing either way
    cached_s, cached_ok = run_cached(pivots, groups)
    replay_s, replay_ok = run_replay(pivots, groups, world)
    assert cached_ok == replay_ok, (cached_ok, replay_ok)  # same decisions, only the state path differs
    print(f"data: {args.data}\nworld db: {world.description}")
    print(
        f"pivots: {len(pivots)}, K={args.k}, candidates: {n}, accepted: {cached_ok}, "
        f"mean history tool calls per pivot: {history_calls:.1f}\n"
    )
    print("| way | total CPU s | per candidate (us) |\n|---|---|---|")
    print(f"| prefix cache + copy-on-write (verify_batch) | {cached_s:.3f} | {cached_s / n * 1e6:.1f} |")
    print(f"| replay from initial state per candidate | {replay_s:.3f} | {replay_s / n * 1e6:.1f} |")
    print(f"\nratio (replay / cached): {replay_s / cached_s:.1f}x")


if __name__ == "__main__":
    main()
