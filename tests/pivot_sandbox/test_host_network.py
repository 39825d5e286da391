"""The host-network turn: one replay in the host's network at a time (`pivot_sandbox/docker/host_network.py`).

Two such replays at once would meet on a port a history's server binds on the host: the second
server fails to start and its state silently lacks it.
"""

import threading
import time

import pytest

from pivot_sandbox import SandboxSpec, docker_backend
from pivot_sandbox.docker import containers as ct
from pivot_sandbox.docker.host_network import give_back, take_turn
from pivot_sandbox.errors import SandboxError


def test_a_second_host_network_replay_waits_until_the_first_is_removed(busybox):
    backend = docker_backend()
    spec = SandboxSpec(image=busybox, replay_access=True)
    first = ct.create(backend.client, busybox, spec, backend.limits, "replay", runner=backend._connection.runner)
    made: list[ct.Box] = []
    waiting = threading.Thread(
        target=lambda: made.append(
            ct.create(backend.client, busybox, spec, backend.limits, "replay", runner=backend._connection.runner)
        )
    )
    try:
        assert not first.offline  # in the host's network
        waiting.start()
        time.sleep(1.5)
        assert not made and waiting.is_alive()  # it waits for its turn
    finally:
        ct.remove(first)
    waiting.join(timeout=60)
    assert len(made) == 1
    ct.remove(made[0])
    # a candidate's container (its own network) never waits for the turn
    offline = ct.create(
        backend.client, busybox, SandboxSpec(image=busybox), backend.limits, "pool", runner=backend._connection.runner
    )
    ct.remove(offline)


def test_a_turn_never_given_back_is_an_error_not_a_wait_forever():
    held = take_turn()
    try:
        with pytest.raises(SandboxError, match="host-network turn"):
            take_turn(wait=0.3)
    finally:
        give_back(held)
    give_back(take_turn(wait=0.3))  # given back: the next one has it at once
