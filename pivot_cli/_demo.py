"""`pivot demo pivotrl` (the end-to-end run with ablations) and `pivot demo synthetic` (its synthetic data)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from pivot_cli._common import console, print_table, user_errors

if TYPE_CHECKING:
    from pivot_demo import DemoConfig

demo_app = typer.Typer(help="End-to-end demonstrations.", no_args_is_help=True)


# What one seed can and cannot say (printed under a one-seed table).
ONE_SEED = (
    "One seed: indicative only. The intervals resample held-out trajectories for this one run; they do not",
    "cover another seed's training or another reference policy. Read the direction of pivotrl - sft on text",
    "turns (the out-of-domain retention the paper reports), not its size; a difference whose interval holds 0",
    "says nothing. For a claim, run the full comparison (3 seeds, strict and no_filter): --data synthetic.",
)
# What the main job (--quick: three short runs of sft and pivotrl) can and cannot say.
QUICK = (
    "Three short runs of two arms. Read pivotrl - sft on text turns: out of domain (no arm trains on them),",
    "the retention the paper reports. Its interval resamples held-out trajectories over these three runs, not",
    "other settings or reference policies, and single runs point both ways (docs/results/demo.md). Tool calls",
    "(in domain), the strict reward and no filter: the full comparison, --data synthetic (minutes).",
)


def register(app: typer.Typer) -> None:
    """Add the commands of this module."""
    app.add_typer(demo_app, name="demo")
    demo_app.command("pivotrl")(demo_pivotrl)
    demo_app.command("synthetic")(demo_synthetic)


HANDOFFS = (
    "Synthetic data with hand-offs to a human agent as well, the summary one of six phrasings "
    "(not the bundled reference's data)."
)


def demo_config(
    out: Path,
    quick: bool = False,
    data: str | None = None,
    steps: int = -1,
    seeds: str = "",
    profile_turns: str = "",
    reference: str = "",
    arms: str = "",
    handoffs: bool = False,
) -> DemoConfig:
    """The demo's configuration from the CLI's options: the preset first (quick, synthetic), then the overrides."""
    from dataclasses import replace

    from pivot_demo import BUNDLED, SYNTHETIC, DemoConfig, bundled_sample

    cfg = DemoConfig(out=str(out))
    if quick:  # the main job on synthetic data from the bundled reference; real data: every stage
        cfg = cfg.quick() if data in (None, SYNTHETIC) else cfg.quick_bundled(data)
    elif data == SYNTHETIC:
        cfg = cfg.on_synthetic()  # before the overrides: the preset sets steps of its own
    elif data is not None:
        cfg = replace(cfg, data=str(bundled_sample()) if data == BUNDLED else data)
    if reference:
        cfg = replace(cfg, reference=None if reference == "none" else reference)
    if handoffs:  # after the reference: the bundled one refuses this data
        cfg = replace(cfg, synthetic_handoffs=True)
    if steps > 0:
        cfg = replace(cfg, grpo=cfg.grpo.with_values(steps=steps))
    if seeds.strip():
        cfg = replace(cfg, seeds=tuple(int(x) for x in seeds.split(",") if x.strip()))
    if profile_turns:
        cfg = replace(cfg, profile_turns=profile_turns)
    if arms.strip():
        cfg = replace(cfg, arms=tuple(a.strip() for a in arms.split(",") if a.strip()))
    return cfg


def demo_pivotrl(
    out: Path = typer.Option(Path("runs/pivotrl-demo"), "--out", help="Working folder (models, profiles, runs)."),
    json_out: Path | None = typer.Option(
        None, "--json", help="Write the results (rows, contrast) as JSON to this file."
    ),
    steps: int = typer.Option(-1, "--steps", help="Updates per arm (-1: the configuration's)."),
    seeds: str = typer.Option("", "--seeds", help="Comma-separated seeds, one run per arm and seed (default 0,1,2)."),
    data: str | None = typer.Option(
        None,
        "--data",
        help="Airline pivots file (default: the full tau-bench file if found; with --quick: 'synthetic'), "
        "'bundled' (the bundled real sample), or 'synthetic': conversations written by the airline world, "
        "held out by conversation, from the bundled reference (no e2e arm).",
    ),
    quick: bool = typer.Option(
        False,
        "--quick",
        help="The main job, minutes: the bundled reference on synthetic data, sft and pivotrl, one seed "
        "(with --data bundled or a file: every stage on real pivots, a small model).",
    ),
    reference: str = typer.Option(
        "",
        "--reference",
        help="The policy the arms start from: 'bundled', a model folder, or 'none' (pretrain and SFT here); "
        "default: the configuration's.",
    ),
    arms: str = typer.Option("", "--arms", help="Comma-separated arms (sft and pivotrl among them); default: all."),
    handoffs: bool = typer.Option(False, "--handoffs", help=HANDOFFS),
    profile_turns: str = typer.Option(
        "",
        "--profile-turns",
        help="Training turns D_cand is drawn from: 'all' or 'tool_calls' (default: the configuration's; "
        "with tool_calls, held-out text turns measure what training on tool calls does to them).",
    ),
) -> None:
    """Split by task, pretrain, SFT, profile, D_adv; sft/pivotrl/strict/no_filter/e2e arms x seeds; held-out CIs."""
    from pivot_cli._models import quiet_transformers
    from pivot_demo import StageLog, run_demo

    quiet_transformers()
    with user_errors():
        cfg = demo_config(out, quick, data, steps, seeds, profile_turns, reference, arms, handoffs)
        result = run_demo(cfg, log=StageLog(console))
    _print_arms(result["rows"], len(cfg.seeds))
    _print_contrast(result["contrast"], cfg, quick)
    console.print(f"plots: {', '.join(result['plots'])}; total {result['seconds']:.0f} s")
    if json_out is not None:
        _write_results(result, json_out)


def _print_arms(rows: list[dict[str, Any]], seeds: int) -> None:
    """The demo's table: held-out acceptance of every arm with its interval, tool calls and text turns."""
    text = "heldout_text_accept" in rows[0]
    n = f"{seeds} seed" + (" (indicative)" if seeds == 1 else "s")
    print_table(
        f"PivotRL demo: held-out acceptance, mean of {n}, 95 % CI clustered by trajectory",
        ["method", "train set", "tool calls (in domain)", "95% CI", "zero_var_share", "reward_std"]
        + (["text turns (out of domain)", "95% CI"] if text else []),
        [
            [
                r["method"],
                r["train_set"],
                r["heldout_accept"],
                "[{:.3f}, {:.3f}]".format(*r["heldout_ci"]),
                r["zero_var_share"],
                r["reward_std"],
            ]
            + ([r["heldout_text_accept"], "[{:.3f}, {:.3f}]".format(*r["heldout_text_ci"])] if text else [])
            for r in rows
        ],
        fmt=lambda x: f"{x:.3f}" if isinstance(x, float) else str(x),
    )


