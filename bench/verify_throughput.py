"""Verifier throughput on the real bundled rows: the envs' cheap chains vs a bare static comparison.

For every bundled pivot of the four domains without a sandbox context, scores five candidate
completions (the expert's own turn, a one-character edit of it, its first half, a generic reply,
and a shell command) with
(a) the domain's default chain without its sandbox and judge verifiers, through `env.score` (the
    one scoring path: parse, gates, acceptors, batched per pivot, each call under its timeout), and
(b) a bare static comparison of the same kind written here: decode the completion (Hermes
    `<tool_call>` JSON, Terminus JSON, or text), then compare tool names and arguments by value,
    or the normalised commands or text, with the expert's.
Both run single-threaded in this process on the same rows, so verdicts/s is per core; the ratio
is what to read on a noisy machine.

    python bench/verify_throughput.py [--seconds S] [--json] [--domains] [--stages] [--profile N]

The last line of the table is `chain/bare: N.NNx`; `--json` prints `chain_verdicts_per_s`,
`bare_verdicts_per_s` and `ratio`. `--domains` adds the same two figures per domain (each timed
alone, in the same process); `--stages` adds where a chain verdict's time goes (microseconds per
verdict: parsing, each verifier's calls as the chain makes them, and the rest, which is mostly
the chain's own bookkeeping); `--profile N` prints the N functions of one chain pass with the
most time of their own (cProfile, to stderr).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

# bench/ itself must not be importable: bench/profile.py would shadow the stdlib `profile` (cProfile).
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ENV_IDS = ("pivot/tool-use-v0", "pivot/swe-v0", "pivot/terminal-v0", "pivot/browse-v0")
_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


def candidates(expert: str) -> list[str]:
    k = len(expert) // 2
    edited = expert[:k] + ("x" if expert[k : k + 1] != "x" else "y") + expert[k + 1 :]
    return [expert, edited, expert[:k], "Sure, I can help with that. Could you tell me more?", "ls -la"]


def cheap_envs() -> list:
    """Each domain's env with its default chain minus the verifiers that are not cheap."""
    import gymnasium as gym

    from verifiers_plugins import get_verifier, verifier_meta

    envs = []
    for env_id in ENV_IDS:
        default = gym.make(env_id).unwrapped
        names = [n for n in default.chain.names if verifier_meta(get_verifier(n))["cost"] == "cheap"]
        envs.append(gym.make(env_id, verifiers=names).unwrapped)
    return envs


def groups() -> list[tuple[object, object, str, list[str]]]:
    import pivot_envs

    out = []
    for env in cheap_envs():
        for pivot in env.pivots:
            if pivot.context.get("sandbox"):
                continue
            expert = pivot_envs.render_completion(pivot.expert, pivot.domain)
            out.append((env, pivot, expert, candidates(expert)))
    return out


# -- the bare static comparison -------------------------------------------------------------


def _value(v):
    """Numbers by value (50 == 50.0), containers recursively."""
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, list):
        return [_value(x) for x in v]
    if isinstance(v, dict):
        return {k: _value(x) for k, x in v.items()}
    return v


def bare_action(text: str):
    """("calls", [(name, args)]) | ("commands", [...]) | ("text", str): a completion decoded once."""
    calls = []
    for block in _TOOL_CALL.findall(text):
        try:
            obj = json.loads(block)
        except ValueError:
            return ("text", " ".join(text.split()))
        if isinstance(obj, dict):
            args = obj.get("arguments", {})
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except ValueError:
                    args = None
            calls.append((obj.get("name"), _value(args)))
    if calls:
        return ("calls", calls)
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            obj = json.loads(stripped)
        except ValueError:
            obj = None
        if isinstance(obj, dict) and isinstance(obj.get("commands"), list):
            keys = [c.get("keystrokes", "") for c in obj["commands"] if isinstance(c, dict)]
            return ("commands", [" ".join(str(k).split()) for k in keys])
    return ("text", " ".join(text.split()).casefold())


def bare_accept(expert, candidate: str) -> bool:
    """Same kind, same tool names, each argument equal by value; or equal normalised commands / text."""
    got = bare_action(candidate)
    if got[0] != expert[0]:
        return False
    if got[0] == "calls":
        if len(got[1]) != len(expert[1]):
            return False
        return all(gn == en and ga == ea for (gn, ga), (en, ea) in zip(got[1], expert[1], strict=True))
    return got[1] == expert[1]


