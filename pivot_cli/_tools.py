"""`pivot tools`: tool worlds (list them, replay recorded tool calls against one)."""

from __future__ import annotations

from pathlib import Path

import typer

from pivot_cli._common import JSON_OPTION, console, emit_json, fail, print_table, user_errors

tools_app = typer.Typer(help="Tool worlds: executable tool environments behind tool-use pivots.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add the `tools` command group."""
    app.add_typer(tools_app, name="tools")


@tools_app.command("list")
def list_worlds(as_json: bool = JSON_OPTION) -> None:
    """List the registered tool worlds and their plugins."""
    from verifiers_plugins import get_host

    with user_errors():
        rows = [
            {"name": n, "plugin": r.plugin, "distribution": r.distribution}
            for n, r in sorted(get_host().registry("tool_worlds").items())
        ]
    if as_json:
        emit_json({"worlds": rows})
        return
    print_table(
        "tool worlds", ["name", "distribution", "plugin"], [(r["name"], r["distribution"], r["plugin"]) for r in rows]
    )


@tools_app.command("replay")
def replay(
    path: Path = typer.Argument(..., help="Trajectory file with recorded tool outputs (any trajectory format)."),
    world: str = typer.Option(..., "--world", help="Registered tool world, e.g. tau-airline."),
    db: str | None = typer.Option(None, "--db", help="The world's database path (worlds that take `db_path`)."),
    from_: str | None = typer.Option(None, "--from", help="Input format (detected when omitted)."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Replay every recorded tool call of every trajectory on a fresh initial state; compare outputs."""
    from pivot_core import detect_format, get_format
    from pivot_tool_worlds import replay_trajectories
    from verifiers_plugins import get_host

    with user_errors():
        factory = get_host().get("tool_worlds", world)
        tool_world = factory(db_path=db) if db else factory()
        fmt = get_format(from_) if from_ else detect_format(path)
        if fmt.read_trajectories is None:
            fail(f"format {fmt.name!r} holds pivots, not trajectories: replay needs whole conversations")
        report = replay_trajectories(tool_world, fmt.read_trajectories(path, {}))
    payload = {**report.to_json(), "world": world, "db": getattr(tool_world, "description", "")}
    if as_json:
        emit_json(payload)
        return
    console.print(f"{world} ({payload['db']}): {report.matched}/{report.calls} recorded outputs reproduced")
    for m in report.mismatches[:20]:
        console.print(
            f"  {m.trajectory} turn {m.turn} {m.tool}: recorded {m.recorded[:80]!r}, replayed {m.replayed[:80]!r}"
        )
