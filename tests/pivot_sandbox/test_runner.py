"""The in-container runner: the same effects as `docker exec`, out of a candidate's reach, and its fallbacks."""

from __future__ import annotations

import dataclasses
import re

import pytest

from pivot_core import history_commands
from pivot_sandbox import SandboxSpec

pytestmark = pytest.mark.docker

# read-only and writing actions, exit codes, stderr, cd, exported variables, several commands per action
ACTIONS = [
    ["ls -la"],
    ["cat notes.txt | grep TODO"],
    ["grep nothing notes.txt"],
    ["ls missing"],
    ["cd /tmp && pwd"],
    ["echo done > done.txt"],
    ["export X=1", "echo $X; exit 3"],
    ["sed -i 's/alpha/ALPHA/' notes.txt", "cat notes.txt"],
    ["mkdir -p sub/deeper && touch sub/deeper/f", "cd sub"],
    ["rm keep.txt"],
    ["echo err >&2; false"],
    ["echo caf\u00e9 \U0001f600"],
]
TAMPER = (
    "for p in $(pidof .pivot-runner); do echo target; kill -9 $p; cat /proc/$p/fd/1 </dev/null;"
    " echo forged > /proc/$p/fd/0; cat /proc/$p/mem; done 2>&1; kill -9 -1; echo after"
)
PROBE = 'ls -la; echo "X=$X"; pwd'


@pytest.fixture
def state(demo_pivots):
    pivot = demo_pivots["ls -la"]
    return SandboxSpec.from_context(pivot.context), history_commands(pivot)


def test_runner_is_used_here(busybox):
    from pivot_sandbox.docker.backend import DockerBackend

    backend = DockerBackend()
    try:
        # CI has a C compiler and a local daemon: the tests of the sandbox exercise the runner
        assert backend.transport == "runner", backend.runner_note
    finally:
        backend.close()


def _clockless(effect):
    return dataclasses.replace(effect, stdout=re.sub(r"[A-Z][a-z]{2} +\d+ +\d\d:\d\d", "<time>", effect.stdout))


def test_runner_and_docker_exec_see_the_same_effects(state):
    from pivot_sandbox.docker.backend import DockerBackend

    spec, history = state
    effects = {}
    for runner in (True, False):
        backend = DockerBackend(runner=runner, pool_size=2)
        try:
            assert backend.transport == ("runner" if runner else "docker exec")
            effects[runner] = backend.run_group(spec, history, ACTIONS)
        finally:
            backend.close()
    for action, with_runner, with_exec in zip(ACTIONS, effects[True], effects[False], strict=True):
        # through docker exec the shell reports its own state; the kernel's part (environment, limits,
        # umask, descriptors) comes from the runner only
        assert set(with_exec.state) <= set(with_runner.state), action
        with_runner = dataclasses.replace(with_runner, state={k: with_runner.state[k] for k in with_exec.state})
        # the two runs are seconds apart: `ls -l` clock readings may cross a minute between them
        assert _clockless(with_runner) == _clockless(with_exec), action
    by_action = dict(zip(map(tuple, ACTIONS), effects[True], strict=True))
    assert by_action[("export X=1", "echo $X; exit 3")].exit_code == 3
    assert by_action[("export X=1", "echo $X; exit 3")].stdout == "1"
    assert by_action[("echo err >&2; false",)].stderr == "err"
    assert by_action[("rm keep.txt",)].files["/app/project/keep.txt"] == "deleted"


def test_text_that_is_not_utf8_runs_and_does_not_raise(state):
    from pivot_sandbox.docker.backend import DockerBackend

    spec, history = state
    backend = DockerBackend(pool_size=1)
    try:
        (effect,) = backend.run_group(spec, history, [["echo a\ud800b"]])  # a lone surrogate from a JSON completion
    finally:
        backend.close()
    assert effect.exit_code == 0 and effect.stdout == "a?b"


