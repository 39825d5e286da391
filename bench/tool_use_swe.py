"""Benchmark and data report for the tool-use and SWE domains (real trajectories in ../shared/data).

    python bench/tool_use_swe.py [--shared ../shared/data] [--every N] [--audit-every N]

Prints:
1. conversion: pivots per source file (format, domain, tool-call share, seconds);
2. SWE expert turns by category (the `tool_name` categories of every SWE pivot's expert action);
3. scoring a GRPO-sized group (the expert + every audit attack) per SWE pivot with the default
   chain, two ways in one run: command parsing cached (as shipped) vs caches cleared before every
   candidate (what scoring costs without them); per-candidate latency and the ratio;
4. the audit table (accepted / total per case) for each built-in chain on a sample of real pivots.
Times are process CPU time (the machines are shared).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pivot_envs import detect_format, load_pivots, render_completion  # noqa: E402
from verifiers_plugins import VerifierChain, adversarial_completions, audit, get_parser  # noqa: E402
from verifiers_plugins.builtin import _categories, _targets  # noqa: E402

FILES = [
    "tool_use/tau_bench_airline_gpt4o.jsonl",
    "tool_use/raw/gpt-4o-airline.sample8.json",
    "tool_use/tau2_telecom_gpt4o.jsonl",
    "tool_use/raw/tau2_telecom_gpt-4o_simulation.json",
    "tool_use/tau_bench_retail_fewshot_text.jsonl",
    "tool_use/raw/MockRetailDomainEnv-few_shot.jsonl",
    "nemo_gym_pivot_rows/single_step_tool_use_with_argument_comparison.example.jsonl",
    "nemo_gym_pivot_rows/single_step_tool_use_with_argument_comparison.parallel_example.jsonl",
    "swe/mini_swe_agent_gemini3pro_swebench_verified.jsonl",
    "swe/raw/astropy__astropy-13579.traj.json",
    "swe/raw/astropy__astropy-14096.traj.json",
    "swe/raw/astropy__astropy-14598.traj.json",
    "swe/swe_agent_demos.jsonl",
    "swe/raw/swe_agent_function_calling_simple.traj",
    "swe/raw/swe_agent_str_replace_anthropic_demo.yaml",
    "nemo_gym_pivot_rows/swe_pivot.example.jsonl",
]
MAIN = {
    "tool_use/tau_bench_airline_gpt4o.jsonl",
    "tool_use/tau2_telecom_gpt4o.jsonl",
    "tool_use/tau_bench_retail_fewshot_text.jsonl",
    "swe/mini_swe_agent_gemini3pro_swebench_verified.jsonl",
    "swe/swe_agent_demos.jsonl",
    "nemo_gym_pivot_rows/swe_pivot.example.jsonl",
    "nemo_gym_pivot_rows/single_step_tool_use_with_argument_comparison.example.jsonl",
    "nemo_gym_pivot_rows/single_step_tool_use_with_argument_comparison.parallel_example.jsonl",
}
CHAINS = {
    "tool-use": [["turn_kind", "json_schema", "tool_args", "string_similarity"], ["exact_match"]],
    "swe": [
        ["turn_kind", "json_schema", "swe_target"],
        ["turn_kind", "json_schema", "tool_name"],
        ["turn_kind", "swe_target_continuous"],
        ["exact_match"],
    ],
}


def _clear_caches() -> None:
    _categories._text_commands.cache_clear()
    _categories._split.cache_clear()
    _targets.command_target.cache_clear()


def convert(shared: Path) -> dict[str, list]:
    """Load every file; print the conversion table."""
    print("| source | format | domain | pivots | tool-call share | seconds |\n|---|---|---|---|---|---|")
    out = {}
    for rel in FILES:
        t = time.process_time()
        pivots = load_pivots(shared / rel)
        dt = time.process_time() - t
        out[rel] = pivots
        doms = ",".join(sorted({p.domain for p in pivots}))
        share = sum(p.expert.is_tool_call for p in pivots) / len(pivots)
        print(f"| {rel} | {detect_format(shared / rel).name} | {doms} | {len(pivots)} | {share:.0%} | {dt:.2f} |")
    return out


def categories(pivots: list) -> None:
    """Share of SWE expert turns by category."""
    cats = Counter(_categories.message_category(p.expert) for p in pivots)
    total = sum(cats.values())
    print(f"\nSWE expert turns by category ({total} pivots, main sets):\n| category | turns | share |\n|---|---|---|")
    for c in _categories.CATEGORIES:
        print(f"| {c} | {cats[c]} | {cats[c] / total:.1%} |")


def group_scoring(pivots: list) -> None:
    """Per-candidate latency of a GRPO-sized group, caches on vs cleared per candidate."""
    chain = VerifierChain.from_names(CHAINS["swe"][0])
    parse = get_parser("hermes")
    groups = [
        (p, [parse(render_completion(p.expert, p.domain))] + [parse(t) for t in adversarial_completions(p).values()])
        for p in pivots
    ]
    n = sum(len(g) for _, g in groups)
    _clear_caches()
    t = time.process_time()
    for p, group in groups:
        chain.verify_batch(p, group)
    cached = (time.process_time() - t) / n
    t = time.process_time()
    for p, group in groups:
        for action in group:
            _clear_caches()
            chain.verify_batch(p, [action])
    uncached = (time.process_time() - t) / n
    print(f"\nGroup scoring, {chain.names}, {len(groups)} SWE pivots x {n // len(groups)} candidates:")
    print("| way | ms / candidate |\n|---|---|")
    print(f"| parsing cached (shipped) | {cached * 1e3:.3f} |\n| caches cleared per candidate | {uncached * 1e3:.3f} |")
    print(f"ratio (cleared / cached): {uncached / cached:.2f}x")


def audit_table(by_domain: dict[str, list]) -> None:
    """Accepted / total per case and chain on a sample of real pivots."""
    print("\nAudit (chain rows; accepted/total on the sampled real pivots):")
    for domain, pivots in by_domain.items():
        for names in CHAINS[domain]:
            rows = [r for r in audit(names, pivots, per_verifier=False) if "chain" in r]
            cells = ", ".join(f"{r['case']} {r['accepted']}/{r['total']}" for r in rows)
            print(f"- {domain} `{'>'.join(names)}` ({len(pivots)} pivots): {cells}")


def main() -> None:
    """Run the report."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--every", type=int, default=5, help="score every Nth SWE pivot in the group benchmark")
    ap.add_argument("--audit-every", type=int, default=10, help="audit every Nth pivot")
    args = ap.parse_args()
    data = convert(args.shared)
    swe = [p for rel in MAIN for p in data[rel] if p.domain == "swe"]
    tool = [p for rel in MAIN for p in data[rel] if p.domain == "tool-use"]
    print(f"\nmain sets: tool-use {len(tool)} pivots, swe {len(swe)} pivots (raw/ files repeat them)")
    categories(swe)
    group_scoring(swe[:: args.every])
    audit_table({"tool-use": tool[:: args.audit_every], "swe": swe[:: args.audit_every]})


if __name__ == "__main__":
    main()
