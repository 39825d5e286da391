"""Ray workers routed by sandbox state: each state is replayed and snapshotted once per cluster."""

from __future__ import annotations

import json

import pytest

from pivot_envs import render_completion
from trainers.executors import EnvSpec, InProcessExecutor, VerifyTask, make_executor, route_key

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# The sandbox verifier alone: the chain's string fast path would accept the expert without a container.
SPEC = EnvSpec("pivot/terminal-v0", {"verifiers": ["docker_shell"]})


def terminus(command: str) -> str:
    return json.dumps({"analysis": "a", "plan": "p", "commands": [{"keystrokes": command + "\n", "duration": 0.1}]})


def test_groups_of_one_state_hit_one_worker_and_one_snapshot(ray_cluster, demo_pivots):
    pivots = [demo_pivots[c] for c in ("cat notes.txt", "grep TODO notes.txt", "wc -l todo.txt", "ls")]
    keys = {route_key(p) for p in pivots}
    assert len(keys) == len(pivots) and all(k.startswith("sandbox:") for k in keys)
    # Two "epochs" of groups at the same four states, interleaved.
    tasks = [VerifyTask(p, (render_completion(p.expert, p.domain), terminus("ls /"))) for p in pivots] * 2
    executor = make_executor("ray", SPEC, num_workers=2, chunk_size=1)
    try:
        remote = executor.verify(tasks)
        stats = executor.stats()
    finally:
        executor.close()
    local = InProcessExecutor(SPEC).verify(tasks)

    def decisions(results):
        return [[(r.reward, r.accepted, r.decided_by, r.error) for r in group] for group in results]

    assert decisions(remote) == decisions(local)
    assert all(group[0].accepted and not group[1].accepted for group in remote)
    for s in stats:  # every state a worker saw was snapshotted once there, whatever the number of groups
        counters = s["verifiers"].get("docker_shell", {})
        assert counters.get("backend/snapshots_built", 0) == len(s["keys"])
    assert sum(len(s["keys"]) for s in stats) == len(keys)  # no state was prepared on two workers
