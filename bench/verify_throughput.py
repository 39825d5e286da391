"""Verifier throughput on the real bundled rows: the envs' cheap verifier chains vs a difflib baseline.

For every bundled pivot of the four domains, scores five candidate completions (the expert's own
turn, a one-character edit of it, its first half, a generic reply, and a shell command) with
(a) the domain's default verifier chain (parse + gates + acceptors, batched per pivot) and
(b) `difflib.SequenceMatcher(candidate, expert).ratio() >= 0.8`, the string-match baseline.
Both run single-threaded in this process, so verdicts/s is per core.

    python bench/verify_throughput.py [--seconds S] [--json]
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
import time
from pathlib import Path

# bench/ itself must not be importable: bench/profile.py would shadow the stdlib `profile` (cProfile).
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ENV_IDS = ("pivot/tool-use-v0", "pivot/swe-v0", "pivot/terminal-v0", "pivot/browse-v0")


def candidates(expert: str) -> list[str]:
    k = len(expert) // 2
    edited = expert[:k] + ("x" if expert[k : k + 1] != "x" else "y") + expert[k + 1 :]
    return [expert, edited, expert[:k], "Sure, I can help with that. Could you tell me more?", "ls -la"]


def groups() -> list[tuple[object, str, str, list[str]]]:
    import gymnasium as gym

    import pivot_envs

    out = []
    for env_id in ENV_IDS:
        env = gym.make(env_id).unwrapped
        for pivot in env.pivots:
            expert = pivot_envs.render_completion(pivot.expert, pivot.domain)
            out.append((env, pivot.id, expert, candidates(expert)))
    return out


def timed(fn, seconds: float) -> tuple[float, object]:
    """Repeat `fn` until `seconds` pass; (calls per second, last result)."""
    n, start = 0, time.perf_counter()
    while True:
        result = fn()
        n += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return n / elapsed, result


def run(seconds: float = 2.0) -> dict:
    data = groups()
    verdicts_per_pass = sum(len(c) for *_, c in data)

    def chain_pass():
        return [[r.accepted for r in env.score(env.pivot(pid), comps)] for env, pid, _, comps in data]

    def difflib_pass():
        return [
            [difflib.SequenceMatcher(None, c, expert).ratio() >= 0.8 for c in comps] for _, _, expert, comps in data
        ]

    chain_rate, chain_out = timed(chain_pass, seconds)
    diff_rate, diff_out = timed(difflib_pass, seconds)
    flat_chain = [a for g in chain_out for a in g]
    flat_diff = [a for g in diff_out for a in g]
    agree = sum(a == b for a, b in zip(flat_chain, flat_diff, strict=True)) / len(flat_chain)
    return {
        "pivots": len(data),
        "verdicts_per_pass": verdicts_per_pass,
        "chain_verdicts_per_s": chain_rate * verdicts_per_pass,
        "difflib_verdicts_per_s": diff_rate * verdicts_per_pass,
        "chain_accept_rate": sum(flat_chain) / len(flat_chain),
        "difflib_accept_rate": sum(flat_diff) / len(flat_diff),
        "agreement": agree,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=2.0, help="time each way for at least this long")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    r = run(args.seconds)
    if args.json:
        print(json.dumps(r))
        return
    print(f"{r['pivots']} real pivots x 5 candidates, single thread")
    print(f"{'':24}{'chain':>12}{'difflib':>12}{'ratio':>8}")
    print(
        f"{'verdicts/s/core':24}{r['chain_verdicts_per_s']:>12.0f}{r['difflib_verdicts_per_s']:>12.0f}"
        f"{r['chain_verdicts_per_s'] / r['difflib_verdicts_per_s']:>7.2f}x"
    )
    print(f"{'accept rate':24}{r['chain_accept_rate']:>12.2f}{r['difflib_accept_rate']:>12.2f}")
    print(f"the two agree on {r['agreement']:.0%} of verdicts")


if __name__ == "__main__":
    main()
