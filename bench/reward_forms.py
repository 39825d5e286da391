"""How often a policy's samples at the turns with several acceptable forms pass each reward.

At the synthetic world's `calculate` and `transfer_to_human_agents` turns the expert writes one of
several forms with the same effect (`pivot_demo.synthetic.equivalent_actions`): the functional
reward (`tool_exec`, the env's default chain) accepts any of them, the strict one (`exact_match`)
the expert's own alone. This samples K completions per such pivot at the policy's saved settings
(temperature, prompt cut, budget), scores every sample under both rewards, and prints per tool the
samples each accepts and the groups each leaves mixed (the pivots GRPO can learn from: D_adv).

    python bench/reward_forms.py --model MODEL --pivots train.jsonl [--k 8] [--n 48] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="policy folder (its saved settings are used)")
    parser.add_argument("--pivots", type=Path, required=True, help="synthetic pivots (e.g. the training split)")
    parser.add_argument("--k", type=int, default=8, help="samples per pivot")
    parser.add_argument("--n", type=int, default=48, help="pivots per tool, drawn evenly")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()

    import gymnasium as gym

    import pivot_envs  # noqa: F401  (registers the pivot/* env ids)
    from pivot_core import load_pivots
    from pivot_demo.run import evenly
    from pivot_demo.synthetic import equivalent_actions
    from trainers.backends._base import SamplingParams
    from trainers.eval import local_backend
    from trainers.settings import settings_of

    by_tool: dict[str, list] = defaultdict(list)
    for p in load_pivots(opts.pivots):
        if equivalent_actions(p):
            by_tool[p.expert.tool_calls[0].name].append(p)
    settings = settings_of(opts.model)
    backend, _ = local_backend(opts.model)
    params = SamplingParams(max_new_tokens=settings.max_new_tokens, temperature=settings.temperature, seed=opts.seed)
    report = {}
    for tool, pivots in sorted(by_tool.items()):
        pivots = evenly(pivots, opts.n)
        envs = {
            "tool_exec": gym.make("pivot/tool-use-v0", pivots=pivots).unwrapped,
            "exact_match": gym.make("pivot/tool-use-v0", pivots=pivots, verifiers=["exact_match"]).unwrapped,
        }
        groups = backend.generate(list(pivots), opts.k, params)
        row: dict[str, dict[str, int]] = {name: {"accepted": 0, "mixed": 0, "all_0": 0, "all_1": 0} for name in envs}
        for pivot, group in zip(pivots, groups, strict=True):
            for name, env in envs.items():
                hits = sum(bool(r.accepted) for r in env.score(pivot, [g.text for g in group]))
                row[name]["accepted"] += hits
                row[name]["mixed" if 0 < hits < opts.k else "all_1" if hits else "all_0"] += 1
        report[tool] = {"pivots": len(pivots), "samples": len(pivots) * opts.k, **row}
    if opts.json:
        print(json.dumps(report, indent=2))
        return
    for tool, r in report.items():
        print(f"{tool}: {r['pivots']} pivots, {r['samples']} samples (K={opts.k}, T={settings.temperature})")
        for name in ("tool_exec", "exact_match"):
            x = r[name]
            print(
                f"  {name:11s} accepted {x['accepted']:4d}   groups mixed {x['mixed']:3d}, "
                f"all-0 {x['all_0']:3d}, all-1 {x['all_1']:3d}"
            )


if __name__ == "__main__":
    main()
