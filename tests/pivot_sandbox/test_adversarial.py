"""Hostile candidates: each scores 0 with a reason, the host is untouched, no container is left."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pivot_envs import Message
from pivot_sandbox import LABEL
from verifiers_plugins import get_verifier

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ADVERSARIAL = {
    "fork bomb": ("f(){ f|f& };f", None),
    "rm -rf /": ("rm -rf / --no-preserve-root 2>/dev/null; rm -rf /", None),
    "sleep forever": ("sleep 100000", "timeout"),
    "endless output": ("yes", "output cap"),
    "1 GB write": ("dd if=/dev/zero of=big bs=1M count=1024", "file size cap"),
    "memory hog": ("awk 'BEGIN { s = \"x\"; while (1) s = s s }'", "oom"),
    "network": ("wget -q -O- http://1.1.1.1/ || nc -w 2 1.1.1.1 80", None),
    "kill everything": ("kill -9 -1", None),
    "outside workdir": ("ls -la; echo owned > /tmp/owned", "outside the working directory"),
}
# what "host untouched" is checked against
SENTINEL = Path("/tmp/pivot-gym-sentinel")


def terminus(command: str) -> Message:
    return Message(
        "assistant",
        json.dumps({"analysis": "a", "plan": "p", "commands": [{"keystrokes": command + "\n", "duration": 0.1}]}),
    )


def test_adversarial_suite(demo_pivots, docker_client):
    SENTINEL.write_text("intact")
    # a backend of its own (short timeout keeps the suite fast); its label tells its containers apart.
    # Docker by name: containers are what this test counts (test_backends.py runs the suite on both)
    config = {"backend": "docker", "action_timeout": 4.0, "pool_size": 1}
    verifier = get_verifier("docker_shell", **config)
    backend = verifier.backend()
    pivot = demo_pivots["ls -la"]
    names = list(ADVERSARIAL)
    verdicts = verifier.verify_batch(pivot, [terminus(ADVERSARIAL[n][0]) for n in names])
    for name, verdict in zip(names, verdicts, strict=True):
        expected = ADVERSARIAL[name][1]
        assert verdict.reward == 0.0 and not verdict.accepted, (name, verdict)
        assert verdict.error is None, (name, verdict.error)
        assert verdict.reason, name
        if expected:
            assert expected in verdict.reason, (name, verdict.reason)
    # the engine and the host are fine: a normal candidate still scores 1 afterwards
    (again,) = verifier.verify_batch(pivot, [terminus("ls -al")])
    assert again.accepted, again.details
    assert SENTINEL.read_text() == "intact" and not Path("/tmp/owned").exists()
    backend.close()
    left = docker_client.containers.list(all=True, filters={"label": f"{LABEL}.backend={backend.token}"})
    assert left == []
    images = docker_client.images.list(filters={"label": f"{LABEL}.backend={backend.token}"})
    assert images == []


CHILD = textwrap.dedent("""
    import json, pivot_envs
    from pivot_envs import Message
    from verifiers_plugins import get_verifier
    pivots = {p.id: p for p in pivot_envs.load_pivots(PATH)}
    pivot = pivots[PIVOT]
    def msg(keys):
        return Message("assistant", json.dumps({"analysis": "a", "plan": "p", "commands": [{"keystrokes": keys}]}))
    # two different candidates (identical ones run once): two containers busy when the process is killed
    # (Docker's containers by name; test_backends.py kills a verifying process on the namespace backend)
    verifier = get_verifier("docker_shell", backend="docker", action_timeout=120.0)
    verifier.verify_batch(pivot, [msg("sleep 1000\\n"), msg("sleep 999\\n")])
""")


def test_killed_verifier_leaves_nothing_after_gc(demo_pivots, docker_client, tmp_path):
    from pivot_envs import write_pivots

    pivot = demo_pivots["ls -la"]
    path = tmp_path / "pivots.jsonl"
    write_pivots([pivot], path)
    script = CHILD.replace("PATH", repr(str(path))).replace("PIVOT", repr(pivot.id))
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    child = subprocess.Popen([sys.executable, "-c", script], env=env)
    owner_filter = {"label": f"{LABEL}.owner={os.uname().nodename}:{child.pid}"}
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            # the candidates are running once pool containers of the child exist
            running = docker_client.containers.list(filters={**owner_filter})
            if len([c for c in running if c.labels.get(LABEL) == "pool"]) >= 2:
                break
            assert child.poll() is None, "the verifying process ended before it could be killed"
            time.sleep(0.5)
        else:
            pytest.fail("the child never started its candidates")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert docker_client.containers.list(all=True, filters=owner_filter), "SIGKILL left nothing to collect?"
    out = subprocess.run(
        [sys.executable, "-m", "pivot_cli", "sandbox", "gc", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert set(json.loads(out.stdout)) == {"containers", "images"}  # (the CLI's own start-up sweep may do the work)
    assert docker_client.containers.list(all=True, filters=owner_filter) == []
    assert docker_client.images.list(filters=owner_filter) == []
