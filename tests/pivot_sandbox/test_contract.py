"""The sandbox backend contract (`pivot_sandbox.SandboxBackend`) and its checker, on every registered backend.

The built-in backends pass the checker live (an echo, a group, a transcript, a stopped sleep); a
backend a plugin registers is checked before its first use, may be named by `PIVOT_SANDBOX`, and one
that breaks the contract is refused with what it lacks, as an error verdict, never a reward.
"""

from __future__ import annotations

import json

import pytest

from pivot_sandbox import (
    BackendContractError,
    SandboxBackend,
    SandboxError,
    SandboxSpec,
    check_backend,
    usable_backends,
)
from verifiers_plugins import get_verifier, hookimpl, sandbox_backend

pytestmark = pytest.mark.docker

BACKENDS = [name for name, why in usable_backends().items() if why is None]


def terminus(command):
    from pivot_core import Message

    keys = {"analysis": "a", "plan": "p", "commands": [{"keystrokes": command + "\n", "duration": 0.1}]}
    return Message("assistant", json.dumps(keys))


class Relay:
    """A third-party backend as a plugin would write one: it hands every call to a built-in backend."""

    name = "relay"
    live_sessions = False

    def __init__(self, inner, **_config):
        self.inner, self.limits, self.calls = inner, inner.limits, 0

    @property
    def closed(self):
        return self.inner.closed

    def run(self, spec, history, commands):
        self.calls += 1
        return self.inner.run(spec, history, commands)

    def run_group(self, spec, history, actions):
        self.calls += 1
        return self.inner.run_group(spec, history, actions)

    def snapshot_id(self, spec, history):
        return "relay:" + self.inner.snapshot_id(spec, history)

    def backend_for(self, spec, history):
        return self, None

    def transcript(self, spec, commands, timeout=None, stop=None):
        return self.inner.transcript(spec, commands, timeout, stop)

    def image_id(self, tag):
        return self.inner.image_id(tag)

    def drain(self):
        self.inner.drain()

    def close(self):
        pass

    def gc(self, everything=False):
        return {}


class NoTranscript(Relay):
    """A backend that forgot a method of the contract."""

    name = "no-transcript"
    transcript = None


def register(host, name, factory):
    class Plugin:
        @hookimpl
        def register_sandboxes(self, register):
            register(name, factory)

    host.register_plugin(Plugin(), name=f"{name}-sandbox")


@pytest.mark.parametrize("name", BACKENDS)
def test_every_built_in_backend_keeps_the_contract_at_work(name, busybox):
    backend = sandbox_backend(name, action_timeout=3.0)
    assert isinstance(backend, SandboxBackend) and backend.name == name
    spec = SandboxSpec(image=busybox, setup=("echo set-up > setup.txt",))
    check_backend(backend, spec)  # raises naming every broken part


@pytest.mark.parametrize("name", BACKENDS)
def test_each_backend_replays_a_transcript_itself(name, busybox):
    # the replay check runs on the backend that will judge: the namespace backend has its own transcript
    backend = sandbox_backend(name)
    spec = SandboxSpec(image=busybox, setup=("mkdir -p project",))
    steps = backend.transcript(spec, ["cd project", "pwd", "echo hi > a.txt; cat a.txt", "exit 4"])
    assert [cwd for _, cwd in steps][:3] == [f"{spec.workdir}/project"] * 3
    assert steps[2][0].stdout.strip() == b"hi" and steps[3][0].exit_code == 4
    stopped = backend.transcript(spec, ["true", "false", "true"], stop=lambda i, step: step.exit_code != 0)
    assert len(stopped) == 2


def test_a_plugin_backend_is_checked_chosen_by_name_and_judges(fresh_host, monkeypatch, demo_pivots):
    from pivot_sandbox import docker_backend

    made = []

    def relay(**config):
        made.append(Relay(docker_backend(**config)))
        return made[-1]

    register(fresh_host, "relay", relay)
    monkeypatch.setenv("PIVOT_SANDBOX", "relay")
    verifier = get_verifier("docker_shell", action_timeout=6.0)
    assert verifier.backend_name == "relay"
    (verdict,) = verifier.verify_batch(demo_pivots["ls -la"], [terminus("ls -al")])
    assert verdict.reward == 1.0 and not verdict.error, verdict
    assert made and made[-1].calls >= 1  # the relay ran the candidate, not a built-in backend by itself


def test_a_backend_that_breaks_the_contract_is_refused_with_what_it_lacks(fresh_host, demo_pivots):
    from pivot_sandbox import docker_backend

    register(fresh_host, "no-transcript", lambda **config: NoTranscript(docker_backend(**config)))
    with pytest.raises(BackendContractError, match="no method `transcript`"):
        sandbox_backend("no-transcript")
    verifier = get_verifier("docker_shell", backend="no-transcript")
    (verdict,) = verifier.verify_batch(demo_pivots["ls -la"], [terminus("ls -al")])
    assert verdict.error and "transcript" in verdict.error and verdict.reward == 0.0, verdict


def test_the_static_check_names_each_missing_or_mistyped_part():
    class Bare:
        name = 3

    with pytest.raises(BackendContractError) as caught:
        check_backend(Bare())
    problems = " | ".join(caught.value.problems)
    for part in ("`name` is int", "no `limits`", "no `closed`", "no method `run_group`", "no method `image_id`"):
        assert part in problems, problems
    assert isinstance(caught.value, SandboxError)  # the verifier's error path catches it


def test_an_unknown_backend_name_says_what_is_registered(monkeypatch):
    from verifiers_plugins.errors import UnknownVerifier

    monkeypatch.setenv("PIVOT_SANDBOX", "namespaec")
    with pytest.raises(UnknownVerifier, match="namespace"):
        get_verifier("docker_shell")
