"""Helpers shared by CLI commands: JSON output, error exits, table printing."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from pivot_core.errors import PivotGymError

console = Console()
err_console = Console(stderr=True)

JSON_OPTION = typer.Option(False, "--json", help="Print machine-readable JSON on stdout.")


def emit_json(payload: Any) -> None:
    """Write one JSON document to stdout (no rich markup)."""
    sys.stdout.write(json.dumps(payload, ensure_ascii=False, indent=2, default=str) + "\n")
    sys.stdout.flush()


def fail(message: str, code: int = 1) -> None:
    """Print an error on stderr and exit with `code`."""
    err_console.print(f"[bold red]error:[/] {message}", markup=True, highlight=False)
    raise typer.Exit(code)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn the project's own errors (and missing files) into a clean message and exit code 1."""
    try:
        yield
    except (PivotGymError, FileNotFoundError, KeyError, ValueError) as e:
        fail(str(e) if not isinstance(e, KeyError) else str(e.args[0] if e.args else e))


def print_table(
    title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], fmt: Callable[[Any], str] = str
) -> None:
    """A table on stdout that never cuts a cell.

    On a terminal wide enough for every column, a rich table; in a pipe, a file or a narrow
    terminal, plain aligned text (rich would shorten names to "bars_always_…" to fit 80 columns).
    `--json` stays the machine interface.
    """
    cells = [[fmt(x) for x in r] for r in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells if i < len(r))]) for i, c in enumerate(columns)]
    natural = sum(widths) + 3 * len(widths) + 1
    if console.is_terminal and natural <= console.width:
        table = Table(title=title)
        for c in columns:
            table.add_column(c, overflow="fold")
        for r in cells:
            table.add_row(*r)
        console.print(table)
        return
    lines = [title, "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=False)).rstrip() for r in cells]
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()


def env_kwargs(dataset: Any, verifiers: str | None) -> dict[str, Any]:
    """`gym.make` keyword arguments from the common `--dataset` / `--verifiers` options."""
    kwargs: dict[str, Any] = {}
    if dataset is not None:
        kwargs["dataset"] = str(dataset)
    if verifiers:
        kwargs["verifiers"] = [v.strip() for v in verifiers.split(",") if v.strip()]
    return kwargs
