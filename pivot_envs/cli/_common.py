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

from pivot_envs.errors import PivotGymError

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
    """A rich table on stdout."""
    table = Table(title=title)
    for c in columns:
        table.add_column(c)
    for r in rows:
        table.add_row(*(fmt(x) for x in r))
    console.print(table)


def env_kwargs(dataset: Any, verifiers: str | None) -> dict[str, Any]:
    """`gym.make` keyword arguments from the common `--dataset` / `--verifiers` options."""
    kwargs: dict[str, Any] = {}
    if dataset is not None:
        kwargs["dataset"] = str(dataset)
    if verifiers:
        kwargs["verifiers"] = [v.strip() for v in verifiers.split(",") if v.strip()]
    return kwargs
