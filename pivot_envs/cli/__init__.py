"""The `pivot` command line (typer + rich).

Each `_<topic>.py` module exposes `register(app)` and adds its commands; heavy dependencies are
imported inside the commands that need them, so `pivot --help` stays fast.
"""

from __future__ import annotations

import importlib

import typer

COMMAND_MODULES: tuple[str, ...] = (
    "pivot_envs.cli._envs",
    "pivot_envs.cli._data",
    "pivot_envs.cli._plugins",
    "pivot_envs.cli._audit",
    "pivot_envs.cli._tools",
    "pivot_envs.cli._synthesize",
    "pivot_envs.cli._browse",
    "pivot_envs.cli._serve",
    "pivot_envs.cli._models",
    "pivot_envs.cli._train",
    "pivot_envs.cli._eval",
    "pivot_envs.cli._sandbox",
    "pivot_envs.cli._profile",
)

app = typer.Typer(
    name="pivot",
    help="PivotRL-style agentic post-training as Gymnasium environments.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

for _module in COMMAND_MODULES:
    importlib.import_module(_module).register(app)


def main() -> None:
    """Console-script entry point."""
    app()


__all__ = ["app", "main"]
