"""The demo's results: per-arm held-out acceptance with clustered intervals, pivotrl's contrasts, plots."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pivot_demo.config import ARMS, TRAIN_SETS
from trainers.eval import SampleRecord, cluster_counts, contrast_ci
from trainers.grpo import zero_variance_groups


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
    contrast["d_adv_zero_var_share"] = float(zero_variance_groups(adv_prof).float().mean())
    return rows, contrast


def plot_results(
    rows: Sequence[dict[str, Any]],
    runs: dict,
    seeds: Sequence[int],
    root: Path,
    arms: Sequence[str] = ARMS,
    contrast: dict[str, Any] | None = None,
) -> list[str]:
    """`arms.png` (held-out acceptance per arm, in and out of domain, 95 % CIs) and `zero_var.png` (per stage)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    contrast = contrast or {}
    n = f"{len(seeds)} seed{'s' if len(seeds) > 1 else ''}"
    fig, ax = plt.subplots(figsize=(7, 3.8))
    x = np.arange(len(rows))
    kinds = [("heldout", "tool calls (in domain)", "#4c72b0")]
    if rows and "heldout_text_accept" in rows[0]:
        kinds.append(("heldout_text", "text turns (out of domain: no arm trains on them)", "#dd8452"))
    width = 0.8 / len(kinds)
    for i, (key, label, color) in enumerate(kinds):
        vals = np.array([r[f"{key}_accept"] for r in rows])
        err = np.array([[v - r[f"{key}_ci"][0], r[f"{key}_ci"][1] - v] for v, r in zip(vals, rows, strict=True)]).T
        ax.bar(x + (i - (len(kinds) - 1) / 2) * width, vals, width, yerr=err, capsize=4, color=color, label=label)
    starts = [("sft_start_accept", "#4c72b0"), ("text", "#dd8452")]
    for key, color in starts:  # the reference policy's own score: what each arm started from
        start = contrast.get(key) if key != "text" else (contrast.get("text") or {}).get("sft_start_accept")
        if isinstance(start, float):
            ax.axhline(start, color=color, linestyle=":", linewidth=1)
    ax.set_xticks(x, [f"{r['method']}\n({r['train_set']})" for r in rows])
    ax.set(ylabel="held-out acceptance", ylim=(0, 1), title=f"Held-out acceptance per arm, {n}, 95 % CI by trajectory")
    ax.legend(fontsize=8, title="dotted: the reference policy", title_fontsize=8)
    fig.tight_layout()
    fig.savefig(root / "arms.png", dpi=120)
    plt.close(fig)

    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5), gridspec_kw={"width_ratios": [1, 1.4]})
    stages = [("D_cand\n(profile)", contrast.get("d_cand_zero_var_share", float("nan")))]
    stages.append(("D_adv\n(select)", contrast.get("d_adv_zero_var_share", 0.0)))
    grpo = [a for a in arms if a != "sft" and all((a, s) in runs for s in seeds)]
    for arm in grpo:
        shares = [m["rollout/zero_var_share"] for s in seeds for m in runs[(arm, s)]]
        stages.append((f"{arm}\nbatches", float(np.mean(shares)) if shares else float("nan")))
    left.bar(range(len(stages)), [v for _, v in stages], color="#55a868")
    left.set_xticks(range(len(stages)), [k for k, _ in stages], fontsize=8)
    left.set(ylabel="zero-variance share", ylim=(0, 1), title="Zero-variance groups per stage")
    for arm in grpo:
        per_seed = [[m["rollout/zero_var_share"] for m in runs[(arm, s)]] for s in seeds]
        ys = np.mean(np.array(per_seed), axis=0)
        right.plot(range(1, len(ys) + 1), ys, marker=".", label=f"{arm} ({TRAIN_SETS[arm]})")
    right.xaxis.set_major_locator(MaxNLocator(integer=True))
    right.set(xlabel="GRPO step", ylim=(0, 1.05), title=f"Per GRPO batch (mean of {n})")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(root / "zero_var.png", dpi=120)
    plt.close(fig)
    return [str(root / "arms.png"), str(root / "zero_var.png")]


def jsonable(x: Any) -> Any:
    """`x` as plain JSON values (paths and other objects as their text)."""
    return json.loads(json.dumps(x, default=str))
