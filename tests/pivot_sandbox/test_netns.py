"""Borrowed network namespaces: replacements join retired containers' namespaces, never a busy one."""

from __future__ import annotations

import pytest

from pivot_core import history_commands
from pivot_sandbox import SandboxSpec
from pivot_sandbox.contract.hardening import HOSTNAME

pytestmark = pytest.mark.docker


def listener(port: int) -> list[str]:
    # listens, waits while the others of the group listen too, counts the listeners it can see, writes a
    # file (so its container is retired and replaced), and says where it runs
    return [f"nc -l -p {port} >/dev/null 2>&1 & sleep 1; netstat -ltn | grep -c LISTEN; hostname; touch mark"]


def test_running_candidates_never_share_a_namespace(demo_pivots):
    from pivot_sandbox.docker.backend import DockerBackend

    pivot = demo_pivots["ls -la"]
    spec, history = SandboxSpec.from_context(pivot.context), history_commands(pivot)
    backend = DockerBackend(pool_size=2, parallelism=4)
    try:
        rounds = [backend.run_group(spec, history, [listener(8000 + i) for i in range(4)]) for _ in range(3)]
        borrowed = backend.stats["netns_borrowed"]
    finally:
        backend.close()
    assert borrowed >= 4  # later rounds ran in namespaces of containers retired by earlier ones
    for effects in rounds:
        for effect in effects:
            # each sees its own listener only, whether its namespace was new or borrowed
            assert effect.stdout == f"1\n{HOSTNAME}", effect
            assert effect.exit_code == 0 and "/app/project/mark" in effect.files
