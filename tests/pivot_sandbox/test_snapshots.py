"""Snapshot cache and warm pool: the second verification of a pivot replays nothing (counters, not time)."""

from __future__ import annotations

import json

import docker.errors
import pytest

from pivot_core import history_commands
from pivot_envs import Message
from verifiers_plugins import get_verifier
from verifiers_plugins.builtin.docker_shell import DockerShell

pytestmark = pytest.mark.docker


def terminus(command: str) -> Message:
    return Message(
        "assistant",
        json.dumps({"analysis": "a", "plan": "p", "commands": [{"keystrokes": command + "\n", "duration": 0.1}]}),
    )


def test_second_verification_does_not_replay(demo_pivots):
    pivot = demo_pivots["wc -l todo.txt"]
    n_history = len(history_commands(pivot))
    assert n_history >= 5
    # a configuration no other test uses, so this backend starts with empty caches
    verifier = get_verifier("docker_shell", backend="docker", max_snapshots=3, pool_size=1)
    backend = verifier.backend()
    group = [terminus("wc -l todo.txt"), terminus("cat todo.txt | wc -l"), terminus("wc -l notes.txt")]
    first = [v.accepted for v in verifier.verify_batch(pivot, group)]
    assert first == [True, False, False]
    assert backend.stats["replayed_commands"] == n_history
    assert backend.stats["snapshots_built"] == 1
    expert_runs = DockerShell.stats["expert_runs"]
    created = backend.stats["containers_created"]

    second = [v.accepted for v in verifier.verify_batch(pivot, group)]
    assert second == first
    assert backend.stats["replayed_commands"] == n_history  # no replay the second time
    assert backend.stats["snapshots_built"] == 1
    assert DockerShell.stats["expert_runs"] == expert_runs  # the expert's effect came from the cache
    # read-only candidates leave their container pristine: it goes back to the pool
    assert backend.stats["containers_reused"] >= 1
    assert backend.stats["pool_hits"] >= 1
    assert backend.stats["containers_created"] >= created


def test_lru_evicts_and_removes_snapshot_images(demo_pivots, docker_client):
    verifier = get_verifier("docker_shell", backend="docker", max_snapshots=1, pool_size=0)
    backend = verifier.backend()
    a, b = demo_pivots["ls -la"], demo_pivots["cat notes.txt"]
    verifier.verify_batch(a, [terminus("ls -al")])
    (image_a,) = list(backend._cache.images.values())
    verifier.verify_batch(b, [terminus("cat notes.txt")])
    assert backend.stats["snapshots_evicted"] == 1
    assert image_a not in backend._cache.images.values()
    backend.drain()  # wait for the removal queued before
    with pytest.raises(docker.errors.ImageNotFound):
        docker_client.images.get(image_a)


def test_snapshot_removed_under_the_backend_is_rebuilt(demo_pivots, docker_client):
    # pool_size=0: every candidate needs a fresh container from the snapshot image
    verifier = get_verifier("docker_shell", backend="docker", max_snapshots=4, pool_size=0, parallelism=1)
    backend = verifier.backend()
    pivot = demo_pivots["cat notes.txt"]
    assert verifier.verify_batch(pivot, [terminus("cat notes.txt")])[0].accepted
    (image,) = list(backend._cache.images.values())
    docker_client.images.remove(image, force=True)  # e.g. `pivot sandbox gc --all` from another shell
    verdict = verifier.verify_batch(pivot, [terminus("cat ./notes.txt"), terminus("cat todo.txt")])
    assert [v.accepted for v in verdict] == [True, False]
    assert all(v.error is None for v in verdict)
    assert backend.stats["snapshots_lost"] >= 1 and backend.stats["snapshots_built"] == 2


def test_pools_together_stay_under_the_cap_coldest_first(demo_pivots):
    from pivot_sandbox import SandboxSpec
    from pivot_sandbox.docker.backend import DockerBackend

    backend = DockerBackend(pool_size=2, max_pooled=3, parallelism=2)
    try:
        keys = []
        for command in ("ls -la", "cat notes.txt", "wc -l todo.txt"):
            pivot = demo_pivots[command]
            spec, history = SandboxSpec.from_context(pivot.context), history_commands(pivot)
            backend.run_group(spec, history, [["ls"], ["pwd"]])  # read-only: both containers go back to the pool
            backend.drain()  # the refill after the group is done
            keys.append(spec.key(history))
            pooled = {k: len(p) for k, p in backend._pool.boxes.items() if p}
            assert sum(pooled.values()) <= 3, pooled
            assert pooled.get(keys[-1]) == 2, pooled  # the state just used keeps a full pool
        assert backend.stats["pooled_dropped"] >= 1
        assert not backend._pool.boxes.get(keys[0])  # the coldest state gave its containers up first
    finally:
        backend.close()


def test_a_transcript_keeps_what_a_command_started_for_the_next_one(busybox):
    # synthesis records an oracle solution command by command: a server one command starts must be
    # there for the next (reading each command's output used to stop every process)
    from pivot_sandbox import SandboxSpec, docker_backend

    backend = docker_backend()
    try:
        # the job is a fork of the shell until it execs sleep: the next command looks for it a while
        # (5 s at most) rather than once, so a loaded machine's late exec is no false failure
        look = "for i in $(seq 50); do ps | grep -q '[s]leep 300' && break; sleep 0.1; done; ps"
        runs = backend.transcript(SandboxSpec(image=busybox), ["sleep 300 > /dev/null 2>&1 &", look])
    finally:
        backend.close()
    (first, _), (second, _) = runs
    assert first.exit_code == 0 and "sleep 300" in second.stdout.decode(), second.stdout
