"""Fixtures of the sandbox tests: the real Docker engine, the busybox image, synthesized demo pivots.

The demo tasks are written here (not Terminal-Bench data, which carries a canary): a small shell
session whose solution runs in the busybox image, so every pivot has a real restored state.
"""

from __future__ import annotations

import pytest

DEMO_TASKS = [
    {
        "task_id": "demo-notes",
        "instruction": "In /app/project, copy the TODO lines of notes.txt into todo.txt and mark the draft final.",
        "setup": [
            "mkdir -p project && printf 'alpha TODO one\\nbeta draft\\ngamma TODO two\\ndelta\\n' "
            "> project/notes.txt && printf 'x\\n' > project/keep.txt"
        ],
        "solution_commands": [
            "cd project",
            "ls -la",
            "cat notes.txt",
            "grep TODO notes.txt",
            "grep TODO notes.txt > todo.txt",
            "wc -l todo.txt",
            "sed -i 's/draft/final/' notes.txt",
            "cat notes.txt",
            "ls",
            "date > stamp.txt",
            "od -An -N8 -tx1 /dev/urandom > token.txt",
        ],
    },
    {
        "task_id": "demo-offline-only",
        "instruction": "Install requests.",
        "solution_commands": ["pip install requests"],
    },
    {
        "task_id": "demo-missing-files",
        "instruction": "Run the pipeline.",
        "solution_commands": ["./run_pipeline.sh"],
    },
]
BUSYBOX = "pivot-gym/busybox:1"


@pytest.fixture(scope="session")
def docker_client():
    """A client of the real Docker engine (CI starts dockerd; its absence fails loudly)."""
    import pivot_envs  # noqa: F401  (imports the package before verifiers_plugins)
    from pivot_sandbox import SandboxUnavailable, docker_backend

    try:
        return docker_backend().client
    except SandboxUnavailable as e:
        pytest.fail(f"these tests need the Docker engine: {e}")


@pytest.fixture(scope="session")
def busybox(docker_client) -> str:
    """The busybox base image (built once; cached by tag)."""
    from pivot_sandbox.images.stock import build_busybox_image

    return build_busybox_image(docker_client, BUSYBOX)


@pytest.fixture(scope="session")
def demo_report(busybox):
    """Synthesis rows of the demo tasks in the busybox image."""
    from pivot_tasks import synthesize

    return list(synthesize(DEMO_TASKS, busybox))


@pytest.fixture(scope="session")
def demo_pivots(demo_report):
    """Pivots of the synthesized demo session, keyed by the expert's command."""
    from pivot_core import action_commands
    from pivot_envs import extract_pivots

    traj = next(r["trajectory"] for r in demo_report if r["status"] == "ok")
    out = {}
    for pivot in extract_pivots(traj):
        commands = action_commands(pivot.expert)
        if commands:
            out[commands[0]] = pivot
    return out