def _print_contrast(c: dict[str, Any], cfg: DemoConfig, quick: bool) -> None:
    """The paired differences pivotrl - every other arm, then what this many seeds can say."""
    from pivot_demo import BUNDLED

    console.print(
        "Differences paired over held-out trajectories (RL start: the SFT model):",
        markup=False,
    )
    untrained = " (no arm trains on them)" if cfg.profile_turns == "tool_calls" else ""
    for name, part in (("tool calls", c), (f"text turns{untrained}", c.get("text"))):
        if part is not None:
            console.print(
                f"  {name} ({part['clusters']} trajectories, RL start {part['sft_start_accept']:.3f}): "
                + "; ".join(
                    f"pivotrl - {arm} {v['pivotrl_minus']:+.3f} [{v['ci'][0]:+.3f}, {v['ci'][1]:+.3f}]"
                    for arm, v in part["vs"].items()
                ),
                markup=False,
            )
    for line in ONE_SEED if len(cfg.seeds) == 1 else QUICK if quick and cfg.reference == BUNDLED else ():
        console.print(line, markup=False)


def _write_results(result: dict[str, Any], json_out: Path) -> None:
    """`--json FILE`: the results without the per-run details."""
    import json

    json_out.parent.mkdir(parents=True, exist_ok=True)
    keep = ("rows", "contrast", "sizes", "stages", "config", "seconds", "plots")
    json_out.write_text(json.dumps({k: result[k] for k in keep}, indent=2))
    console.print(f"wrote {json_out}")


def demo_synthetic(
    out: Path = typer.Option(..., "--out", help="Pivot file to write (JSONL)."),
    conversations: int = typer.Option(600, "--conversations", help="Conversations (about 5.7 pivots each)."),
    handoffs: bool = typer.Option(False, "--handoffs", help=HANDOFFS),
) -> None:
    """Write the `--data synthetic` pivots: conversations the airline world writes (the bundled reference's data)."""
    from pivot_demo import synthetic_data

    with user_errors():
        synthetic_data(conversations, out, handoffs)
    console.print(f"wrote {conversations} synthetic airline conversations' pivots to {out}")
