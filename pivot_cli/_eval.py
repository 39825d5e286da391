"""`pivot split` (train / held-out by task or trajectory) and `pivot eval` (acceptance with clustered CIs)."""

from __future__ import annotations

from pathlib import Path

import typer

from pivot_cli._common import JSON_OPTION, console, emit_json, fail, print_table, user_errors


def register(app: typer.Typer) -> None:
    """Add the commands of this module."""
    app.command("split")(split)
    app.command("eval")(eval_)


def split(
    src: Path = typer.Argument(..., help="Pivot file (any format load_pivots reads)."),
    train_out: Path = typer.Argument(..., help="Output pivot file for training."),
    heldout_out: Path = typer.Argument(..., help="Output pivot file for the held-out pivots."),
    by: str = typer.Option("auto", "--by", help="task | trajectory | auto (task when every pivot names one)."),
    heldout: float = typer.Option(0.2, "--heldout", help="Share of tasks (or trajectories) held out."),
    seed: int = typer.Option(0, "--seed", help="Seeds which groups are held out."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Split pivots so that no task (tau-bench trials of one task) or trajectory is on both sides."""
    from pivot_core import split_pivots
    from pivot_envs import load_pivots, write_pivots

    with user_errors():
        result = split_pivots(list(load_pivots(src)), heldout=heldout, by=by, seed=seed)
        write_pivots(result.train, train_out)
        write_pivots(result.heldout, heldout_out)
    summary = {"input": str(src), "train_file": str(train_out), "heldout_file": str(heldout_out), **result.summary()}
    if as_json:
        emit_json({**summary, "heldout_group_keys": list(result.heldout_groups)})
    else:
        console.print(
            f"split by {result.by}: {len(result.train)} train pivots ({len(result.train_groups)} groups) -> "
            f"{train_out}, {len(result.heldout)} held out ({len(result.heldout_groups)} groups) -> {heldout_out}"
        )


def eval_(
    pivots: Path = typer.Option(..., "--pivots", help="Pivots to evaluate on (e.g. the held-out file of pivot split)."),
    model: Path | None = typer.Option(None, "--model", help="Model folder: SFT, a GRPO run (its final/), any HF one."),
    openai_url: str | None = typer.Option(None, "--openai-url", help="OpenAI-compatible API root (.../v1)."),
    openai_model: str = typer.Option("default", "--openai-model", help="Served model name for --openai-url."),
    env_id: str = typer.Option("pivot/tool-use-v0", "--env", help="Env whose default verifier chain scores samples."),
    k: int = typer.Option(8, "--k", help="Samples per pivot per seed."),
    temperature: float = typer.Option(-1.0, "--temperature", help="Sampling temperature (-1: the model's saved one)."),
    greedy: bool = typer.Option(False, "--greedy", help="Greedy decoding (one sample per pivot and seed)."),
    seeds: str = typer.Option("0", "--seeds", help="Comma-separated sampling seeds, e.g. 0,1,2."),
    max_new_tokens: int = typer.Option(-1, "--max-new-tokens", help="Completion budget (-1: the model's saved one)."),
    device: str = typer.Option("cpu", "--device", help="Device for --model."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Acceptance of a policy on pivots, with 95 % bootstrap intervals clustered by trajectory."""
    import gymnasium as gym

    import pivot_envs  # noqa: F401  (registers the env ids)
    from pivot_cli._models import quiet_transformers
    from pivot_envs import load_pivots
    from trainers.backends import SamplingParams
    from trainers.eval import evaluate, local_backend
    from trainers.settings import StageSettings, settings_of

    if (model is None) == (openai_url is None):
        fail("expected exactly one of --model DIR or --openai-url URL")
    with user_errors():
        seed_list = [int(s) for s in seeds.split(",") if s.strip()]
        if not seed_list:
            raise ValueError(f"--seeds: expected comma-separated integers, got {seeds!r}")
        if model is not None:
            quiet_transformers()
            backend, folder = local_backend(model, device)
            saved = settings_of(folder)
        else:
            from trainers.backends import OpenAIBackend, OpenAIConfig

            backend, saved = OpenAIBackend(OpenAIConfig(openai_url or "", model=openai_model)), StageSettings()
        params = SamplingParams(
            max_new_tokens=max_new_tokens if max_new_tokens > 0 else saved.max_new_tokens,
            temperature=0.0 if greedy else (temperature if temperature >= 0 else saved.temperature),
        )
        items = list(load_pivots(pivots))
        env = gym.make(env_id, pivots=items).unwrapped
        result = evaluate(backend, env, items, 1 if greedy else k, params, seed_list, settings=saved.to_json())
    payload = {"model": str(model or openai_url), "pivots": str(pivots), **result.to_json()}
    if as_json:
        emit_json(payload)
        return
    rows = [["all", result.overall]] + [[k_, v] for k_, v in result.per_kind.items()]
    rows += [[f"  {k_}", v] for k_, v in result.per_tool.items()]
    print_table(
        f"acceptance on {pivots} ({len(items)} pivots, {payload['settings']['k']} samples x seeds {seed_list})",
        ["slice", "accept", "95% CI (by trajectory)", "samples", "trajectories"],
        [[name, i.value, f"[{i.low:.3f}, {i.high:.3f}]", i.n, i.clusters] for name, i in rows],
        fmt=lambda x: f"{x:.3f}" if isinstance(x, float) else str(x),
    )
