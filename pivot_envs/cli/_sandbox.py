"""`pivot sandbox build-image`, `pivot sandbox gc`, `pivot sandbox info` and `pivot synthesize terminal-bench`."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from pivot_envs.cli._common import JSON_OPTION, console, emit_json, fail, print_table, user_errors
from pivot_envs.cli._synthesize import synthesize_app

sandbox_app = typer.Typer(help="Docker sandbox: offline base images and leftover removal.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add the commands of this module."""
    sandbox_app.command("build-image")(build_image)
    sandbox_app.command("gc")(gc)
    sandbox_app.command("info")(info)
    synthesize_app.command("terminal-bench")(terminal_bench)
    app.add_typer(sandbox_app, name="sandbox")


def _client():  # noqa: ANN202 - the docker client type is only known once docker is imported
    from verifiers_plugins.sandbox import SandboxError, docker_backend

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
    from verifiers_plugins.sandbox._images import BUILDERS, image_exists

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


def info(as_json: bool = JSON_OPTION) -> None:
    """How this machine's sandbox runs: the daemon, the command transport, where change sets come from."""
    from verifiers_plugins.sandbox import SandboxError, docker_backend

    try:
        backend = docker_backend()
        daemon = backend.client.info()
    except SandboxError as e:
        fail(str(e))
    layers = os.path.join(daemon.get("DockerRootDir", "/var/lib/docker"), "overlay2")
    readable = daemon.get("Driver") == "overlay2" and os.access(layers, os.R_OK | os.X_OK)
    summary = {
        "daemon": daemon.get("ServerVersion"),
        "storage_driver": daemon.get("Driver"),
        "transport": backend.transport,
        "runner_note": backend.runner_note,
        "change_sets": "overlay upper folder" if readable else "docker diff (same-size edits can be missed)",
        "cpus": daemon.get("NCPU"),
        "parallelism": backend.parallelism,
    }
    if as_json:
        emit_json(summary)
    else:
        print_table("pivot sandbox", ["", ""], [[k, "" if v is None else str(v)] for k, v in summary.items()])


def gc(
    everything: bool = typer.Option(False, "--all", help="Also remove what live processes made."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Remove leftover pivot-gym containers and snapshot images (of processes that are gone)."""
    from verifiers_plugins.sandbox._cleanup import gc as run_gc

    report = run_gc(_client(), everything=everything).to_json()
    if as_json:
        emit_json(report)
    else:
        console.print(f"removed {report['containers']} containers and {report['images']} snapshot images")


def terminal_bench(
    src: Path = typer.Argument(..., help="Terminal-Bench task JSONL (instruction + solution_commands)."),
    out: Path = typer.Option(..., "--out", help="Output pivot JSONL (readable by load_pivots)."),
    image: str = typer.Option("pivot-gym/debian:bookworm", "--image", help="Base image the solutions run in."),
    limit: int = typer.Option(0, "--limit", help="Only the first N tasks (0: all)."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Run each task's oracle solution command by command and write Terminus trajectories' pivots."""
    from verifiers_plugins.sandbox._synthesize import synthesize_file

    with user_errors():
        report = synthesize_file(src, out, image=image, limit=limit or None)
    if as_json:
        emit_json(report)
        return
    rows = [(r["task_id"], r["status"], r.get("reason", "")[:70]) for r in report["tasks"]]
    print_table("terminal-bench synthesis", ["task", "status", "reason"], rows)
    console.print(
        f"{report['succeeded']} of {report['total']} tasks synthesized; {report['pivots']} pivots written to {out}"
    )
