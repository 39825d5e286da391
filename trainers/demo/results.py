"""The demo's results: per-arm held-out acceptance with clustered intervals, pivotrl's contrasts, plots."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from trainers._advantages import zero_variance_groups
from trainers.demo.config import ARMS, TRAIN_SETS
from trainers.eval import SampleRecord, cluster_counts, contrast_ci


def arm_intervals(
    records: dict[tuple[str, int], list[SampleRecord]], seeds: Sequence[int], arms: Sequence[str]
) -> tuple[dict[str, tuple[float, float, float]], dict[str, Any]]:
    """Per arm, `(mean over seeds, low, high)`; per other arm, pivotrl minus it with its paired interval.

    Every interval resamples the same held-out trajectories for every run (`contrast_ci`), so a
    difference between two arms is judged on the pivots both were scored on.
    """
    keys = [(arm, s) for arm in arms for s in seeds]
    _, succ, trials = cluster_counts([records[k] for k in keys])
    per_arm = {arm: contrast_ci(succ, trials, [1.0 / len(seeds) if k[0] == arm else 0.0 for k in keys]) for arm in arms}
    contrasts = {}
    for other in (a for a in arms if a != "pivotrl" and "pivotrl" in arms):
        w = [(1.0 if k[0] == "pivotrl" else -1.0 if k[0] == other else 0.0) / len(seeds) for k in keys]
        diff, low, high = contrast_ci(succ, trials, w)
        contrasts[other] = {"pivotrl_minus": diff, "ci": [low, high]}
    return per_arm, {"vs": contrasts, "clusters": int(succ.shape[0])}


def arm_rows(
    records: dict[tuple[str, int], list[SampleRecord]],
    runs: dict[tuple[str, int], list[dict[str, float]]],
    prof: torch.Tensor,
    adv_prof: torch.Tensor,
    changes: dict[tuple[str, int], float],
    seeds: Sequence[int],
    arms: Sequence[str] = ARMS,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One row per arm (mean over seeds, clustered paired intervals) and pivotrl's contrasts with the others."""
    per_arm, paired = arm_intervals(records, seeds, arms)
    rows = []
    for arm in arms:
        value, low, high = per_arm[arm]
        steps = [m for s in seeds for m in runs.get((arm, s), [])]
        if arm == "sft":  # no rollouts: the share its data faces under the reference policy
            zero_var, reward_std = float(zero_variance_groups(adv_prof).float().mean()), float(adv_prof.std(1).mean())
            turns = 0.0
        else:
            zero_var = float(np.mean([m["rollout/zero_var_share"] for m in steps]))
            reward_std = float(np.mean([m["rollout/reward_std"] for m in steps]))
            turns = float(np.mean([m.get("rollout/turns_mean", 1.0) for m in steps]))  # a pivot rollout is one turn
        per_seed = [float(sum(r.accepted for r in records[(arm, s)]) / len(records[(arm, s)])) for s in seeds]
        rows.append(
            {
                "method": arm,
                "train_set": TRAIN_SETS[arm],
                "heldout_accept": value,
                "heldout_ci": [low, high],
                "heldout_per_seed": per_seed,
                "zero_var_share": zero_var,
                "reward_std": reward_std,
                "turns_per_rollout": turns,
                "seeds": list(seeds),
                "weight_change": [changes[(arm, s)] for s in seeds],
            }
        )
    sft = paired["vs"]["sft"]
    contrast = {"pivotrl_minus_sft": sft["pivotrl_minus"], "ci": sft["ci"], "clusters": paired["clusters"]}
    contrast["vs"] = paired["vs"]
    contrast["d_cand_zero_var_share"] = float(zero_variance_groups(prof).float().mean())
    return rows, contrast


def plot_results(
    rows: Sequence[dict[str, Any]], runs: dict, seeds: Sequence[int], root: Path, arms: Sequence[str] = ARMS
) -> list[str]:
    """`reward_std.png` (per GRPO step, mean over seeds) and `heldout.png` (acceptance with 95 % CIs)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for arm in (a for a in arms if a != "sft"):  # the GRPO arms: the sft arm has no rollouts
        label = f"{arm} ({TRAIN_SETS[arm]})"
        per_seed = [[m["rollout/reward_std"] for m in runs[(arm, s)]] for s in seeds]
        ys = np.mean(np.array(per_seed), axis=0)
        ax.plot(range(1, len(ys) + 1), ys, marker="o", label=label)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set(
        xlabel="GRPO step", ylabel="within-group reward std", title=f"Reward std per batch (mean of {len(seeds)} seeds)"
    )
    ax.legend()
    fig.tight_layout()
    fig.savefig(root / "reward_std.png", dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 3.5))
    x = np.arange(len(rows))
    vals = np.array([r["heldout_accept"] for r in rows])
    err = np.array([[v - r["heldout_ci"][0], r["heldout_ci"][1] - v] for v, r in zip(vals, rows, strict=True)]).T
    ax.bar(x, vals, yerr=err, capsize=5, color="#4c72b0")
    ax.set_xticks(x, [r["method"] for r in rows])
    ax.set(ylabel="held-out acceptance", title="Held-out tool-call acceptance, 95 % CI (clustered by trajectory)")
    fig.tight_layout()
    fig.savefig(root / "heldout.png", dpi=120)
    plt.close(fig)
    return [str(root / "reward_std.png"), str(root / "heldout.png")]


def jsonable(x: Any) -> Any:
    """`x` as plain JSON values (paths and other objects as their text)."""
    return json.loads(json.dumps(x, default=str))
