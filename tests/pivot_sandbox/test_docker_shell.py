"""docker_shell on synthesized pivots: expert and equivalent rewrites score 1, wrong commands 0."""

from __future__ import annotations

import json

import pytest

from pivot_envs import Message
from pivot_sandbox import usable_backends
from verifiers_plugins import VerifierChain, get_verifier

pytestmark = pytest.mark.docker


def terminus(*commands: str) -> Message:
    body = {"analysis": "a", "plan": "p", "commands": [{"keystrokes": c + "\n", "duration": 0.1} for c in commands]}
    return Message("assistant", json.dumps(body))


def score(pivot, *candidates: str):
    verifier = get_verifier("docker_shell")
    return verifier.verify_batch(pivot, [terminus(c) for c in candidates])


def test_synthesis_records_real_outputs(demo_report, demo_pivots):
    status = {r["task_id"]: r for r in demo_report}
    assert status["demo-notes"]["status"] == "ok"
    assert "network" in status["demo-offline-only"]["reason"]
    assert "exited 127" in status["demo-missing-files"]["reason"]
    pivot = demo_pivots["wc -l todo.txt"]
    # the user turn after `cat notes.txt` holds what cat really printed in the container
    screens = [m.text for m in pivot.history if m.role == "user"]
    assert any("beta draft" in s and "gamma TODO two" in s for s in screens)
    assert pivot.context["sandbox"]["image"] == "pivot-gym/busybox:1"
    assert pivot.context["format"] == "terminus"


def test_expert_scores_one(demo_pivots):
    for command in ("ls -la", "grep TODO notes.txt > todo.txt", "sed -i 's/draft/final/' notes.txt"):
        (verdict,) = score(demo_pivots[command], command)
        assert verdict.accepted, (command, verdict)
        assert verdict.reward == 1.0
        assert "files" in verdict.details["matched"]


def test_equivalent_rewrites_score_one(demo_pivots):
    cases = {
        "ls -la": ["ls -al", "ls -a -l"],
        "grep TODO notes.txt": ["cat notes.txt | grep TODO", "grep -e TODO < notes.txt"],
        "sed -i 's/draft/final/' notes.txt": [
            "sed -i -e 's/draft/final/g' notes.txt",
            "awk '{sub(/draft/, \"final\")} 1' notes.txt > n.tmp && mv n.tmp notes.txt",
        ],
        "grep TODO notes.txt > todo.txt": ["cat notes.txt | grep TODO > todo.txt"],
    }
    for expert, rewrites in cases.items():
        verdicts = score(demo_pivots[expert], *rewrites)
        for rewrite, verdict in zip(rewrites, verdicts, strict=True):
            assert verdict.accepted, (expert, rewrite, verdict.reason, verdict.details)


def test_plausible_wrong_commands_score_zero(demo_pivots):
    cases = {
        "grep TODO notes.txt > todo.txt": ("grep draft notes.txt > todo.txt", "files"),
        "sed -i 's/draft/final/' notes.txt": ("sed -i 's/alpha/final/' notes.txt", "files"),
        "ls -la": ("ls", "stdout"),
        "cd project": ("cd /tmp", "cwd"),
    }
    for expert, (wrong, part) in cases.items():
        (verdict,) = score(demo_pivots[expert], wrong)
        assert not verdict.accepted and verdict.reward == 0.0, (expert, wrong)
        assert part in verdict.details["differed"], verdict.details
        assert verdict.reason


def test_nondeterministic_expert_parts_are_excluded(demo_pivots):
    for expert, same_cmd, other_cmd, path in (
        ("date > stamp.txt", "date >stamp.txt", "date > other.txt", "stamp.txt"),
        (
            "od -An -N8 -tx1 /dev/urandom > token.txt",
            "od -N8 -An -tx1 /dev/urandom > token.txt",
            "od -An -N8 -tx1 /dev/urandom > other.txt",
            "token.txt",
        ),
    ):
        (same, other) = score(demo_pivots[expert], same_cmd, other_cmd)
        assert same.accepted, same.details
        assert any(path in u for u in same.details["unstable"]), same.details
        assert not other.accepted


def test_pivot_without_sandbox_is_skipped(demo_pivots):
    from dataclasses import replace

    pivot = demo_pivots["ls -la"]
    bare = replace(pivot, context={k: v for k, v in pivot.context.items() if k != "sandbox"})
    (verdict,) = score(bare, "ls -la")
    assert verdict.applicable is False


def test_an_expert_that_never_finished_in_its_run_is_no_reference(demo_pivots):
    from dataclasses import replace

    pivot = demo_pivots["ls -la"]
    why = "the expert's command timed out in the run and was killed"
    stopped = replace(
        pivot, context={**pivot.context, "sandbox": {**pivot.context["sandbox"], "expert_unfinished": why}}
    )
    (verdict,) = score(stopped, "ls -la")
    assert verdict.applicable is False and why in verdict.reason


