"""The `pivot` command line (typer + rich).

Each `_<topic>.py` module exposes `register(app)` and adds its commands; heavy dependencies are
imported inside the commands that need them, so `pivot --help` stays fast.
"""

from __future__ import annotations

import importlib

import typer

from pivot_cli.errors import Busy, SessionNotFound, SessionRefused

COMMAND_MODULES: tuple[str, ...] = (
    "pivot_cli._envs",
    "pivot_cli._data",
    "pivot_cli._plugins",
    "pivot_cli._audit",
    "pivot_cli._tools",
    "pivot_cli._synthesize",
    "pivot_cli._browse",
    "pivot_cli._serve",
    "pivot_cli._models",
    "pivot_cli._train",
    "pivot_cli._demo",
    "pivot_cli._eval",
    "pivot_cli._sandbox",
    "pivot_cli._sandbox_swe",
    "pivot_cli._profile",
)


def build_app() -> typer.Typer:
    """The `pivot` app with every command module's commands (built on call: importing the package runs nothing)."""
    app = typer.Typer(
        name="pivot",
        help="PivotRL-style agentic post-training as Gymnasium environments.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
    )
    for module in COMMAND_MODULES:
        importlib.import_module(module).register(app)
    return app


def __getattr__(name: str) -> typer.Typer:
    # `from pivot_cli import app` (tests, typer's CliRunner) builds the app when first asked for
    if name == "app":
        return build_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """Console-script entry point."""
    build_app()()


__all__ = ["Busy", "SessionNotFound", "SessionRefused", "app", "build_app", "main"]
