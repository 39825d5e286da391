"""`pivot plugins`: list what the host loaded, validate installed plugins, scaffold a new one.

- `pivot plugins` lists every registration with its plugin, distribution and version.
- `pivot plugins --check` validates every plugin that would load and exits 1 on any error.
- `pivot plugins new NAME [--out DIR]` writes a ready-to-install verifier package.
"""

from __future__ import annotations

from pathlib import Path

import typer

from pivot_cli._common import JSON_OPTION, console, emit_json, fail, print_table, user_errors

plugins_app = typer.Typer(
    name="plugins",
    help="List loaded plugins (default), validate them (--check), or scaffold one (new NAME).",
    invoke_without_command=True,
    no_args_is_help=False,
)


def register(app: typer.Typer) -> None:
    """Add the `plugins` command group."""
    app.add_typer(plugins_app, name="plugins")


@plugins_app.callback(invoke_without_command=True)
def plugins(
    ctx: typer.Context,
    check: bool = typer.Option(False, "--check", help="Validate installed plugins; exit 1 on any problem."),
    as_json: bool = JSON_OPTION,
) -> None:
    """List loaded verifiers, parsers and other registrations with their plugin and distribution."""
    if ctx.invoked_subcommand is not None:
        return
    if check:
        _check(as_json)
    else:
        _list(as_json)


def _list(as_json: bool) -> None:
    from verifiers_plugins import HOOK_API_VERSION, get_host, is_async_verifier, verifier_meta

    with user_errors():
        host = get_host()
        rows = []
        for kind in ("verifiers", "parsers", "sandboxes", "tool_worlds"):
            for name, reg in sorted(host.registry(kind).items()):
                row = {
                    "kind": kind[:-1],
                    "name": name,
                    "plugin": reg.plugin,
                    "distribution": reg.distribution,
                    "version": reg.version,
                }
                if kind == "verifiers":
                    row.update({k: v for k, v in verifier_meta(reg.obj).items() if k != "version"})
                    row["verifier_version"] = verifier_meta(reg.obj)["version"]
                    row["async"] = is_async_verifier(reg.obj)
                rows.append(row)
        dists = [{"plugin": p, "distribution": d, "version": v} for p, (d, v) in host.distributions().items()]
        broken = [
            {"plugin": b.name, "distribution": b.distribution, "version": b.version, "error": b.error}
            for b in host.broken().values()
        ]
    if as_json:
        emit_json({"hook_api_version": HOOK_API_VERSION, "plugins": rows, "distributions": dists, "broken": broken})
        return
    print_table(
        "pivot plugins",
        ["kind", "name", "distribution", "version", "plugin", "cost"],
        [(r["kind"], r["name"], r["distribution"], r["version"], r["plugin"], r.get("cost", "")) for r in rows],
    )
    if broken:  # loud: these were left out, and envs that need them fail
        print_table(
            "broken plugins (left out)",
            ["plugin", "distribution", "version", "error"],
            [(b["plugin"], b["distribution"], b["version"], b["error"]) for b in broken],
        )


def _check(as_json: bool) -> None:
    from verifiers_plugins import check_plugins

    with user_errors():
        report = check_plugins()
    if as_json:
        emit_json(report.to_json())
    else:
        third = [c for c in report.plugins if not c.builtin]
        console.print(
            f"checked {len(report.plugins)} plugins ({len(third)} third-party) against hook API "
            f"v{report.to_json()['hook_api_version']}",
            highlight=False,
        )
        if report.problems:
            print_table(
                "problems",
                ["severity", "plugin", "distribution", "hook", "message"],
                [(p.severity, p.plugin, p.distribution, p.hook, p.message) for p in report.problems],
            )
        else:
            console.print("no problems found", highlight=False)
    if not report.ok:
        raise typer.Exit(1)


@plugins_app.command("new")
def new(
    name: str = typer.Argument(..., help="Verifier name, e.g. api_call_check (the package is pivot-verifier-NAME)."),
    out: Path = typer.Option(Path("."), "--out", help="Folder to create the package folder in."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Write a ready verifier package: hookimpl, verifier class, tests (incl. the audit kit), README."""
    from verifiers_plugins import write_scaffold

    with user_errors():
        try:
            root = write_scaffold(name, out)
        except FileExistsError as e:
            fail(f"{e}: choose another --out or remove it first")
            return
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    if as_json:
        emit_json({"path": str(root), "files": files})
        return
    console.print(f"created {root}", highlight=False)
    for f in files:
        console.print(f"  {f}", highlight=False)
    console.print(f"next: pip install -e {root} && python -m pytest {root}", highlight=False)
