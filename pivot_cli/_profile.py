"""`pivot profile`, `pivot report` and `pivot cache stats|clear`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from pivot_cli._common import JSON_OPTION, console, emit_json, fail, print_table, user_errors

if TYPE_CHECKING:  # the trainer stack is imported when a command runs, not when the CLI is built
    from pivot_envs import ScoringEnv
    from trainers.backends import GenerationBackend
    from trainers.executors import Executor
    from trainers.profiling import ProfileConfig, ProfileSummary

cache_app = typer.Typer(help="The reward cache (SQLite, content-addressed).", no_args_is_help=True)
CACHE_OPTION = typer.Option(None, "--cache", help="Reward cache file ($PIVOT_CACHE or ~/.cache/pivot-gym/...).")


def register(app: typer.Typer) -> None:
    """Add the commands of this module."""
    app.command("profile")(profile)
    app.command("report")(report)
    app.add_typer(cache_app, name="cache")
    cache_app.command("stats")(cache_stats)
    cache_app.command("clear")(cache_clear)


def profile(
    env_id: str = typer.Option(..., "--env", help="Env id, e.g. pivot/tool-use-v0."),
    out: Path = typer.Option(..., "--out", help="Profiled pivot JSONL (resumed when it exists)."),
    dataset: Path | None = typer.Option(None, "--dataset", help="Pivot file; the env's bundled sample when omitted."),
    model: Path | None = typer.Option(None, "--model", help="Local model folder (transformers backend)."),
    openai_url: str | None = typer.Option(None, "--openai-url", help="OpenAI-compatible API root (.../v1)."),
    openai_model: str = typer.Option("default", "--openai-model", help="Served model name for --openai-url."),
    k: int = typer.Option(8, "--k", help="Samples per pivot."),
    max_new_tokens: int = typer.Option(
        -1, "--max-new-tokens", help="Completion budget per sample (-1: the model's saved settings, else 256)."
    ),
    temperature: float = typer.Option(
        -1.0, "--temperature", help="Sampling temperature (-1: the model's saved settings, else 1.0)."
    ),
    limit: int | None = typer.Option(None, "--limit", help="Profile only the first N pivots."),
    seed: int = typer.Option(0, "--seed", help="Base sampling seed."),
    chunk_size: int = typer.Option(8, "--chunk-size", help="Pivots per generation call and per flush."),
    max_history: int = typer.Option(
        -1, "--max-history", help="History messages read (-1: as saved with the model, else all)."
    ),
    max_prompt_tokens: int = typer.Option(
        -1, "--max-prompt-tokens", help="Prompt tokens kept (-1: as saved with the model, else all)."
    ),
    device: str = typer.Option("cpu", "--device", help="Device for --model."),
    cache: Path | None = CACHE_OPTION,
    no_cache: bool = typer.Option(False, "--no-cache", help="Verify every sample afresh."),
    executor: str = typer.Option(
        "in-process",
        "--executor",
        help="Where groups are verified: in-process, or ray (workers routed by sandbox state; the scale extra).",
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Sample K completions per pivot from a frozen policy, verify them, write each pivot with its Profile."""
    import gymnasium as gym

    import pivot_envs  # noqa: F401  (registers the env ids)
    from pivot_cli._models import quiet_transformers
    from verifiers_plugins import RewardCache

    _check_policy(model, openai_url)
    with user_errors():
        quiet_transformers() if model is not None else None
        backend = _backend(model, openai_url, openai_model, device, max_history, max_prompt_tokens)
        reward_cache = None if no_cache else RewardCache(cache)
        kwargs = {"dataset": str(dataset)} if dataset else {}
        env = gym.make(env_id, reward_cache=reward_cache, **kwargs)
        config = _profile_config(_saved_settings(model), k, max_new_tokens, temperature, seed, chunk_size, limit)
        pool = _executor(executor, env_id, kwargs, reward_cache)
        summary = _profile_with_progress(env, backend, out, config, pool, as_json)
    if as_json:
        emit_json(summary.to_json())
        return
    _print_summary(summary, out)


def _check_policy(model: Path | None, openai_url: str | None) -> None:
    """Exactly one policy: a local model folder, or a server."""
    if (model is None) == (openai_url is None):
        fail("expected exactly one of --model DIR or --openai-url URL")
    if model is not None and not (model / "config.json").is_file():
        fail(f"--model: expected a model folder with config.json, got {model}")


def _profile_config(
    saved: Any, k: int, max_new_tokens: int, temperature: float, seed: int, chunk_size: int, limit: int | None
) -> Any:
    """The profiler's config: a negative budget or temperature takes the model's saved settings, else 256 and 1.0."""
    from trainers.profiling import ProfileConfig

    return ProfileConfig(
        k=k,
        max_new_tokens=max_new_tokens if max_new_tokens > 0 else (saved.max_new_tokens if saved else 256),
        temperature=temperature if temperature >= 0 else (saved.temperature if saved else 1.0),
        seed=seed,
        chunk_size=chunk_size,
        limit=limit,
    )


