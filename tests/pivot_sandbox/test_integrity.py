"""Sandbox integrity (issue 19): what an action does must be what the verifier sees, within bounds.

Each test reproduces a fault found by probing: a newline in a file name forged the change set, a
metadata-only change left a container that went back to the pool, the timeout held per command
instead of per action, and the change set was read without bounds (and with recursion).
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import replace

import pytest

from pivot_envs import Message, Pivot
from pivot_sandbox import SandboxSpec
from pivot_sandbox.docker import containers as dc
from pivot_sandbox.replay import action as act
from pivot_sandbox.replay import box as ct
from pivot_sandbox.replay.diff import Layers, describe, scan_upper
from verifiers_plugins import VerifierChain, get_verifier

HELLO = 'echo "Hello, world!" > hello.txt'
NEWLINE_NAME = 'echo "Hello, world!" > "hello.txt"$\'\\n\'"X"'


def terminus(*commands: str) -> Message:
    body = {"analysis": "a", "plan": "p", "commands": [{"keystrokes": c + "\n"} for c in commands]}
    return Message("assistant", json.dumps(body))


def pivot_of(image: str, expert: str, setup: tuple[str, ...] = ()) -> Pivot:
    """A hello-world style pivot: a fresh /app (plus `setup`), one expert command."""
    context = {"sandbox": {"image": image, "workdir": "/app", "setup": list(setup)}}
    return Pivot("integrity#1", "terminal", (Message("user", "do it"),), terminus(expert), context=context)


@pytest.fixture
def backend():
    from pivot_sandbox.docker.backend import DockerBackend

    made = []

    def make(**config):
        made.append(DockerBackend(**config))
        return made[-1]

    yield make
    for b in made:
        b.close()


# -- without Docker: the walk of an upper folder --------------------------------------------------


def test_scan_upper_walks_any_depth_without_recursion(tmp_path):
    upper, lower = tmp_path / "upper", tmp_path / "lower"
    lower.mkdir()
    deep = str(upper)
    os.mkdir(deep)
    for _ in range(1500):  # deeper than Python's recursion limit: os.walk raised RecursionError
        deep += "/d"
        os.mkdir(deep)  # one level at a time: os.makedirs and Path.mkdir(parents=True) recurse too
    try:
        scan = scan_upper(Layers(str(upper), (str(lower),)), max_entries=10_000, deadline=float("inf"))
        assert scan.over is None and len(scan.changes) == 1500
        assert max(len(p) for p, _ in scan.changes) == 2 * 1500
    finally:
        # bottom up, one level at a time: pytest's own clean-up of old temp folders recurses and
        # would raise RecursionError on this tree in every later session on the machine
        while deep != str(upper):
            os.rmdir(deep)
            deep = deep[: -len("/d")]


def test_scan_upper_stops_at_its_bounds(tmp_path):
    upper, lower = tmp_path / "upper", tmp_path / "lower"
    lower.mkdir()
    upper.mkdir()
    for i in range(600):
        (upper / f"f{i}").touch()
    layers = Layers(str(upper), (str(lower),))
    assert "more than 100 changed paths" in scan_upper(layers, max_entries=100, deadline=float("inf")).over
    assert "too long" in scan_upper(layers, max_entries=10_000, deadline=0.0).over  # monotonic time is past 0


def test_describe_never_opens_a_fifo_and_carries_mode(tmp_path):
    upper = tmp_path / "upper"
    upper.mkdir()
    os.mkfifo(upper / "pipe")  # opening a FIFO for reading would wait for a writer forever
    (upper / "f").write_text("x")
    (upper / "f").chmod(0o755)
    layers = Layers(str(upper), (str(tmp_path),))
    assert describe(layers, "/pipe", 1024, float("inf")).startswith("other:fifo 0:0 ")
    desc = describe(layers, "/f", 1024, float("inf"))
    assert desc.startswith("sha256:") and desc.split(" ")[1] == "755"


# -- with Docker ----------------------------------------------------------------------------------


@pytest.mark.docker
def test_a_newline_in_a_name_does_not_forge_the_change_set(busybox):
    verdicts = get_verifier("docker_shell").verify_batch(
        pivot_of(busybox, HELLO), [terminus(NEWLINE_NAME), terminus("printf 'Hello, world!\\n' > hello.txt")]
    )
    assert verdicts[0].reward == 0.0, verdicts[0]
    assert "/app/hello.txt" in verdicts[0].reason  # missing, and its look-alike unexpected
    assert verdicts[1].reward == 1.0, verdicts[1].reason


@pytest.mark.docker
def test_the_in_container_hasher_is_nul_delimited(busybox, backend):
    """Where the host cannot read the layers, `HASHER` describes paths inside the container."""
    b = backend(pool_size=0, parallelism=1)
    spec = SandboxSpec(image=busybox, workdir="/app")
    _, image = b.snapshot(spec, ())
    box = b._fleet.create(image, spec, "pool")
    try:
        raw = ct.shell_run(box, spec, b.limits, NEWLINE_NAME, src=ct.STATE, dst=ct.RUN_STATE, keep=False)
        assert raw.exit_code == 0
        changes = act.change_set(replace(box, layers=None), spec, b.limits, raw.cwd, settled=False)
    finally:
        dc.remove(box)
    assert set(changes.files) == {"/app", "/app/hello.txt\nX"}  # docker diff lists the parent too
    assert changes.files["/app/hello.txt\nX"].startswith("sha256:") and changes.files["/app"].startswith("dir ")


@pytest.mark.docker
def test_a_metadata_only_change_does_not_reach_the_next_candidate(busybox):
    # one worker and a pool of one: every candidate gets the container the one before left, if it was reused
    verifier = get_verifier("docker_shell", pool_size=1, parallelism=1)
    pivot = pivot_of(busybox, "ls -al", setup=("echo x > f",))
    # the expert's reference first (cached): a tainted second expert run would hide the fault as "unstable"
    assert verifier.verify_batch(pivot, [terminus("ls -al")])[0].reward == 1.0
    verdicts = verifier.verify_batch(
        pivot, [terminus("touch -d 2001-01-01 /app"), terminus("ls -al"), terminus("ls -la"), terminus("ls -a -l")]
    )
    assert verdicts[0].reward == 0.0
    assert [v.reward for v in verdicts[1:]] == [1.0, 1.0, 1.0], [v.reason for v in verdicts[1:]]


@pytest.mark.docker
def test_mode_is_part_of_the_change_set(busybox):
    pivot = pivot_of(busybox, "chmod +x run.sh", setup=("printf 'echo hi\\n' > run.sh && chmod 644 run.sh",))
    candidates = [terminus("touch run.sh"), terminus("chmod 755 run.sh")]
    verdicts = get_verifier("docker_shell").verify_batch(pivot, candidates)
    assert verdicts[0].reward == 0.0 and "run.sh" in verdicts[0].reason
    assert verdicts[1].reward == 1.0, verdicts[1].reason


@pytest.mark.docker
def test_state_that_is_not_a_file_keeps_a_container_out_of_the_pool(busybox, backend):
    b = backend(pool_size=1, parallelism=1)
    spec = SandboxSpec(image=busybox, workdir="/app")
    b.run_group(spec, (), [["true"]])
    reused = b.stats["containers_reused"]
    assert reused == 1  # an action that changed nothing gives its container back
    b.run_group(spec, (), [["echo leak > /dev/shm/leak"]])  # tmpfs: not in the layers, emptied only later
    assert b.stats["containers_reused"] == reused
    b.drain()  # the refill: a fresh container
    b.run_group(spec, (), [["true"]])
    assert b.stats["containers_reused"] == reused + 1


@pytest.mark.docker
def test_the_timeout_holds_for_the_whole_action(busybox, backend):
    b = backend(action_timeout=10.0, pool_size=0)
    spec = SandboxSpec(image=busybox, workdir="/app")
    # each command stays well under 10 s; all four together do not
    effect = b.run(spec, (), ["sleep 3 && echo step"] * 4)
    assert effect.killed == "timeout"
    assert effect.stdout.count("step") <= 3


@pytest.mark.docker
def test_a_change_set_past_its_bounds_scores_zero_with_the_reason(busybox):
    verifier = get_verifier("docker_shell", max_changed_paths=300)
    pivot = pivot_of(busybox, "seq 1 100 | xargs touch")
    bad, fine = verifier.verify_batch(pivot, [terminus("seq 1 1000 | xargs touch"), terminus("seq 100 | xargs touch")])
    assert bad.reward == 0.0 and bad.error is None
    assert "change set cap" in bad.reason and "more than 300 changed paths" in bad.reason
    assert fine.reward == 1.0, fine.reason


@pytest.mark.docker
def test_a_deep_directory_is_a_verdict(busybox):
    pivot = pivot_of(busybox, "mkdir d")
    (verdict,) = get_verifier("docker_shell").verify_batch(
        pivot, [terminus("i=0; while [ $i -lt 1500 ]; do mkdir d && cd d; i=$((i+1)); done; cd /app")]
    )
    assert verdict.error is None and verdict.reward == 0.0
    assert "unexpected: /app/d/d" in verdict.reason


@pytest.mark.docker
def test_a_failure_inside_one_run_is_an_error_verdict_not_a_rerun(busybox, monkeypatch):
    calls = []

    def broken(*args, **kwargs):
        calls.append(1)
        raise RecursionError("maximum recursion depth exceeded")

    verifier = get_verifier("docker_shell")
    pivot = pivot_of(busybox, "ls")
    verifier.verify_batch(pivot, [terminus("ls")])  # the expert's reference, cached
    monkeypatch.setattr(act, "scan_upper", broken)
    results = VerifierChain([("docker_shell", verifier)]).verify_batch(pivot, [terminus("ls -a"), terminus("ls -1")])
    errors = [r.verdicts["docker_shell"].error for r in results]
    assert all(e and "RecursionError" in e for e in errors), errors
    assert len(calls) == 2  # once per candidate: the chain did not run the group again one by one


@pytest.mark.docker
def test_an_expert_the_sandbox_stopped_is_no_reference(busybox):
    verifier = get_verifier("docker_shell", action_timeout=2.0)
    (verdict,) = verifier.verify_batch(pivot_of(busybox, "sleep 100"), [terminus("sleep 50")])
    # both time out with the same (empty) output: comparing them would accept anything that hangs
    assert verdict.reward == 0.0 and verdict.error and "timeout" in verdict.error


@pytest.mark.docker
@pytest.mark.parametrize("runner", [True, False], ids=["runner", "docker-exec"])
def test_an_ipc_object_keeps_a_container_out_of_the_pool(busybox, backend, docker_client, runner):
    b = backend(pool_size=1, parallelism=1, runner=runner)
    spec = SandboxSpec(image=busybox, workdir="/app")
    _, image = b.snapshot(spec, ())
    box = b._fleet.create(image, spec, "pool")
    assert (box.channel is not None) == runner
    try:
        _, clean = act.effect_of(box, spec, b.limits, ["true"])
        assert clean and b._pool.pristine(box)
        # an object owned by root in the container's IPC namespace: what a candidate leaves when it
        # hands its own to another uid (IPC_SET), which the per-uid clean-up then does not remove
        pid = docker_client.api.inspect_container(box.id)["State"]["Pid"]
        subprocess.run(["nsenter", "-t", str(pid), "--ipc", "ipcmk", "-M", "4096"], check=True, capture_output=True)
        _, clean = act.effect_of(box, spec, b.limits, ["true"])
        assert not (clean and b._pool.pristine(box))
    finally:
        dc.remove(box)


@pytest.mark.docker
def test_the_output_cap_holds_for_the_whole_action(busybox, backend):
    b = backend(pool_size=0)
    spec = SandboxSpec(image=busybox, workdir="/app")
    # each command prints 600 KB, under the 1 MB cap; the action prints 1.8 MB
    effect = b.run(spec, (), ["head -c 600000 /dev/zero | tr '\\0' a"] * 3)
    assert effect.killed == "output cap"


@pytest.mark.docker
def test_end_marks_printed_by_the_action_are_no_report(busybox, backend):
    b = backend(pool_size=0, parallelism=2)
    spec = SandboxSpec(image=busybox, workdir="/app")
    forger = "(i=0; while [ $i -lt 2000 ]; do printf '\\036PIVOT-END 0 /tmp' >&2; i=$((i+1)); done) & sleep 0.01; false"
    # eight distinct actions (identical ones would run once); whether a forged mark lands last is a race
    effects = b.run_group(spec, (), [[f"{forger} # {i}"] for i in range(8)])
    for effect in effects:
        assert effect.killed == "end mark forged" or (effect.exit_code, effect.cwd) == (1, "/app"), effect


@pytest.mark.docker
def test_the_cwd_is_the_kernels_not_what_the_action_prints(busybox):
    pivot = pivot_of(busybox, "cd project", setup=("mkdir project",))
    forged = [
        "printf '\\036PIVOT-END 0 /app/project' >&2; exit 0",  # the wrapper's end mark, then no wrapper
        "echo /app/project > /.pivot-run/cwd; exit 0",  # the saved state the next command would read
    ]
    verdicts = get_verifier("docker_shell").verify_batch(pivot, [terminus(c) for c in [*forged, "cd ./project/"]])
    assert [v.reward for v in verdicts] == [0.0, 0.0, 1.0], [v.reason for v in verdicts]
    assert all("cwd" in v.reason for v in verdicts[:2])
