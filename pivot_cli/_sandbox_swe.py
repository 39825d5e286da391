"""`pivot sandbox build-swe INSTANCES`: SWE-bench instance images built offline, optionally validated."""

from __future__ import annotations

from pathlib import Path

import typer

from pivot_cli._common import JSON_OPTION, console, emit_json, fail, print_table, user_errors


def register(app: typer.Typer) -> None:
    """Add `build-swe` to the `sandbox` group (`_sandbox.py` owns the group)."""
    from pivot_cli._sandbox import sandbox_app

    sandbox_app.command("build-swe")(build_swe)


def build_swe(
    instances: Path = typer.Argument(
        ..., help="An instances.jsonl with repos/ beside it (SWE-bench Verified: tests and benchmarks only)."
    ),
    only: list[str] = typer.Option([], "--only", help="Instance ids (repeat the option; default: every row)."),
    validate: bool = typer.Option(
        False, "--validate", help="Then run the tests with no network: the base commit must fail, the gold patch pass."
    ),
    pythons: Path | None = typer.Option(
        None, "--pythons", help="A folder of X.Y.Z CPython prefixes (default: the machine's pyenv versions)."
    ),
    force: bool = typer.Option(False, "--force", help="Rebuild the environment and instance layers."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Build each instance's image: the repository at its base commit in /testbed, its pinned environment.

    Layers are cached by what they depend on (an environment shared by one repository version is built
    once). An instance that cannot be built says why; with `--validate`, one whose tests do not tell the
    gold patch from the base commit here says that. Exit 1 when any instance is not ready (or not valid).
    """
    from pivot_sandbox import SWE_LIMITS, SandboxError, docker_backend, load_instances, swe_image, validate_instance

    with user_errors():
        rows = load_instances(instances, [i.strip() for i in only if i.strip()])
    try:
        backend = docker_backend(**SWE_LIMITS)
    except SandboxError as e:
        fail(str(e))
    out = []
    for instance in rows:
        with user_errors():
            report = swe_image(backend.client, instance, pythons=pythons, force=force)
        row = {"built": report.status != "skipped", **report.to_json()}
        if validate and row["built"]:
            v = validate_instance(backend, instance, report.image)
            row.update(valid=v.valid, offline_failures=list(v.offline_failures))
            if v.reason:
                row["reason"] = v.reason
        out.append(row)
        if not as_json:
            status = report.status if not validate or not row["built"] else ("valid" if row["valid"] else "not valid")
            console.print(f"{instance.instance_id}: {status} {row.get('image') or ''} {row.get('reason', '')[:120]}")
    ready = sum(r["built"] for r in out)
    summary = {"total": len(out), "built": ready, "instances": out}
    if validate:
        summary["valid"] = sum(bool(r.get("valid")) for r in out)
    if as_json:
        emit_json(summary)
    else:
        table = [(r["instance_id"], r["status"], f"{r.get('seconds', 0):.1f}", str(r.get("valid", "-"))) for r in out]
        print_table("SWE instance images", ["instance", "status", "s", "valid"], table)
    if ready < len(out) or (validate and summary["valid"] < ready):
        raise typer.Exit(1)