def _profile_with_progress(
    env: ScoringEnv, backend: GenerationBackend, out: Path, config: ProfileConfig, pool: Executor | None, as_json: bool
) -> ProfileSummary:
    """Profile under a progress bar (none with --json); an executor's cache counts are added, then it is closed."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn, TimeRemainingColumn

    from trainers.profiling import profile_pivots

    columns = (
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        "eta",
        TimeRemainingColumn(),
    )
    try:
        with Progress(*columns, console=console, disable=as_json, transient=False) as bar:
            task = bar.add_task("profiling", total=None)
            summary = profile_pivots(
                env,
                backend,
                out,
                config,
                executor=pool,
                on_progress=lambda done, total: bar.update(task, completed=done, total=total),
            )
        if pool is not None:  # the workers' caches answered, not this process's
            stats = pool.stats()
            summary.cache_hits += sum(s["cache_hits"] for s in stats)
            summary.cache_misses += sum(s["cache_misses"] for s in stats)
    finally:
        if pool is not None:
            pool.close()
    return summary


def _print_summary(summary: Any, out: Path) -> None:
    """The profiling summary as text: counts, outcome classes, cache use, and the table by harness."""
    console.print(f"{summary.profiled} pivots profiled now, {summary.resumed} resumed, into {out}")
    if summary.guard_issues:
        console.print(
            f"[yellow]warning:[/] {len(summary.guard_issues)} pivots do not render as a prefix of "
            f"history + expert action under the policy's template: {summary.guard_issues[:5]}"
        )
    console.print(
        f"all-0 {summary.all_zero}  all-1 {summary.all_one}  mixed {summary.mixed}  "
        f"mean reward {summary.mean_reward:.3f}  "
        f"cache hits {summary.cache_hits} misses {summary.cache_misses}"
    )
    if summary.harnesses:
        _table(f"by agent harness ({out})", "harness", summary.harnesses)


def _table(title: str, key: str, rows: list[dict[str, Any]]) -> None:
    """The report's table, one row per domain or per harness."""
    pct = lambda x: f"{100 * x:.0f} %"  # noqa: E731
    print_table(
        title,
        [key, "pivots", "profiled", "zero var", "all-0", "all-1", "mixed", "mean"],
        [
            [
                r[key],
                r["pivots"],
                r["profiled"],
                pct(r["zero_variance"]),
                pct(r["all_zero"]),
                pct(r["all_one"]),
                r["mixed"],
                f"{r['mean_reward']:.3f}",
            ]
            for r in rows
        ],
    )


def _executor(name: str, env_id: str, kwargs: dict, reward_cache: Any) -> Any:
    """None in-process; else an executor whose workers build the same env and open the same cache file."""
    if name == "in-process":
        return None
    from trainers.executors import EnvSpec, make_executor

    spec_kwargs = dict(kwargs)
    if reward_cache is not None and reward_cache.path != ":memory:":
        spec_kwargs["reward_cache"] = reward_cache.path
    return make_executor(name, EnvSpec(env_id, spec_kwargs))


def _saved_settings(model: Path | None):
    """The stage settings saved with a local model folder (None for a server or a stock folder)."""
    from trainers.settings import StageSettings

    return StageSettings.load(model) if model is not None else None


def _backend(
    model: Path | None, openai_url: str | None, openai_model: str, device: str, max_history: int, max_prompt_tokens: int
):
    if model is not None:
        from trainers.backends import TransformersBackend, TransformersConfig
        from trainers.sft import prompt_cuts

        trained = prompt_cuts(model)  # by default, sample with the cuts `pivot sft` trained with
        history = trained.get("max_history_messages") if max_history < 0 else max_history
        tokens = trained.get("max_prompt_tokens") if max_prompt_tokens < 0 else max_prompt_tokens
        return TransformersBackend(
            TransformersConfig(str(model), device=device, max_history_messages=history, max_prompt_tokens=tokens)
        )
    from trainers.backends import OpenAIBackend, OpenAIConfig

    return OpenAIBackend(OpenAIConfig(openai_url or "", model=openai_model))


def report(
    src: Path = typer.Argument(..., help="Profiled pivot file."),
    plot: Path | None = typer.Option(None, "--plot", help="Write histograms of mean and variance to this PNG."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Per-domain table (and per agent harness of converted runs): pivots, zero-variance share, mean reward."""
    from pivot_envs import load_pivots
    from trainers.profiling import domain_rows, harness_rows, plot_histograms

    with user_errors():
        pivots = load_pivots(src)
        rows = domain_rows(pivots)
        harnesses = harness_rows(pivots)
        if plot is not None:
            plot_histograms(pivots, plot)
    if as_json:
        emit_json({"input": str(src), "plot": str(plot) if plot else None, "domains": rows, "harnesses": harnesses})
        return
    _table(f"profiles in {src}", "domain", rows)
    if harnesses:
        _table("by agent harness", "harness", harnesses)
    if plot is not None:
        console.print(f"histograms written to {plot}")


def cache_stats(cache: Path | None = CACHE_OPTION, as_json: bool = JSON_OPTION) -> None:
    """Entries, nondeterministic entries (judge verdicts), chains, size."""
    from verifiers_plugins import RewardCache

    with RewardCache(cache) as rc:
        stats = rc.stats()
    stats.pop("hits"), stats.pop("misses")
    if as_json:
        emit_json(stats)
        return
    console.print(stats)
    if stats["nondeterministic_entries"]:
        console.print(
            f"note: {stats['nondeterministic_entries']} entries come from nondeterministic verifiers "
            "(an LLM judge); a cached judge verdict is one sample of that judge"
        )


def cache_clear(cache: Path | None = CACHE_OPTION, as_json: bool = JSON_OPTION) -> None:
    """Delete every cached verdict."""
    from verifiers_plugins import RewardCache

    with RewardCache(cache) as rc:
        n = rc.clear()
        path = rc.path
    if as_json:
        emit_json({"path": path, "deleted": n})
    else:
        console.print(f"deleted {n} entries from {path}")
