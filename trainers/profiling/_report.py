"""Per-domain (and per-harness) profile statistics and histograms (`pivot report`)."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pivot_core import Pivot


def domain_rows(pivots: Iterable[Pivot]) -> list[dict[str, Any]]:
    """One row per domain (plus "all"): counts, zero-variance shares split into all-0/all-1, mean reward."""
    groups: dict[str, list[Pivot]] = defaultdict(list)
    for p in pivots:
        groups[p.domain].append(p)
        groups["all"].append(p)
    return [{"domain": name, **_row(ps)} for name, ps in _ordered(groups)]


def harness_rows(pivots: Iterable[Pivot]) -> list[dict[str, Any]]:
    """`domain_rows` split by the agent harness a pivot was converted from (`context.harness`).

    Pivots of real agents' runs (`pivot convert`) name their harness (`openhands`, `mini-swe-agent`,
    an ATIF agent's name); the others are counted under "none". Empty when no pivot names one.
    """
    groups: dict[str, list[Pivot]] = defaultdict(list)
    for p in pivots:
        groups[str(p.context.get("harness") or "none")].append(p)
        groups["all"].append(p)
    if set(groups) <= {"none", "all"}:
        return []
    return [{"harness": name, **_row(ps)} for name, ps in _ordered(groups)]


def _ordered(groups: dict[str, list[Pivot]]) -> list[tuple[str, list[Pivot]]]:
    return [(name, groups[name]) for name in sorted(groups, key=lambda d: (d == "all", d))]


def _row(ps: list[Pivot]) -> dict[str, Any]:
    profiled = [p.profile for p in ps if p.profile is not None and p.profile.k]
    kinds = [pr.outcome for pr in profiled]
    n = len(profiled)
    return {
        "pivots": len(ps),
        "profiled": n,
        "zero_variance": sum(pr.zero_variance for pr in profiled) / n if n else 0.0,
        "all_zero": kinds.count("all_zero") / n if n else 0.0,
        "all_one": kinds.count("all_one") / n if n else 0.0,
        "constant": kinds.count("constant") / n if n else 0.0,
        "mixed": kinds.count("mixed"),
        "mean_reward": sum(pr.mean for pr in profiled) / n if n else 0.0,
    }


def plot_histograms(pivots: Iterable[Pivot], out: str | os.PathLike[str]) -> Path:
    """Write a PNG with histograms of per-pivot mean reward and reward variance, one colour per domain."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on servers and in CI
    import matplotlib.pyplot as plt

    by_domain: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for p in pivots:
        if p.profile is not None and p.profile.k:
            by_domain[p.domain][0].append(p.profile.mean)
            by_domain[p.domain][1].append(p.profile.variance)
    fig, (ax_mean, ax_var) = plt.subplots(1, 2, figsize=(10, 4))
    domains = sorted(by_domain)
    if domains:
        ax_mean.hist([by_domain[d][0] for d in domains], bins=11, range=(0, 1), stacked=True, label=domains)
        ax_var.hist([by_domain[d][1] for d in domains], bins=11, range=(0, 0.25), stacked=True, label=domains)
        ax_mean.legend()
    ax_mean.set(title="mean reward per pivot", xlabel="mean", ylabel="pivots")
    ax_var.set(title="reward variance per pivot (0 = no GRPO signal)", xlabel="variance", ylabel="pivots")
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