def test_a_candidate_cannot_reach_the_runner(state):
    from pivot_sandbox.docker.backend import DockerBackend

    spec, history = state
    # one worker, a pool of one: the probe runs in the container (and through the runner) the tamperer used
    backend = DockerBackend(pool_size=1, parallelism=1)
    try:
        clean, tamper, probe = backend.run_group(spec, history, [[PROBE], [TAMPER], [PROBE]])
        assert backend.stats["containers_reused"] >= 2 and backend.stats["containers_created"] == 2
    finally:
        backend.close()
    assert "target" in tamper.stdout  # it found the runner's pid
    assert "Operation not permitted" in tamper.stdout  # kill
    assert tamper.stdout.count("Permission denied") == 3  # its stdout, stdin and memory
    assert tamper.stdout.endswith("after") and tamper.exit_code == 0
    assert (probe.stdout, probe.stderr, probe.exit_code, probe.cwd) == (clean.stdout, clean.stderr, 0, clean.cwd)


def test_background_processes_do_not_outlive_the_action(state):
    from pivot_sandbox.docker.backend import DockerBackend

    spec, history = state
    backend = DockerBackend(pool_size=1, parallelism=1)
    try:
        # a background loop that would keep writing into the next candidate's working directory
        spawn, probe = backend.run_group(
            spec,
            history,
            [
                [
                    "(while true; do echo x >> /app/project/late.txt 2>/dev/null; sleep 0.05; done) >/dev/null 2>&1 &"
                    " echo started"
                ],
                ["sleep 0.3; ls"],
            ],
        )
    finally:
        backend.close()
    assert spawn.stdout == "started" and spawn.killed is None
    assert "late.txt" not in probe.stdout and not probe.files


def test_runner_for_gives_the_binary_or_why_not(monkeypatch):
    from pathlib import Path

    from pivot_sandbox.replay.runner import parse_user, runner_for

    monkeypatch.setenv("PIVOT_SANDBOX_RUNNER", "0")
    assert "PIVOT_SANDBOX_RUNNER" in runner_for(None)
    monkeypatch.delenv("PIVOT_SANDBOX_RUNNER")
    assert "not local" in runner_for("tcp://10.0.0.5:2375")
    assert isinstance(runner_for("unix:///var/run/docker.sock"), Path)  # this machine compiles it
    assert parse_user("1000:1000") == (1000, 1000)
    assert parse_user("root") == (-1, -1) and parse_user("0") == (-1, -1)
    assert parse_user("agent") is None  # a name: docker exec reads /etc/passwd


def test_turned_off_runner_falls_back_to_docker_exec(state, monkeypatch):
    from pivot_sandbox.docker.backend import DockerBackend

    monkeypatch.setenv("PIVOT_SANDBOX_RUNNER", "0")
    spec, history = state
    backend = DockerBackend(pool_size=1)
    try:
        assert backend.transport == "docker exec" and "PIVOT_SANDBOX_RUNNER" in backend.runner_note
        (effect,) = backend.run_group(spec, history, [["cat notes.txt | grep -c TODO"]])
    finally:
        backend.close()
    assert effect.stdout == "2" and effect.exit_code == 0


def test_sandbox_info_says_how_it_runs(busybox):
    import json
    import os
    import subprocess
    import sys

    # the Docker backend's transport: named, as the default is the namespace backend where it can run
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "PIVOT_SANDBOX": "docker"}
    out = subprocess.run(
        [sys.executable, "-m", "pivot_cli", "sandbox", "info", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    info = json.loads(out.stdout)
    assert info["transport"] == "runner" and info["runner_note"] is None
    assert info["storage_driver"] == "overlay2" and info["change_sets"] == "overlay upper folder"


def test_a_runner_that_does_not_answer_is_a_timeout(state, monkeypatch):
    from pivot_sandbox.docker import containers as dc
    from pivot_sandbox.docker.backend import DockerBackend
    from pivot_sandbox.replay import box as ct
    from pivot_sandbox.replay import runner as rn

    spec, _ = state
    monkeypatch.setattr(rn, "GRACE", 0.5)
    backend = DockerBackend(pool_size=0)
    box = backend._fleet.create(spec.image, spec, "pool")
    try:
        assert ct.run(box, ["true"], user=spec.user, timeout=2, output_cap=1024).exit_code == 0
        box.sandbox.container.pause()  # the runner is frozen: the host stops waiting and kills the container
        raw = ct.run(box, ["true"], user=spec.user, timeout=0.5, output_cap=1024)
        assert (raw.exit_code, raw.killed) == (None, "timeout")
    finally:
        dc.remove(box)
        backend.close()
