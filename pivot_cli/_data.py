"""`pivot convert`, `pivot select` and `pivot data fetch`."""

from __future__ import annotations

from pathlib import Path

import typer

from pivot_cli._common import JSON_OPTION, console, emit_json, err_console, fail, user_errors


def register(app: typer.Typer) -> None:
    """Add the commands of this module."""
    app.command("convert")(convert)
    app.command("select")(select)
    data_app = typer.Typer(help="The shared data the full tests and demos read.", no_args_is_help=True)
    data_app.command("fetch")(fetch)
    app.add_typer(data_app, name="data")


def convert(
    src: Path = typer.Argument(..., help="Input file (trajectories or pivot rows), or a folder of agent runs."),
    out: Path = typer.Argument(..., help="Output pivot file."),
    from_: str | None = typer.Option(
        None, "--from", help="Input format (detected when omitted); openhands, mini-swe-agent-log, atif for agent runs."
    ),
    to: str = typer.Option("openai", "--to", help="Output format: openai (pivot JSONL), nemo-gym, parquet or atif."),
    domain: str | None = typer.Option(None, "--domain", help="Override the domain of every pivot."),
    successful_only: bool = typer.Option(False, "--successful-only", help="Keep only successful trajectories."),
    tasks_dir: Path | None = typer.Option(
        None, "--tasks-dir", help="Terminal-Bench or Harbor task folders: agent-run pivots get the task's image."
    ),
    check_replay: bool = typer.Option(
        False,
        "--check-replay",
        help="Replay each run in its sandbox; pivots after a divergence lose it (--tasks-dir, --swe-instances).",
    ),
    swe_instances: Path | None = typer.Option(
        None,
        "--swe-instances",
        help="SWE-bench instances.jsonl: mini-swe-agent's *.traj.json runs get their instance image's sandbox.",
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Convert trajectories into candidate pivots (D_cand), one per assistant turn.

    A folder (or a file in one of the agent-run formats) is read as agents' runs: each trial folder
    holds `results.json` beside its log; the report names the runs skipped and why.
    """
    from pivot_core import RUN_FORMATS, detect_format
    from pivot_envs import load_pivots, write_pivots

    with user_errors():
        if swe_instances is not None:
            if from_ not in (None, "mini-swe-agent"):
                fail(
                    f"--swe-instances reads mini-swe-agent's own runs (*.traj.json): expected no --from, got {from_!r}"
                )
            _convert_runs(src, out, "mini-swe-agent", to, swe_instances, check_replay, as_json, swe=True)
            return
        if src.is_dir() or from_ in RUN_FORMATS or (from_ is None and detect_format(src).name in RUN_FORMATS):
            _convert_runs(src, out, from_, to, tasks_dir, check_replay, as_json)
            return
        options = {"successful_only": successful_only}
        if domain:
            options["domain"] = domain
        pivots = load_pivots(src, format=from_, **options)
        n = write_pivots(pivots, out, format=to)
    summary = {"input": str(src), "output": str(out), "pivots": n, "format": to}
    if as_json:
        emit_json(summary)
    else:
        console.print(f"wrote {n} pivots to {out}")


def _convert_runs(
    src: Path,
    out: Path,
    fmt: str | None,
    to: str,
    tasks_dir: Path | None,
    check: bool,
    as_json: bool,
    swe: bool = False,
) -> None:
    """`pivot convert` on agents' runs: pivots, the report, a progress bar for folders.

    `tasks_dir`: the Terminal-Bench task folders, or (`swe`) the SWE-bench `instances.jsonl`.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from pivot_core import convert_runs, find_runs, write_pivots

    total = len(find_runs(src, fmt)) if src.is_dir() else 1
    columns = (TextColumn("converting runs"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=err_console, transient=True, disable=as_json or not src.is_dir()) as bar:
        task = bar.add_task("runs", total=total)
        pivots, report = convert_runs(src, fmt, progress=lambda run: bar.advance(task))
    report["sandboxed"] = 0
    if tasks_dir is not None:
        from pivot_tasks import sandbox_pivots, swe_sandbox_pivots

        pivots, sandbox = (swe_sandbox_pivots if swe else sandbox_pivots)(pivots, tasks_dir)
        report.update(sandbox)
    if check:
        if tasks_dir is None:
            fail("--check-replay replays runs in their task images: give --tasks-dir (or --swe-instances) too")
        from pivot_tasks import check_replay

        pivots, replay = check_replay(pivots)
        report.update(replay)  # `sandboxed` and `unsandboxed` as the check left them
    report["output"] = str(out)
    report["written"] = write_pivots(pivots, out, format=to)
    if as_json:
        emit_json(report)
        return
    console.print(
        f"wrote {report['pivots']} pivots from {report['runs']} runs to {out} "
        f"({report['sandboxed']} sandboxed, {len(report['skipped'])} runs skipped"
        + (f", {report['faithful']} faithful)" if check else ")")
    )
    for row in report["skipped"]:
        err_console.print(f"  skipped {row['run']}: {row['reason']}", markup=False)


def select(
    src: Path = typer.Argument(..., help="Profiled pivot file."),
    out: Path = typer.Argument(..., help="Output file for the kept pivots (D_adv)."),
    lam: float = typer.Option(..., "--lam", help="Keep pivots with mean reward < lam (and variance > 0)."),
    keep_oracle_readable: bool = typer.Option(
        False,
        "--keep-oracle-readable",
        help="Keep pivots whose task answer the agent can read (dropped by default).",
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Keep profiled pivots with reward variance > 0 and mean < lambda (D_adv)."""
    from pivot_envs import load_pivots, select_pivots, write_pivots

    with user_errors():
        selection = select_pivots(load_pivots(src), lam, keep_oracle_readable=keep_oracle_readable)
        write_pivots(selection.kept, out)
    summary = {"input": str(src), "output": str(out), "lam": lam, **selection.summary()}
    if as_json:
        emit_json(summary)
    else:
        console.print(summary)


def fetch(
    to: Path | None = typer.Option(None, "--to", help="Folder to lay the data out in (default: the cache)."),
    only: list[str] = typer.Option([], "--only", help="Glob on the relative path (repeatable), e.g. 'tool_use/*'."),
    mirror: str | None = typer.Option(None, "--mirror", help="Base URL standing in for raw.githubusercontent.com."),
    manifest: Path | None = typer.Option(None, "--manifest", help="A manifest of your own (default: the shipped one)."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Download the shared data's public files (pinned commits, sha256-checked) where the tests look for them.

    The default folder, `cache_dir("shared-data")`, is one that `shared_data_roots()` searches.
    Files converted by the data team's scripts are listed, not fetched (see each folder's
    SOURCES.md). Exit 2 at once when GitHub cannot be reached, 1 when a file fails its checksum.
    """
    from pivot_cli._fetch import FetchError, fetch_shared_data, load_manifest
    from pivot_core import cache_dir

    root = to if to is not None else cache_dir("shared-data")
    try:
        report = fetch_shared_data(root, load_manifest(manifest), only=only, mirror=mirror)
    except FetchError as e:
        fail(str(e), code=2)
    if as_json:
        emit_json(report.summary())
    else:
        console.print(f"{root}: fetched {len(report.fetched)}, already there {len(report.present)}")
        for path, reason in report.failed:
            err_console.print(f"  {path}: {reason}", markup=False)
        if report.derived:
            console.print(
                f"{len(report.derived)} converted files are not fetchable (made from the sources in each folder's "
                f"SOURCES.md by the data team's scripts), e.g. {report.derived[0]}; tests that read them stay skipped",
                markup=False,
            )
    if report.failed:
        raise typer.Exit(1)
