"""`pivot convert` and `pivot select`."""

from __future__ import annotations

from pathlib import Path

import typer

from pivot_cli._common import JSON_OPTION, console, emit_json, user_errors


def register(app: typer.Typer) -> None:
    """Add the commands of this module."""
    app.command("convert")(convert)
    app.command("select")(select)


def convert(
    src: Path = typer.Argument(..., help="Input file (trajectories or pivot rows)."),
    out: Path = typer.Argument(..., help="Output pivot file."),
    from_: str | None = typer.Option(None, "--from", help="Input format (detected when omitted)."),
    to: str = typer.Option("openai", "--to", help="Output format: openai (pivot JSONL), nemo-gym or parquet."),
    domain: str | None = typer.Option(None, "--domain", help="Override the domain of every pivot."),
    successful_only: bool = typer.Option(False, "--successful-only", help="Keep only successful trajectories."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Convert trajectories into candidate pivots (D_cand), one per assistant turn."""
    from pivot_envs import load_pivots, write_pivots

    with user_errors():
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


def select(
    src: Path = typer.Argument(..., help="Profiled pivot file."),
    out: Path = typer.Argument(..., help="Output file for the kept pivots (D_adv)."),
    lam: float = typer.Option(..., "--lam", help="Keep pivots with mean reward < lam (and variance > 0)."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Keep profiled pivots with reward variance > 0 and mean < lambda (D_adv)."""
    from pivot_envs import load_pivots, select_pivots, write_pivots

    with user_errors():
        selection = select_pivots(load_pivots(src), lam)
        write_pivots(selection.kept, out)
    summary = {"input": str(src), "output": str(out), "lam": lam, **selection.summary()}
    if as_json:
        emit_json(summary)
    else:
        console.print(summary)
