"""Profiling overhead vs raw generation, and the reward cache's speed-up on a rerun.

    python bench/profile.py [--model DIR] [--k 4] [--limit 25]

1. Raw generation: `backend.generate` of K completions for every pivot, chunked as the profiler does.
2. Profiling: `profile_pivots` on the same pivots, seed and chunking (generation + verification +
   cache writes + JSONL). Overhead = (profiling - raw) / raw; target <= 10 %.
3. Cache speed-up: verification seconds of a cold run vs a rerun that reads every verdict from the
   cache, for the cheap tool-use chain and for a chain with `llm_judge` against a loopback judge
   server (an HTTP round trip per question, like a local vLLM judge). Target >= 20x.
Without --model a tiny policy is built and SFT'd first (about a minute on 2 cores).
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path and its name shadows the stdlib
# `profile` module that torch imports (through cProfile); drop that folder before any import.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import gymnasium as gym  # noqa: E402

import pivot_envs  # noqa: F401, E402
from pivot_demo.tiny_model import build_test_policy  # noqa: E402
from trainers.backends import TransformersBackend  # noqa: E402
from trainers.backends._server import ServerThread  # noqa: E402
from trainers.profiling import ProfileConfig, profile_pivots  # noqa: E402
from verifiers_plugins import RewardCache  # noqa: E402


def judge_app():
    from fastapi import FastAPI

    app = FastAPI()

    @app.post("/v1/chat/completions")
    def complete(body: dict):
        doc = json.loads(body["messages"][1]["content"])
        same = doc["action_A"].strip() == doc["action_B"].strip()
        verdict = {"verdict": "EQUIVALENT" if same else "DIFFERENT", "reason": "compared"}
        return {"choices": [{"index": 0, "message": {"role": "assistant", "content": json.dumps(verdict)}}]}

    return app


def timed_profile(env, backend, out, config):
    t = time.perf_counter()
    summary = profile_pivots(env, backend, out, config)
    return time.perf_counter() - t, summary


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", help="a TinyPolicy folder built by build_test_policy (default: build one)")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--limit", type=int, default=25)
    ap.add_argument("--repeats", type=int, default=3, help="alternating raw/profiling runs; the best of each")
    ap.add_argument("--quick", action="store_true", help="10 pivots, 2 repeats")
    args = ap.parse_args()
    if args.quick:
        args.limit, args.repeats = min(args.limit, 10), min(args.repeats, 2)
    work = Path(tempfile.mkdtemp(prefix="bench_profile_"))
    policy = build_test_policy(args.model or work / "policy")
    backend = TransformersBackend(policy.backend_config())
    config = ProfileConfig(
        k=args.k, max_new_tokens=policy.max_new_tokens, temperature=policy.temperature, chunk_size=8, limit=args.limit
    )
    pivots = list(gym.make("pivot/tool-use-v0").unwrapped.pivots)[: args.limit]

    backend.generate(pivots[:2], 1, config.sampling("warm-up"))  # first-call allocations out of the timings
    # Alternate the two ways and keep each one's best time: on a shared machine a single pair of
    # runs mostly measures the neighbours. Every profiling repeat starts from an empty cache.
    raws, profs = [], []
    for rep in range(args.repeats):
        t = time.perf_counter()
        for start in range(0, len(pivots), config.chunk_size):
            chunk = pivots[start : start + config.chunk_size]
            backend.generate(chunk, config.k, config.sampling(chunk[0].id))
        raws.append(time.perf_counter() - t)
        env = gym.make("pivot/tool-use-v0", reward_cache=RewardCache(work / f"cheap{rep}.sqlite")).unwrapped
        seconds, summary = timed_profile(env, backend, work / f"p{rep}.jsonl", config)
        profs.append((seconds, summary))
    raw = min(raws)
    prof_s, cold = min(profs, key=lambda x: x[0])
    _, warm = timed_profile(env, backend, work / "p_rerun.jsonl", config)

    with ServerThread(judge_app()) as server:
        judge_cfg = {"llm_judge": {"url": server.url}}
        jenv = gym.make(
            "pivot/tool-use-v0",
            verifiers=["turn_kind", "llm_judge"],
            verifier_config=judge_cfg,
            reward_cache=RewardCache(work / "judge.sqlite"),
        ).unwrapped
        _, jcold = timed_profile(jenv, backend, work / "j1.jsonl", config)
        _, jwarm = timed_profile(jenv, backend, work / "j2.jsonl", config)

    n = len(pivots) * args.k
    print(f"pivots {len(pivots)}, K {args.k}, completions {n}, best of {args.repeats}, policy {backend.policy_id}")
    print(f"{'measure':46s} {'seconds':>9s}")
    print(f"{'raw generation (same K completions)':46s} {raw:9.3f}")
    print(f"{'profiling (generate + verify + cache + write)':46s} {prof_s:9.3f}")
    print(f"{'  of which generation':46s} {cold.generate_seconds:9.3f}")
    print(f"{'  of which verification (cold cache)':46s} {cold.verify_seconds:9.3f}")
    print(
        f"{'  rest (guard, JSONL, fsync, bookkeeping)':46s} {prof_s - cold.generate_seconds - cold.verify_seconds:9.3f}"
    )
    print(f"profiling overhead vs raw generation: {100 * (prof_s - raw) / raw:+.1f} % (target <= 10 %)")
    print()
    ratios = {}
    lines = []
    for name, c, w in (("turn_kind + llm_judge", jcold, jwarm), ("tool-use (cheap verifiers)", cold, warm)):
        ratios[name] = c.verify_seconds / w.verify_seconds if w.verify_seconds else float("inf")
        lines.append(
            f"{name:28s} {c.verify_seconds:14.4f} {w.verify_seconds:14.4f} {ratios[name]:8.1f}x "
            f"{w.cache_hits:5d} {w.cache_misses:6d}"
        )
    print(f"cache speed-up on rerun (judge chain): {ratios['turn_kind + llm_judge']:.1f}x (target >= 20x)")
    print(f"{'chain':28s} {'cold verify s':>14s} {'warm verify s':>14s} {'ratio':>9s} {'hits':>5s} {'misses':>6s}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
