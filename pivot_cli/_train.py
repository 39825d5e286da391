"""`pivot train`: GRPO on a pivot env, or on whole episodes."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer

from pivot_cli._common import JSON_OPTION, console, emit_json, fail, print_table, user_errors


def register(app: typer.Typer) -> None:
    """Add the commands of this module."""
    app.command("train")(train)


def train(
    model: str = typer.Option(..., "--model", help="Policy folder (transformers causal LM with a chat template)."),
    pivots: str | None = typer.Option(None, "--pivots", help="Pivot file to train on (e.g. D_adv)."),
    eval_pivots: str | None = typer.Option(None, "--eval-pivots", help="Held-out pivot file."),
    env: str = typer.Option("pivot/tool-use-v0", "--env", help="Env id whose verifiers score completions."),
    steps: int = typer.Option(20, "--steps", help="Optimizer steps."),
    out: str = typer.Option("runs/grpo", "--out", help="Output folder (metrics.jsonl, checkpoint, final/)."),
    resume: bool = typer.Option(False, "--resume", help="Continue from OUT/checkpoint.pt when present."),
    episodes: bool = typer.Option(
        False,
        "--episodes",
        help="Episode mode: G whole episodes from each start (--pivots: D_adv starts; default: each task's start).",
    ),
    overrides: list[str] = typer.Option(
        [],
        "--set",
        "-s",
        help="Any other GRPOConfig field as key=value, by name or dotted path (objective.beta=0); repeatable.",
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Train a policy with GRPO on pivots, or on whole episodes (docs/training.md, docs/episodes.md)."""
    from trainers.grpo import GRPOTrainer

    with user_errors():
        cfg = _train_config(model, pivots, eval_pivots, env, steps, out, episodes, overrides)
        trainer = GRPOTrainer(cfg)
        start = trainer.resume() if resume else 0
    final = _train_with_progress(trainer, cfg.steps, start, as_json)
    if not all(v == v for v in final.values()):  # NaN never equals itself
        fail(f"training produced a non-finite metric: {final}")
    summary = {"output_dir": out, "steps": trainer.step_count, "metrics": final}
    if as_json:
        emit_json(summary)
    else:
        print_table(
            "final metrics",
            ["metric", "value"],
            sorted(final.items()),
            fmt=lambda x: f"{x:.4f}" if isinstance(x, float) else str(x),
        )


def _train_config(
    model: str,
    pivots: str | None,
    eval_pivots: str | None,
    env: str,
    steps: int,
    out: str,
    episodes: bool,
    overrides: Sequence[str],
) -> Any:
    """`pivot train`'s `GRPOConfig`: its options, over the stage settings saved with the model."""
    from trainers.grpo import EPISODE_ENVS
    from trainers.settings import StageSettings

    # the model's saved stage settings (prompt cuts, completion budget, temperature) are the
    # defaults, so RL samples the prompts the model learnt on; --set still overrides them
    saved = StageSettings.load(model) if Path(model).is_dir() else None
    return config_from_overrides(
        {
            "model": model,
            "pivots": pivots,
            "eval_pivots": eval_pivots,
            # episode mode runs in the pivot env's episode twin (end-to-end RL, or episodes from D_adv)
            "env_id": EPISODE_ENVS.get(env, env) if episodes else env,
            "steps": steps,
            "output_dir": out,
            "episodes": episodes,
            # read here, at the edge; the trainer takes the path (episode outcomes have no verdict cache)
            "reward_cache": None if episodes else os.environ.get("PIVOT_CACHE"),
            **(saved.to_json() if saved is not None else {}),
        },
        overrides,
    )


def _train_with_progress(trainer: Any, steps: int, start: int, as_json: bool) -> dict[str, float]:
    """Run the trainer under a progress bar (none with --json); returns its final metrics."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (
        TextColumn("[bold]grpo"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TextColumn("{task.fields[info]}"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, disable=as_json) as progress:
        task = progress.add_task("grpo", total=steps, completed=start, info="")

        def on_step(step: int, m: dict[str, float]) -> None:
            info = (
                f"reward {m['rollout/reward_mean']:.3f} zero-var {m['rollout/zero_var_share']:.2f} "
                f"kl {m['loss/kl']:.4f}"
            )
            progress.update(task, completed=step, info=info)

        return trainer.train(on_step)


def config_from_overrides(base: dict[str, Any], overrides: Sequence[str]) -> Any:
    """A `GRPOConfig` from keyword values plus `key=value` strings, each coerced to its field's type."""
    from trainers.grpo_config import GRPOConfig, field_types

    types = field_types()
    values = dict(base)
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or key not in types:
            raise ValueError(f"expected key=value with key in {sorted(types)}, got {item!r}")
        values[key] = _coerce(types[key], raw)
    return GRPOConfig.from_flat(values)


def _coerce(type_name: str, raw: str) -> Any:
    # annotations are strings (postponed evaluation): read the leading type name
    if raw.lower() == "none" and "None" in type_name:
        return None
    if type_name.startswith("bool"):
        return raw.lower() in ("1", "true", "yes")
    if type_name.startswith("int"):
        return int(raw)
    if type_name.startswith("float"):
        return float(raw)
    if type_name.startswith("tuple"):
        return tuple(x for x in raw.split(",") if x)
    return raw