def timed(fn, seconds: float) -> tuple[float, object]:
    """Repeat `fn` until `seconds` pass; (calls per second, last result)."""
    n, start = 0, time.perf_counter()
    while True:
        result = fn()
        n += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return n / elapsed, result


def passes(data: list) -> tuple:
    """(one chain pass, one bare pass) over `data`'s groups, each returning the accept decisions."""

    def chain_pass():
        return [[r.accepted for r in env.score(pivot, comps)] for env, pivot, _, comps in data]

    def bare_pass():
        out = []
        for _, _, expert, comps in data:
            want = bare_action(expert)  # the expert is decoded per group, as the chain does
            out.append([bare_accept(want, c) for c in comps])
        return out

    return chain_pass, bare_pass


def per_domain(data: list, seconds: float) -> dict:
    """`{domain: {chain_verdicts_per_s, bare_verdicts_per_s, ratio}}`, each domain's groups timed alone."""
    out = {}
    for domain in dict.fromkeys(pivot.domain for _, pivot, _, _ in data):
        rows = [g for g in data if g[1].domain == domain]
        chain_pass, bare_pass = passes(rows)
        n = sum(len(c) for *_, c in rows)
        chain_per_s, bare_per_s = timed(chain_pass, seconds)[0] * n, timed(bare_pass, seconds)[0] * n
        out[domain] = {"chain_verdicts_per_s": chain_per_s, "bare_verdicts_per_s": bare_per_s}
        out[domain]["ratio"] = chain_per_s / bare_per_s
    return out


class _Recorder:
    """A chain step's verifier that notes which actions the chain hands it (by identity), then delegates."""

    def __init__(self, verifier) -> None:
        self.verifier, self.seen = verifier, []
        for attr in ("role", "cost", "deterministic", "version", "timeout"):
            if hasattr(verifier, attr):
                setattr(self, attr, getattr(verifier, attr))

    def verify(self, pivot, action):
        self.seen.append(id(action))
        return self.verifier.verify(pivot, action)


def stages(data: list, rounds: int = 15) -> dict:
    """`{stage: microseconds per verdict}`: parse, each verifier's calls, the chain's bookkeeping, the total.

    A replay of the chain's work, timed stage by stage: each group's completions parsed anew (as
    `env.score` does, so the forms a verifier derives from a candidate are computed by the first
    verifier that asks, and counted there), then each verifier called on the actions the chain
    handed it. The rest is a whole `env.score` pass minus that replay: the chain's bookkeeping
    (bounding each call, naming verdicts, folding decisions, building results), and whatever the
    calls cost more inside the chain than alone (caches shared with it). Rounds interleave the
    replay, the chain pass and the bare pass; each figure is the median over rounds.
    """
    from verifiers_plugins import VerifierChain

    plan = []  # per group: the env, the pivot, the completions, [(step name, verify, action indices)]
    for env, pivot, _, comps in data:
        recorders = [(name, _Recorder(v)) for name, v in env.chain.steps]
        messages = [env.parse(c) for c in comps]
        VerifierChain(recorders).verify_batch(pivot, messages)
        where = {id(m): i for i, m in enumerate(messages)}
        steps = [(name, r.verifier.verify, [where[a] for a in r.seen]) for name, r in recorders]
        plan.append((env, pivot, comps, [s for s in steps if s[2]]))
    n = sum(len(c) for *_, c in data)
    order = list(dict.fromkeys(name for *_, steps in plan for name, _, _ in steps))

    def replay() -> dict[str, float]:
        spent = dict.fromkeys(["parse", *order], 0.0)
        clock = time.perf_counter
        for env, pivot, comps, steps in plan:
            t0 = clock()
            messages = [env.parse(c) for c in comps]
            t1 = clock()
            spent["parse"] += t1 - t0
            for name, verify, indices in steps:
                for i in indices:
                    verify(pivot, messages[i])
                t0, t1 = t1, clock()
                spent[name] += t1 - t0
        return spent

    def once(fn) -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    chain_pass, bare_pass = passes(data)
    replay(), chain_pass(), bare_pass()
    samples: dict[str, list[float]] = {}
    for _ in range(rounds):
        for stage, spent in replay().items():
            samples.setdefault(stage, []).append(spent)
        samples.setdefault("total", []).append(once(chain_pass))
        samples.setdefault("bare comparison", []).append(once(bare_pass))
    out = {stage: statistics.median(v) * 1e6 / n for stage, v in samples.items()}
    out["chain (the rest)"] = out["total"] - sum(out[s] for s in ["parse", *order])
    out["calls"] = {name: sum(len(i) for *_, steps in plan for s, _, i in steps if s == name) for name in order}
    return out


