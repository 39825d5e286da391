"""A reused pool container is an exact copy of the state: what one candidate leaves cannot reach the next.

Candidates that write only where `docker diff` does not look (the shell-state folder, tmpfs mounts)
used to look pristine and go back to the pool; the next candidate then saw their leftovers.
"""

from __future__ import annotations

import pytest

from pivot_core import history_commands
from pivot_sandbox import SandboxSpec

pytestmark = pytest.mark.docker

PROBE = 'echo "poison=$POISON"; ls -A /dev/shm /.pivot-run; cat /.pivot-run/leak 2>&1; pwd'
POISONS = [
    "echo 'export POISON=1' >> /.pivot/env",  # the saved shell state every action starts from
    "echo / > /.pivot/cwd",
    "echo leak > /dev/shm/leak",  # tmpfs: invisible to docker diff
    "echo leak > /.pivot-run/leak; mkdir /.pivot-run/d; touch /.pivot-run/d/f; chmod 0 /.pivot-run/d",
]


def test_leftovers_do_not_reach_the_next_candidate(demo_pivots, busybox):
    from pivot_sandbox.docker.backend import DockerBackend

    pivot = demo_pivots["ls -la"]
    spec, history = SandboxSpec.from_context(pivot.context), history_commands(pivot)
    # one worker and a pool of one: every candidate runs in the container the one before left, if it is reused
    backend = DockerBackend(pool_size=1, parallelism=1)
    try:
        group = [[PROBE]]
        for poison in POISONS:
            group += [[poison], [PROBE]]
        effects = backend.run_group(spec, history, group)
        assert backend.stats["containers_reused"] >= 1  # the probe's own container does go back to the pool
    finally:
        backend.close()
    clean = effects[0]
    assert "poison=\n" in clean.stdout and clean.exit_code == 0
    for poison, probe in zip(POISONS, effects[2::2], strict=True):
        assert (probe.stdout, probe.stderr, probe.cwd) == (clean.stdout, clean.stderr, clean.cwd), poison
