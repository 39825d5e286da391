"""`pivot synthesize`: the sub-command group that builds expert trajectories.

Domains add their own command to `synthesize_app` from their own CLI module
(`pivot synthesize browse`, `pivot synthesize terminal-bench`); this module only owns the group.
"""

from __future__ import annotations

import typer

synthesize_app = typer.Typer(
    name="synthesize", no_args_is_help=True, help="Build expert trajectories (oracle experts) for a domain."
)


def register(app: typer.Typer) -> None:
    """Add the `synthesize` group."""
    app.add_typer(synthesize_app, name="synthesize")
