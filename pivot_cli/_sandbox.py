"""`pivot sandbox build-image|build-task|build-tasks|gc|info` and `pivot synthesize terminal-bench|harbor`."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from pivot_cli._common import JSON_OPTION, console, emit_json, fail, print_table, user_errors
from pivot_cli._synthesize import synthesize_app

sandbox_app = typer.Typer(help="Docker sandbox: offline base images and leftover removal.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add the commands of this module."""
    sandbox_app.command("build-image")(build_image)
    sandbox_app.command("build-task")(build_task)
    sandbox_app.command("build-tasks")(build_tasks)
    sandbox_app.command("gc")(gc)
    sandbox_app.command("info")(info)
    synthesize_app.command("terminal-bench")(terminal_bench)
    synthesize_app.command("harbor")(harbor)
    app.add_typer(sandbox_app, name="sandbox")


def _client():  # noqa: ANN202 - the docker client type is only known once docker is imported
    from pivot_sandbox import SandboxError, docker_backend

    try:
        return docker_backend().client
    except SandboxError as e:
        fail(str(e))


def build_image(
    tag: str = typer.Option("pivot-gym/debian:bookworm", "--tag", help="Image tag (cached: built only when missing)."),
    kind: str = typer.Option("", "--kind", help="debian or busybox (default: busybox when the tag says so)."),
    force: bool = typer.Option(False, "--force", help="Rebuild even when the tag exists."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Build a base image offline: Debian bookworm minbase (debootstrap) or static busybox."""
    from pivot_sandbox import BUILDERS, image_exists

    kind = kind or ("busybox" if "busybox" in tag else "debian")
    if kind not in BUILDERS:
        fail(f"expected --kind in {sorted(BUILDERS)}, got {kind!r}")
    client = _client()
    cached = not force and image_exists(client, tag)
    with user_errors():
        BUILDERS[kind](client, tag, force=force)
    size = client.images.get(tag).attrs.get("Size", 0)
    summary = {"tag": tag, "kind": kind, "cached": cached, "size_mb": round(size / 1e6, 1)}
    if as_json:
        emit_json(summary)
    else:
        console.print(f"{'cached' if cached else 'built'} {tag} ({summary['size_mb']} MB)")


def _print_builds(rows: list[dict], title: str) -> None:
    table = [
        (r["task_id"], r["status"], r.get("image") or r.get("reason", "")[:90], f"{r.get('seconds', 0):.1f}")
        for r in rows
    ]
    print_table(title, ["task", "status", "image / reason", "s"], table)
    ok = sum(r["status"] in ("built", "cached") for r in rows)
    console.print(f"{ok} of {len(rows)} task images ready")


def build_task(
    task_dir: Path = typer.Argument(..., help="A Terminal-Bench (task.yaml) or Harbor (task.toml) task folder."),
    force: bool = typer.Option(False, "--force", help="Rebuild even when the content hash is cached."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Build one task's image offline from its own Dockerfile (base images mapped to local ones)."""
    from pivot_sandbox import build_tasks as run_builds

    with user_errors():
        (row,) = [r.to_json() for r in run_builds(_client(), [task_dir], force=force)]
    if as_json:
        emit_json(row)
    else:
        _print_builds([row], "task image")
    if row["status"] == "skipped":
        raise typer.Exit(1)


def build_tasks(
    tasks_dir: Path = typer.Argument(..., help="A folder of Terminal-Bench or Harbor task folders."),
    only: str = typer.Option("", "--only", help="Comma-separated task ids (default: every folder)."),
    force: bool = typer.Option(False, "--force", help="Rebuild even when the content hash is cached."),
    keep: int = typer.Option(24, "--keep", help="Task images kept (least recently used removed past it)."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 when a task cannot build (CI's own tasks)."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Build every task image of a folder; each task that cannot build says why."""
    from pivot_sandbox import build_tasks as run_builds
    from pivot_sandbox import task_dirs

    with user_errors():
        dirs = task_dirs(tasks_dir, [t for t in only.split(",") if t.strip()])
        rows = [r.to_json() for r in run_builds(_client(), dirs, force=force, keep=keep)]
    ready = sum(r["status"] in ("built", "cached") for r in rows)
    if as_json:
        emit_json({"total": len(rows), "ready": ready, "tasks": rows})
    else:
        _print_builds(rows, "task images")
    if strict and ready < len(rows):
        fail(f"{len(rows) - ready} of {len(rows)} task images could not be built (--strict)")


def info(as_json: bool = JSON_OPTION) -> None:
    """How this machine's sandbox runs: the backend in use and the usable ones, the daemon, the transport.

    `backend` is the one `docker_shell` uses (`PIVOT_SANDBOX`, else `default`: namespace where it
    can run here, else docker); `backends` maps each backend to "usable" or why it cannot run here.
    A chosen backend that cannot run fails here with the reason.
    """
    from pivot_sandbox import SandboxError, chosen_backend, default_backend, docker_backend, usable_backends
    from verifiers_plugins import get_host
    from verifiers_plugins.errors import UnknownVerifier

    chosen = chosen_backend()
    try:
        get_host().get("sandboxes", chosen)  # any backend a plugin registered
    except UnknownVerifier as e:
        fail(f"PIVOT_SANDBOX={chosen}: {e}")
    usable = {name: why or "usable" for name, why in usable_backends().items()}
    if usable.get(chosen, "usable") != "usable":
        fail(f"PIVOT_SANDBOX={chosen}: {usable[chosen]}")
    try:
        backend = docker_backend()
        daemon = backend.client.info()
    except SandboxError as e:
        fail(str(e))
    layers = os.path.join(daemon.get("DockerRootDir", "/var/lib/docker"), "overlay2")
    readable = daemon.get("Driver") == "overlay2" and os.access(layers, os.R_OK | os.X_OK)
    summary = {
        "backend": chosen,
        "default": default_backend(),
        "backends": usable,
        "daemon": daemon.get("ServerVersion"),
        "storage_driver": daemon.get("Driver"),
        "transport": backend.transport if chosen == "docker" else "runner (socket pair)",
        "runner_note": backend.runner_note,
        "change_sets": "overlay upper folder"
        if readable or chosen == "namespace"
        else "docker diff (same-size edits can be missed)",
        "cpus": daemon.get("NCPU"),
        "parallelism": backend.parallelism,
    }
    if usable["namespace"] == "usable":
        from pivot_sandbox import namespace_details

        summary.update(namespace_details())  # what holds its limits here: cgroups (v1/v2), else rlimits alone
    if as_json:
        emit_json(summary)
    else:
        print_table("pivot sandbox", ["", ""], [[k, "" if v is None else str(v)] for k, v in summary.items()])


def gc(
    everything: bool = typer.Option(False, "--all", help="Also remove what live processes made."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Remove leftover pivot-gym containers and snapshot images (of processes that are gone)."""
    from pivot_sandbox import gc as run_gc
    from pivot_sandbox import removed_in_this_process

    run_gc(_client(), everything=everything)
    from pivot_sandbox import namespace_gc, usable_backends

    if usable_backends()["namespace"] is None:  # the namespace backend's folders and cgroups of dead processes
        namespace_gc(everything)
    # Connecting already swept dead owners' leftovers: count that sweep too, not only this call.
    report = removed_in_this_process().to_json()
    if as_json:
        emit_json(report)
    else:
        console.print(f"removed {report['containers']} containers and {report['images']} snapshot images")


def terminal_bench(
    src: Path = typer.Argument(..., help="Terminal-Bench task JSONL (instruction + solution_commands)."),
    out: Path = typer.Option(..., "--out", help="Output pivot JSONL (readable by load_pivots)."),
    image: str = typer.Option(
        "pivot-gym/debian:bookworm", "--image", help="Image for tasks without a folder in --tasks-dir."
    ),
    tasks_dir: Path = typer.Option(
        None, "--tasks-dir", help="Task folders (default: tasks/ beside TASKS.jsonl): each task runs in its own image."
    ),
    only: str = typer.Option("", "--only", help="Comma-separated task ids (default: all)."),
    limit: int = typer.Option(0, "--limit", help="Only the first N tasks (0: all)."),
    check_tests: bool = typer.Option(
        False, "--check-tests", help="Run each task's tests on the initial state and after the oracle solution."
    ),
    keep_oracle_readable: bool = typer.Option(
        False, "--keep-oracle-readable", help="Also write pivots of tasks whose answer the agent can read."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Run each task's oracle solution command by command and write Terminus trajectories' pivots."""
    from pivot_tasks import synthesize_file

    if tasks_dir is not None and not tasks_dir.is_dir():
        fail(f"--tasks-dir {tasks_dir}: not a folder")
    with user_errors():
        report = synthesize_file(
            src,
            out,
            image=image,
            limit=limit or None,
            tasks_dir=tasks_dir,
            only=[t for t in only.split(",") if t.strip()],
            check_tests=check_tests,
            keep_oracle_readable=keep_oracle_readable,
        )
    _print_synthesis(report, out, "terminal-bench synthesis", as_json)


def harbor(
    tasks_dir: Path = typer.Argument(
        ..., help="A folder of Harbor task folders (task.toml, solution/solve.sh), or one."
    ),
    out: Path = typer.Option(..., "--out", help="Output pivot JSONL (readable by load_pivots)."),
    only: str = typer.Option("", "--only", help="Comma-separated task ids (default: all)."),
    limit: int = typer.Option(0, "--limit", help="Only the first N tasks (0: all)."),
    check_tests: bool = typer.Option(
        False, "--check-tests", help="Run each task's test.sh on the initial state and after the oracle."
    ),
    keep_oracle_readable: bool = typer.Option(
        False, "--keep-oracle-readable", help="Also write pivots of tasks whose answer the agent can read."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Run each Harbor task's solve.sh command by command in the task's own image and write Terminus pivots."""
    from pivot_tasks import synthesize_harbor

    if not tasks_dir.is_dir():
        fail(f"{tasks_dir}: not a folder")
    with user_errors():
        report = synthesize_harbor(
            tasks_dir,
            out,
            only=[t for t in only.split(",") if t.strip()],
            limit=limit or None,
            check_tests=check_tests,
            keep_oracle_readable=keep_oracle_readable,
        )
    _print_synthesis(report, out, "harbor synthesis", as_json)


def _print_synthesis(report: dict, out: Path, title: str, as_json: bool) -> None:
    """The synthesis report as JSON, or as a table and a summary line."""
    if as_json:
        emit_json(report)
        return
    rows = [(r["task_id"], r["status"], r.get("reason", "")[:70]) for r in report["tasks"]]
    print_table(title, ["task", "status", "reason"], rows)
    console.print(
        f"{report['succeeded']} of {report['total']} tasks synthesized"
        + (
            f" (+{report['partial']} up to a command that needs a host outside the registries)"
            if report.get("partial")
            else ""
        )
        + f"; {report['pivots']} pivots written to {out}"
    )
