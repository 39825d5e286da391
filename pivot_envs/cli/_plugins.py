"""`pivot plugins`: what the plugin host loaded, and from which distribution."""

from __future__ import annotations

import typer

from pivot_envs.cli._common import JSON_OPTION, emit_json, print_table, user_errors


def register(app: typer.Typer) -> None:
    """Add the commands of this module."""
    app.command("plugins")(plugins)


def plugins(as_json: bool = JSON_OPTION) -> None:
    """List loaded verifiers, parsers and other registrations with their plugin and distribution."""
    from verifiers_plugins import get_host, verifier_meta

    with user_errors():
        host = get_host()
        rows = []
        for kind in ("verifiers", "parsers", "sandboxes", "tool_worlds"):
            for name, reg in sorted(host.registry(kind).items()):
                row = {"kind": kind[:-1], "name": name, "plugin": reg.plugin, "distribution": reg.distribution,
                       "version": reg.version}
                if kind == "verifiers":
                    row.update({k: v for k, v in verifier_meta(reg.obj).items() if k != "version"})
                rows.append(row)
    if as_json:
        emit_json({"plugins": rows})
        return
    print_table("pivot plugins", ["kind", "name", "distribution", "version", "plugin"],
                [(r["kind"], r["name"], r["distribution"], r["version"], r["plugin"]) for r in rows])
