"""The typed context marks (`SandboxContext`, `ReplayMark`, `RunFacts`): old files load, and write back the same.

`data/context_marks_v1.jsonl` holds pivots in the context shape written before these types (by hand,
as `pivot synthesize`, `pivot convert --tasks-dir` and `--check-replay` wrote them): two synthesized
pivots (one whose expert needs the network), an OpenHands run checked faithful, the pivot where its
replay diverged (state faithful, its expert unfinished), one after it (unsandboxed), and a
mini-swe-agent pivot left unsandboxed. No Docker: the verifier's skips come before any sandbox.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from pivot_core import Pivot, load_pivots
from pivot_sandbox import ReplayMark, RunFacts, SandboxContext, SandboxError, SandboxSpec, unsandbox

FIXTURE = Path(__file__).parent / "data" / "context_marks_v1.jsonl"
REASON = "exit code 0 where the run recorded 1: `curl -s example.org`"
UNFINISHED = "the expert's command was still running when the agent moved on (exit -1)"
HELLO_IMAGE = "pivot-gym/task:hello-world-0123abcd"

# id -> (image, replay_access, start_dir, expert_needs_network, expert_unfinished, snapshot key prefix)
SANDBOXES = {
    "synth/demo-notes#3": ("pivot-gym/busybox:1", False, "", False, "", "84335b0c51399353"),
    "synth/demo-offline-only#1": ("pivot-gym/task:demo-offline-only", True, "", True, "", "0134a21e2789d1d9"),
    "openhands/hello-world/run1#2": (HELLO_IMAGE, True, "/app", False, "", "b54b0437b80d60e8"),
    "openhands/hello-world/run1#4": (HELLO_IMAGE, True, "/app", False, UNFINISHED, "b54b0437b80d60e8"),
}
REPLAYS = {
    "openhands/hello-world/run1#2": ReplayMark(faithful=True),
    "openhands/hello-world/run1#4": ReplayMark(faithful=False, diverged_at=4, reason=REASON, state_faithful=True),
    "openhands/hello-world/run1#6": ReplayMark(faithful=False, diverged_at=4, reason=REASON),
}
UNSANDBOXED = {
    "openhands/hello-world/run1#6": f"the replay diverged at turn 4: {REASON}",
    "mini-swe-agent/hello-world/run2#2": (
        "turn 1: `export` changes the shell's state, which mini-swe-agent's fresh subshells do not keep"
    ),
}


@pytest.fixture(scope="module")
def old() -> dict[str, Pivot]:
    return {p.id: p for p in load_pivots(FIXTURE)}


def _raw_contexts() -> dict[str, dict[str, Any]]:
    rows = [json.loads(line) for line in FIXTURE.read_text().splitlines() if line.strip()]
    return {r["id"]: r["context"] for r in rows}


def test_a_file_written_before_the_types_loads_with_the_same_values(old):
    assert {pid: p.context for pid, p in old.items()} == _raw_contexts()
    for pid, pivot in old.items():
        sandbox = SandboxContext.from_context(pivot.context)
        if pid not in SANDBOXES:
            assert sandbox is None, pid
            continue
        image, access, start, network, unfinished, key = SANDBOXES[pid]
        spec = sandbox.spec
        assert (spec.image, spec.replay_access, spec.start_dir) == (image, access, start), pid
        assert (sandbox.expert_needs_network, sandbox.expert_unfinished, sandbox.extra) == (network, unfinished, {})
        # cached snapshots and verdicts are keyed by the spec: the same spec, the same key
        assert SandboxSpec.from_context(pivot.context) == spec and spec.key().startswith(key), pid
    assert {pid: ReplayMark.from_context(p.context) for pid, p in old.items() if "replay" in p.context} == REPLAYS
    assert {pid: RunFacts.from_context(p.context).unsandboxed for pid, p in old.items()} == {
        pid: UNSANDBOXED.get(pid, "") for pid in old
    }
    facts = RunFacts.from_context(old["openhands/hello-world/run1#4"].context)
    assert (dict(facts.exit_codes), facts.start_dir) == ({"c1": 0, "c2": -1}, "/app")


def test_the_types_write_back_the_shape_old_files_hold(old):
    for pid, pivot in old.items():
        context = dict(pivot.context)
        if (sandbox := SandboxContext.from_context(context)) is not None:
            assert sandbox.into(context) == context, pid
        if (replay := ReplayMark.from_context(context)) is not None:
            assert replay.into(context) == context, pid
        assert RunFacts.from_context(context).into(context) == context, pid
        # and as JSON, byte for byte once keys are sorted: old and new files are interchangeable
        again = RunFacts.from_context(context).into(context)
        assert json.dumps(again, sort_keys=True) == json.dumps(context, sort_keys=True)


def test_the_writers_write_what_they_wrote_before(old):
    from pivot_tasks import mark_network_pivots, task_spec
    from pivot_tasks._agent_runs import mark_unfinished_experts
    from pivot_tasks._replay_check import marked

    def without(pivot: Pivot, **changes: Any) -> Pivot:
        sandbox = SandboxContext.from_context(pivot.context)
        assert sandbox is not None
        return dataclasses.replace(pivot, context=dataclasses.replace(sandbox, **changes).into(pivot.context))

    notes, offline = old["synth/demo-notes#3"], old["synth/demo-offline-only#1"]
    synthesized = task_spec({"setup": ["mkdir -p project"]}, "pivot-gym/busybox:1")
    assert SandboxContext(synthesized).to_context() == notes.context["sandbox"]
    (flagged,) = mark_network_pivots([without(offline, expert_needs_network=False)])
    assert flagged.context == offline.context
    stopped = old["openhands/hello-world/run1#4"]
    (unfinished,) = mark_unfinished_experts([without(stopped, expert_unfinished="")])
    assert unfinished.context == stopped.context
    # `check_replay`'s marks, from the state before it ran (sandboxed, no mark) and where it diverged
    sandboxed = SandboxContext.from_context(stopped.context)
    for pid in ("openhands/hello-world/run1#2", "openhands/hello-world/run1#4", "openhands/hello-world/run1#6"):
        after = old[pid].context
        before = {k: v for k, v in after.items() if k not in ("replay", "unsandboxed", "sandbox")}
        found = (4, REASON)
        start = SandboxContext.from_context(after) or dataclasses.replace(sandboxed, expert_unfinished="")
        assert marked(dataclasses.replace(old[pid], context=start.into(before)), found).context == after, pid


@pytest.mark.parametrize(
    ("context", "named"),
    [
        ({"sandbox": 3}, "context.sandbox: expected an object"),
        ({"sandbox": {"setup": []}}, "context.sandbox.image"),
        ({"sandbox": {"image": 7}}, "context.sandbox.image: expected a string"),
        ({"sandbox": {"image": "i", "setup": [1]}}, "context.sandbox.setup"),
        ({"sandbox": {"image": "i", "workdir": "app"}}, "sandbox.workdir: expected an absolute path"),
        ({"sandbox": {"image": "i", "env": {"A": 1}}}, "context.sandbox.env"),
        ({"sandbox": {"image": "i", "replay_access": "yes"}}, "context.sandbox.replay_access"),
        ({"sandbox": {"image": "i", "expert_needs_network": 1}}, "context.sandbox.expert_needs_network"),
        ({"sandbox": {"image": "i", "expert_unfinished": True}}, "context.sandbox.expert_unfinished"),
        ({"replay": "faithful"}, "context.replay: expected an object"),
        ({"replay": {}}, "context.replay.faithful: expected true or false, got nothing"),
        ({"replay": {"faithful": "true"}}, "context.replay.faithful"),
        ({"replay": {"faithful": False, "diverged_at": "4"}}, "context.replay.diverged_at"),
        ({"replay": {"faithful": False, "diverged_at": -1}}, "context.replay.diverged_at"),
        ({"replay": {"faithful": True, "diverged_at": 2}}, "context.replay.diverged_at"),
        ({"replay": {"faithful": False, "reason": 3}}, "context.replay.reason"),
        ({"replay": {"faithful": False, "state_faithful": "yes"}}, "context.replay.state_faithful"),
        ({"replay": {"faithful": True, "checked_by": "x"}}, "context.replay.checked_by"),
        ({"exit_codes": {"c1": "0"}}, "context.exit_codes"),
        ({"exit_codes": [0]}, "context.exit_codes"),
        ({"start_dir": 1}, "context.start_dir"),
        ({"unsandboxed": True}, "context.unsandboxed"),
    ],
)
def test_a_malformed_value_raises_naming_its_key(context, named):
    with pytest.raises(SandboxError, match=named.replace(".", r"\.")):
        SandboxContext.from_context(context)
        ReplayMark.from_context(context)
        RunFacts.from_context(context)


def test_the_spec_reader_raises_too_instead_of_dropping():
    with pytest.raises(SandboxError, match="expert_needs_network"):
        SandboxSpec.from_context({"sandbox": {"image": "i", "expert_needs_network": "no"}})
    assert SandboxSpec.from_context({}) is None and SandboxSpec.from_context({"sandbox": None}) is None
    assert SandboxSpec.from_context({"sandbox": "img"}) == SandboxSpec(image="img")


def test_keys_the_sandbox_does_not_know_are_kept_and_written_back():
    context = {"sandbox": {"image": "i", "platform": "linux/arm64", "notes": ["by hand"]}, "other": 1}
    sandbox = SandboxContext.from_context(context)
    assert sandbox is not None and sandbox.extra == {"platform": "linux/arm64", "notes": ["by hand"]}
    written = sandbox.into(context)
    assert written["sandbox"]["platform"] == "linux/arm64" and written["other"] == 1
    assert SandboxContext.from_context(written) == sandbox
    with pytest.raises(SandboxError, match="'workdir'"):
        SandboxContext(SandboxSpec(image="i"), extra={"workdir": "/elsewhere"})


def test_round_trips():
    spec = SandboxSpec(
        image="i", setup=("a", "b"), workdir="/w", user="root", env={"A": "1"}, replay_access=True, start_dir="/s"
    )
    for sandbox in (
        SandboxContext(SandboxSpec(image="i")),
        SandboxContext(spec, expert_needs_network=True, expert_unfinished="killed", extra={"x": [1]}),
    ):
        context = sandbox.into({"k": "v"})
        assert SandboxContext.from_context(json.loads(json.dumps(context))) == sandbox
    for mark in (*REPLAYS.values(), ReplayMark(faithful=False, reason="could not run")):
        assert ReplayMark.from_context(json.loads(json.dumps(mark.into({})))) == mark
    for facts in (RunFacts(), RunFacts({"c": 2}, "/app", "why")):
        assert RunFacts.from_context(json.loads(json.dumps(facts.into({"k": 1})))) == facts
    assert RunFacts().into({"exit_codes": {}, "unsandboxed": "", "k": 1}) == {"k": 1}


def test_unsandbox_drops_the_sandbox_and_says_why(old):
    context = unsandbox(old["openhands/hello-world/run1#2"].context, "the replay diverged at turn 1: x")
    assert "sandbox" not in context and RunFacts.from_context(context).unsandboxed.endswith(": x")
    assert ReplayMark.from_context(context) == ReplayMark(faithful=True)  # nothing else changes
    with pytest.raises(SandboxError, match="reason"):
        unsandbox(context, "")


def test_docker_shell_skips_as_before(old):
    from pivot_core import Message
    from verifiers_plugins import get_verifier

    verifier = get_verifier("docker_shell")

    def reason(pivot: Pivot, context: dict[str, Any] | None = None) -> str:
        pivot = pivot if context is None else dataclasses.replace(pivot, context=context)
        (verdict,) = verifier.verify_batch(pivot, [Message("assistant", "ls")])
        assert not verdict.applicable, verdict
        return verdict.reason

    assert reason(old["synth/demo-offline-only#1"]) == "the expert action needs the network"
    assert reason(old["openhands/hello-world/run1#4"]) == f"not comparable: {UNFINISHED}"
    assert reason(old["openhands/hello-world/run1#6"]) == "pivot has no sandbox context"
    faithful = old["openhands/hello-world/run1#2"]
    unchecked = {k: v for k, v in faithful.context.items() if k != "replay"}
    assert reason(faithful, unchecked) == (
        "the replay of the agent's run was not checked against its recorded observations (--check-replay)"
    )
    diverged = ReplayMark(faithful=False, diverged_at=4, reason=REASON).into(faithful.context)
    assert reason(faithful, diverged) == f"the replay of the agent's run diverged from it: {REASON}"
    with pytest.raises(SandboxError, match=r"context\.replay\.faithful"):  # the chain makes it an error verdict
        reason(faithful, {**faithful.context, "replay": {"faithful": "yes"}})


def test_task_tests_skips_as_before(old):
    from pivot_core import Message
    from verifiers_plugins import get_verifier

    (verdict,) = get_verifier("task_tests").verify_batch(old["synth/demo-offline-only#1"], [Message("assistant", "ls")])
    assert not verdict.applicable and verdict.reason == "the expert action needs the network: tests cannot run it"
    (bare,) = get_verifier("task_tests").verify_batch(old["openhands/hello-world/run1#6"], [Message("assistant", "ls")])
    assert not bare.applicable and "no task context" in bare.reason