@pytest.mark.parametrize("name", [n for n, why in usable_backends().items() if why is None])
def test_unreachable_daemon_is_an_error_not_a_zero(demo_pivots, name):
    # the namespace backend takes its images from the same engine: no engine, an error on either
    verifier = get_verifier("docker_shell", backend=name, base_url="unix:///nonexistent/docker.sock")
    verdict = verifier.verify(demo_pivots["ls -la"], terminus("ls -la"))
    assert verdict.error and "Docker daemon not reachable" in verdict.error
    assert not verdict.accepted


def test_completion_without_commands_scores_zero(demo_pivots):
    verdict = get_verifier("docker_shell").verify(demo_pivots["ls -la"], Message("assistant", "I would list files"))
    assert verdict.reward == 0.0 and verdict.error is None and "no shell command" in verdict.reason


def test_chain_scores_group_and_decides_by_effect(demo_pivots):
    chain = VerifierChain.from_names(["turn_kind", "json_schema", "string_similarity", "docker_shell"])
    assert chain.names[-1] == "docker_shell"
    pivot = demo_pivots["grep TODO notes.txt > todo.txt"]
    results = chain.verify_batch(
        pivot,
        [terminus("cat notes.txt | grep TODO > todo.txt"), terminus("rm notes.txt"), Message("assistant", "not json")],
    )
    assert [r.reward for r in results] == [1.0, 0.0, 0.0]
    assert results[0].decided_by == "docker_shell"
    assert results[2].decided_by == "json_schema"


def test_a_file_the_expert_rewrites_with_varying_bytes_may_not_be_deleted_or_replaced_instead(busybox):
    # the expert's two runs append different bytes to log.txt, so its bytes are not compared: the file was
    # then compared by presence only, and deleting it (a "deleted" change is a change too) or emptying it scored 1
    from pivot_envs import Pivot

    history = (Message("user", "do it"), terminus("echo start > log.txt"), Message("user", "$ "))
    expert = "od -An -N4 -tx1 /dev/urandom >> log.txt"
    pivot = Pivot(
        "unstable#1", "terminal", history, terminus(expert), context={"sandbox": {"image": busybox, "workdir": "/app"}}
    )
    wrong = ["rm log.txt", "rm log.txt; mkdir log.txt", f"{expert}; chmod 600 log.txt", ": > log.txt"]
    same, *rejected = score(pivot, "od -N4 -An -tx1 /dev/urandom >>log.txt", *wrong)
    assert same.accepted, same.details
    assert "content of /app/log.txt" in same.details["unstable"], same.details
    for command, verdict in zip(wrong, rejected, strict=True):
        assert not verdict.accepted and verdict.error is None, (command, verdict)
        assert "either run of the expert" in verdict.details["differed"]["files"], (command, verdict.details)


def test_a_varying_name_and_a_varying_variable_still_bound_what_a_candidate_leaves(busybox):
    # the expert names its report after a random number and exports one: each run's name and value differ, so
    # the report was compared by count only (an empty one of any such name scored 1) and the variable not at all
    from pivot_envs import Pivot

    history = (Message("user", "do it"), terminus("echo start > log.txt"), Message("user", "$ "))
    expert = "n=$(od -An -N4 -tu4 /dev/urandom | tr -d ' '); echo \"report $n $n\" > report_$n.txt; export STAMP=$n"
    pivot = Pivot(
        "unstable#2", "terminal", history, terminus(expert), context={"sandbox": {"image": busybox, "workdir": "/app"}}
    )
    same = expert.replace("n=", "m=$(od -An -N4 -tu4 /dev/urandom | tr -d ' '); n=")
    empty = "touch report_7.txt; export STAMP=7"
    folder = "mkdir report_7.txt; export STAMP=7"
    unset = expert.replace("export STAMP=$n", "unset STAMP")
    command = expert.replace("export STAMP=$n", "export STAMP='rm -rf /'")
    accepted, *rejected = score(pivot, same, empty, folder, unset, command)
    assert accepted.accepted, accepted.details
    assert "shell state env:STAMP" in accepted.details["unstable"], accepted.details
    for candidate, verdict, part in zip(
        (empty, folder, unset, command), rejected, ("files", "files", "state", "state"), strict=True
    ):
        assert not verdict.accepted and verdict.error is None, (candidate, verdict)
        assert part in verdict.details["differed"], (candidate, verdict.details)


def test_a_clock_reading_is_masked_but_not_any_line_in_its_place(busybox):
    # `date` prints another line each run, so the line was masked whole: `pwd` (one line, nothing changed) scored 1
    from pivot_envs import Pivot

    history = (Message("user", "what time is it"), terminus("echo start > log.txt"), Message("user", "$ "))
    pivot = Pivot(
        "unstable#3", "terminal", history, terminus("date"), context={"sandbox": {"image": busybox, "workdir": "/app"}}
    )
    same, pwd, word = score(pivot, "busybox date", "pwd", "echo now")
    assert same.accepted, same.details
    assert "stdout line 1" in same.details["unstable"], same.details
    for verdict in (pwd, word):
        assert not verdict.accepted and "stdout" in verdict.details["differed"], verdict.details
