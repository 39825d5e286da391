"""A demo run's arms on every held-out pivot of one tool: the in-domain kind the demo's even draw holds few of.

`pivot demo pivotrl --data synthetic` scores 64 held-out tool calls drawn evenly over all tools, so a
kind of turn with a small share (the hand-offs of `--handoffs`: 5 of 64) cannot show a difference
there. This reads the run's folder (its `synthetic.jsonl`, split as the run split it, and each
`runs/<arm>-seed<s>/final`), samples every arm and seed, and the reference, on all held-out pivots
whose expert calls `--tool` (K samples at the reference's temperature, the eval's sampling seeds),
and prints acceptance under the functional chain and under `exact_match`, with pivotrl's paired
differences (the demo's intervals: `pivot_demo.results.arm_intervals`, clustered by trajectory).

    python bench/heldout_per_tool.py --run runs/pivotrl-demo --reference REF [--tool transfer_to_human_agents]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True, help="a demo run's --out folder (synthetic data)")
    parser.add_argument("--reference", type=Path, required=True, help="the policy the run's arms started from")
    parser.add_argument("--tool", default="transfer_to_human_agents")
    parser.add_argument("--arms", default="sft,pivotrl,strict,no_filter")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--heldout", type=float, default=0.2)
    parser.add_argument("--split-seed", type=int, default=0)
    opts = parser.parse_args()

    import gymnasium as gym
    import numpy as np

    import pivot_envs  # noqa: F401  (registers the pivot/* env ids)
    from pivot_core import load_pivots, split_pivots
    from pivot_demo.results import arm_intervals
    from trainers.backends._base import SamplingParams
    from trainers.eval import local_backend, score_samples
    from trainers.settings import settings_of

    arms, seeds = opts.arms.split(","), [int(s) for s in opts.seeds.split(",")]
    split = split_pivots(list(load_pivots(opts.run / "synthetic.jsonl")), opts.heldout, by="auto", seed=opts.split_seed)
    pivots = [p for p in split.heldout if p.expert.tool_calls and p.expert.tool_calls[0].name == opts.tool]
    if not pivots:
        raise SystemExit(f"no held-out pivot calls {opts.tool}")
    s = settings_of(opts.reference)
    params = SamplingParams(max_new_tokens=s.max_new_tokens, temperature=s.temperature)
    envs = {
        "tool_exec": gym.make("pivot/tool-use-v0", pivots=pivots).unwrapped,
        "exact_match": gym.make("pivot/tool-use-v0", pivots=pivots, verifiers=["exact_match"]).unwrapped,
    }
    print(f"{len(pivots)} held-out {opts.tool} pivots, K={opts.k}, T={s.temperature}")
    for name, env in envs.items():
        records = {}
        start = score_samples(local_backend(opts.reference)[0], env, pivots, opts.k, params, seeds=(10_000,))
        for arm in arms:
            for seed in seeds:
                backend, _ = local_backend(opts.run / "runs" / f"{arm}-seed{seed}" / "final")
                records[(arm, seed)] = score_samples(backend, env, pivots, opts.k, params, seeds=(10_000 + seed,))
        per_arm, paired = arm_intervals(records, seeds, arms)
        print(f"{name}: reference {np.mean([r.accepted for r in start]):.3f}")
        for arm, (value, low, high) in per_arm.items():
            print(f"  {arm:9s} {value:.3f} [{low:.3f}, {high:.3f}]")
        for other, c in paired["vs"].items():
            print(f"  pivotrl - {other}: {c['pivotrl_minus']:+.3f} [{c['ci'][0]:+.3f}, {c['ci'][1]:+.3f}]")


if __name__ == "__main__":
    main()