def profile(top: int) -> None:
    """Print the `top` functions of one chain pass (after a warm one) with the most time of their own."""
    import cProfile
    import pstats

    chain_pass, _ = passes(groups())
    chain_pass()
    profiler = cProfile.Profile()
    profiler.runcall(chain_pass)
    pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(top)


def run(seconds: float = 2.0, domains: bool = False, with_stages: bool = False) -> dict:
    data = groups()
    verdicts_per_pass = sum(len(c) for *_, c in data)
    chain_pass, bare_pass = passes(data)
    chain_pass(), bare_pass()  # warm: imports, compiled schemas, the tool world's database
    chain_rate, chain_out = timed(chain_pass, seconds)
    bare_rate, bare_out = timed(bare_pass, seconds)
    flat_chain = [a for g in chain_out for a in g]
    flat_bare = [a for g in bare_out for a in g]
    chain_per_s, bare_per_s = chain_rate * verdicts_per_pass, bare_rate * verdicts_per_pass
    report = {
        "pivots": len(data),
        "verdicts_per_pass": verdicts_per_pass,
        "chain_verdicts_per_s": chain_per_s,
        "bare_verdicts_per_s": bare_per_s,
        "ratio": chain_per_s / bare_per_s,
        "chain_accept_rate": sum(flat_chain) / len(flat_chain),
        "bare_accept_rate": sum(flat_bare) / len(flat_bare),
        "agreement": sum(a == b for a, b in zip(flat_chain, flat_bare, strict=True)) / len(flat_chain),
    }
    if domains:
        report["domains"] = per_domain(data, seconds)
    if with_stages:
        report["stages"] = stages(data)
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=2.0, help="time each way for at least this long")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--domains", action="store_true", help="also time each domain's groups alone")
    ap.add_argument("--stages", action="store_true", help="also print where a chain verdict's time goes")
    ap.add_argument("--profile", type=int, metavar="N", help="print one chain pass's top N functions (cProfile)")
    args = ap.parse_args()
    if args.profile:
        profile(args.profile)
    r = run(args.seconds, domains=args.domains, with_stages=args.stages)
    if args.json:
        print(json.dumps(r))
        return
    print(f"{r['pivots']} real pivots x 5 candidates, single thread")
    print(f"{'':24}{'chain':>12}{'bare':>12}{'chain/bare':>12}")
    for domain, d in r.get("domains", {}).items():
        rates = f"{d['chain_verdicts_per_s']:>12.0f}{d['bare_verdicts_per_s']:>12.0f}"
        print(f"{'  ' + domain:24}{rates}{d['ratio']:>11.2f}x")
    print(f"{'verdicts/s/core':24}{r['chain_verdicts_per_s']:>12.0f}{r['bare_verdicts_per_s']:>12.0f}")
    print(f"{'accept rate':24}{r['chain_accept_rate']:>12.2f}{r['bare_accept_rate']:>12.2f}")
    print(f"the two agree on {r['agreement']:.0%} of verdicts")
    if "stages" in r:
        st = dict(r["stages"])
        calls = st.pop("calls")
        print("us per verdict (median of 15 rounds; a verifier's line counts the forms it derives first)")
        for stage, us in st.items():
            note = (
                f"  ({calls[stage]} calls, {us * r['verdicts_per_pass'] / calls[stage]:.1f} us each)"
                if stage in calls
                else ""
            )
            print(f"  {stage:22}{us:>8.2f}{note}")
    print(f"chain/bare: {r['ratio']:.2f}x")


if __name__ == "__main__":
    main()
