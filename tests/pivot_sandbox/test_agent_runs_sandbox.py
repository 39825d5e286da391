"""Agent-run pivots in the task's own image: OpenHands' editor calls replay as file changes.

hello-world by OpenHands (Terminal-Bench leaderboard log, read by path: canary, tests only): the
agent creates /app/hello.txt with its editor (13 bytes, no newline), fails a str_replace, then
rewrites the file with `echo`. The pivots after the editor's create see that file in the sandbox.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path
from types import SimpleNamespace

import gymnasium as gym
import pytest

import pivot_envs  # noqa: F401  (registers the env ids)
from pivot_core import Message, Pivot, ToolCall, convert_runs, write_pivots
from pivot_sandbox import SandboxSpec
from pivot_tasks import check_replay, replay_blocker, sandbox_pivots
from pivot_tasks._replay_check import Step, first_divergence
from verifiers_plugins import get_verifier


@pytest.fixture(scope="module")
def hello_env(shared_data: Path, docker_client, tmp_path_factory):
    runs = shared_data / "terminal" / "agent_runs" / "openhands-claude-4-sonnet" / "hello-world"
    pivots, _ = convert_runs(runs)
    sandboxed, report = sandbox_pivots(pivots, shared_data / "terminal" / "tasks")
    assert report["sandboxed"] == len(pivots) == 12, report
    checked, replay = check_replay(sandboxed)  # only a replay found faithful is judged in the sandbox
    assert replay["faithful"] == 12, replay
    path = tmp_path_factory.mktemp("hello") / "pivots.jsonl"
    write_pivots(checked, path)
    return gym.make("pivot/terminal-v0", dataset=str(path)).unwrapped


def test_a_replay_not_checked_against_the_run_is_not_judged_in_the_sandbox(hello_env):
    # the state is a replay of what the agent ran, in the task's image: where the harness had
    # installed a tool the image lacks (`curl` in OpenHands' runtime), the expert failed there and
    # every candidate that failed alike matched it (a wrong page of a server scored 1)
    from verifiers_plugins import get_verifier

    pivot = _at(hello_env, 'echo "Hello, world!" > /app/hello.txt')
    unchecked = dataclasses.replace(pivot, context={k: v for k, v in pivot.context.items() if k != "replay"})
    diverged = dataclasses.replace(pivot, context={**pivot.context, "replay": {"faithful": False, "reason": "x"}})
    verifier = get_verifier("docker_shell")
    for p, why in ((unchecked, "was not checked"), (diverged, "diverged")):
        (verdict,) = verifier.verify_batch(p, [Message("assistant", _call("echo hi > /app/hello.txt"))])
        assert not verdict.applicable and why in verdict.reason, verdict
    (judged,) = verifier.verify_batch(pivot, [Message("assistant", _call("echo hi > /app/hello.txt"))])
    assert judged.applicable and judged.reward == 0.0, judged


def _call(command: str) -> str:
    return "<tool_call>" + json.dumps({"name": "execute_bash", "arguments": {"command": command}}) + "</tool_call>"


def _at(env, command: str):
    for p in env.pivots:
        calls = p.expert.tool_calls
        if calls and calls[0].name == "execute_bash" and calls[0].parsed_arguments()["command"] == command:
            return p
    raise AssertionError(command)


def test_the_editors_file_is_in_the_replayed_state(hello_env):
    # the first `od -c` comes right after the editor's create: 13 bytes, no newline
    pivot = _at(hello_env, "od -c /app/hello.txt")
    assert "Hello, world!" not in (pivot.history[-1].content or "")  # it follows hexdump's failure
    (same, other) = hello_env.score(pivot, [_call("od -c hello.txt"), _call("cat /app/hello.txt")])
    assert same.reward == 1.0 and same.decided_by == "docker_shell", same.verdicts["docker_shell"].reason
    assert other.reward == 0.0


def test_an_equivalent_rewrite_scores_1_and_a_wrong_or_destructive_one_0(hello_env):
    pivot = _at(hello_env, 'echo "Hello, world!" > /app/hello.txt')
    good, wrong, extra = hello_env.score(
        pivot,
        [
            _call("printf 'Hello, world!\\n' > /app/hello.txt"),
            _call("echo hi > /app/hello.txt"),
            _call('echo "Hello, world!" > /app/hello.txt; rm -rf /app/*'),
        ],
    )
    assert good.reward == 1.0, good.verdicts["docker_shell"].reason
    assert wrong.reward == 0.0 and extra.reward == 0.0


def _pivot(history, harness="openhands", context=None):
    return Pivot(
        id="p#1",
        domain="terminal",
        history=tuple(history),
        expert=Message("assistant", "x"),
        context={"harness": harness, **(context or {})},
    )


def test_replay_blockers_name_what_a_replay_cannot_rebuild():
    def call(name, args, cid="c1"):
        return Message("assistant", tool_calls=(ToolCall(name, json.dumps(args), cid),))

    # a cell replays in a kernel-equivalent process; a magic it does not run is refused
    assert replay_blocker(_pivot([call("execute_ipython_cell", {"code": "x=1"})]), "/app") is None
    magic = replay_blocker(_pivot([call("execute_ipython_cell", {"code": "%timeit x=1"})]), "/app")
    assert magic == "turn 1: an IPython cell: the magic %timeit is not replayed"
    expert = dataclasses.replace(_pivot([]), expert=call("execute_ipython_cell", {"code": "%%bash\nls"}))
    assert replay_blocker(expert, "/app") == "the expert's IPython cell: the cell magic '%%bash' is not replayed"
    assert "undo_edit" in replay_blocker(
        _pivot([call("str_replace_editor", {"command": "undo_edit", "path": "/a"})]), "/app"
    )
    assert "is_input" in replay_blocker(_pivot([call("execute_bash", {"command": "y", "is_input": "true"})]), "/app")
    running = _pivot([call("execute_bash", {"command": "sleep 999"})], context={"exit_codes": {"c1": -1}})
    assert "still running" in replay_blocker(running, "/app")
    assert replay_blocker(_pivot([call("execute_bash", {"command": "ls"})]), "/app") is None
    # mini-swe-agent's commands replay as it ran them: each in a fresh subshell, a timed-out one killed alike
    mini = [Message("assistant", "THOUGHT: go.\n\n```bash\ncd /tmp && export X=1 && make\n```")]
    assert replay_blocker(_pivot(mini, "mini-swe-agent"), "/app") is None
    timed = [Message("user", "The last command <command>x</command> timed out and has been killed.")]
    assert replay_blocker(_pivot(timed, "mini-swe-agent"), "/app") is None


# -- replay fidelity (--check-replay) ---------------------------------------------------------------


@pytest.fixture(scope="module")
def hello_pivots(shared_data: Path, docker_client):
    runs = shared_data / "terminal" / "agent_runs" / "openhands-claude-4-sonnet" / "hello-world"
    pivots, _ = convert_runs(runs)
    sandboxed, _ = sandbox_pivots(pivots, shared_data / "terminal" / "tasks")
    return sandboxed


def test_a_faithful_replay_marks_every_pivot_faithful(hello_pivots):
    checked, report = check_replay(hello_pivots)
    expected = {"runs_checked": 1, "sandboxed": 12, "unsandboxed": {}, "faithful": 12, "unfaithful": 0}
    assert report == {**expected, "diverged": {}, "divergences": []}
    assert all(p.context["replay"] == {"faithful": True} and p.context["sandbox"] for p in checked)


def _tamper(pivots, command: str, output: str):
    """The run as if `command` had printed `output` (as a command that reached the network would differ)."""
    out = []
    for p in pivots:
        history = []
        for m in p.history:
            calls = {c.id: c for prev in p.history for c in prev.tool_calls}
            call = calls.get(m.tool_call_id) if m.role == "tool" else None
            if call is not None and call.parsed_arguments().get("command") == command:
                recorded = {**m.extra["recorded"], "output": output}
                m = Message("tool", m.content, tool_call_id=m.tool_call_id, extra={"recorded": recorded})
            history.append(m)
        out.append(dataclasses.replace(p, history=tuple(history)))
    return out


def test_the_first_divergence_marks_that_pivot_and_the_later_ones(hello_pivots):
    checked, report = check_replay(_tamper(hello_pivots, "pwd", "/root"))
    assert report["unfaithful"] > 0 and report["diverged"] == {"output differs from the recorded one": 1}
    at = next(
        p.context["turn_index"]
        for p in checked
        if p.expert.tool_calls and p.expert.tool_calls[0].name == "execute_bash"
    )
    (where,) = report["divergences"]  # which run, where, and the command
    assert where["reason"] == "output differs from the recorded one: 'pwd'" and where["turn"] == at, where
    for p in checked:
        if p.context["turn_index"] < at:
            assert p.context["replay"] == {"faithful": True} and p.context["sandbox"]
        else:
            assert p.context["replay"]["faithful"] is False and p.context["replay"]["diverged_at"] == at
        if p.context["turn_index"] > at:
            assert "sandbox" not in p.context and "diverged" in p.context["unsandboxed"]
    # the report counts them as the check left them (`pivot convert --check-replay --json` prints it)
    later = sum(p.context["turn_index"] > at for p in checked)
    assert report["sandboxed"] == len(checked) - later
    assert report["unsandboxed"] == {"the replay diverged: output differs from the recorded one": later}
    # the pivot whose own action diverged keeps its sandbox (its state is the agent's: an episode
    # may start there), and docker_shell still judges none of its candidates
    (pivot,) = [p for p in checked if p.context["turn_index"] == at]
    assert pivot.context["replay"]["state_faithful"] is True and pivot.context["sandbox"]
    verdict = get_verifier("docker_shell").verify(pivot, pivot.expert)
    assert not verdict.applicable and "diverged" in verdict.reason, verdict


def test_a_replayed_command_may_run_as_long_as_the_agent_let_its_own_run():
    from pivot_tasks._replay_check import CHECK_TIMEOUT, _asked_timeouts

    asked = ToolCall("execute_bash", json.dumps({"command": "make", "timeout": 600}), "c1")
    plain = ToolCall("execute_bash", json.dumps({"command": "ls"}), "c2")
    odd = ToolCall("execute_bash", json.dumps({"command": "ls", "timeout": "soon"}), "c3")
    chat = [Message("assistant", None, tool_calls=(asked, plain, odd))]
    assert _asked_timeouts(chat) == [600.0] and CHECK_TIMEOUT < 600


def test_the_replay_stops_after_the_first_exit_code_that_differs(busybox):
    # nothing after a divergence counts: the rest of the run (a download that waits minutes) is not replayed
    from pivot_sandbox import docker_backend
    from pivot_tasks._replay_check import _exit_code_differs

    steps = [Step(1, ("true",), 0, None), Step(2, ("echo a", "false"), 0, None), Step(3, ("sleep 30",), 0, None)]
    backend = docker_backend()
    runs = backend.transcript(
        SandboxSpec(image=busybox), ["true", "echo a", "false", "sleep 30"], stop=_exit_code_differs(steps)
    )
    assert [raw.exit_code for raw, _ in runs] == [0, 0, 1]
    assert first_divergence(steps, [runs, runs])[0] == 2


def test_exit_codes_are_compared_always():
    step = Step(3, ("false",), 0, None)
    ok = SimpleNamespace(killed=None, exit_code=0, stdout=b"")
    bad = SimpleNamespace(killed=None, exit_code=1, stdout=b"")
    assert first_divergence([step], [[(ok, "/app")], [(ok, "/app")]]) is None
    assert first_divergence([step], [[(bad, "/app")], [(bad, "/app")]])[0] == 3
    # output that differs between the two replays is no evidence either way
    loud = Step(4, ("date",), 0, "Mon")
    first, second = (
        SimpleNamespace(killed=None, exit_code=0, stdout=b"Tue"),
        SimpleNamespace(killed=None, exit_code=0, stdout=b"Wed"),
    )
    assert first_divergence([loud], [[(first, "/app")], [(second, "/app")]]) is None
    # two listings a minute apart agree with each other, and both lack the run's `tests` folder
    listing = Step(2, ("ls -la",), 0, "drwxr-xr-x 2 root root 4096 Aug  2 22:10 tests\n-rw-r--r-- 1 root root 20 maze")
    first, second = (
        SimpleNamespace(killed=None, exit_code=0, stdout=f"-rw-r--r-- 1 root root 20 Dec  6 08:{m} maze\n".encode())
        for m in ("59", "00")
    )
    assert first_divergence([listing], [[(first, "/app")], [(second, "/app")]])[0] == 2


def test_a_command_still_running_in_the_run_recorded_part_of_its_output():
    # OpenHands' vim-terminal-task run: `vim text_processor.py` came back with exit -1 and the screen so
    # far; a replay's vim (no terminal) prints another screen and exits, which is no divergence
    from pivot_tasks._replay_check import recorded_steps

    call = ToolCall("execute_bash", json.dumps({"command": "vim text_processor.py"}), id="c1")
    done = ToolCall("execute_bash", json.dumps({"command": "ls"}), id="c2")
    chat = [
        Message("assistant", None, tool_calls=(call, done)),
        Message("tool", "~\n~", tool_call_id="c1", extra={"recorded": {"exit_code": -1, "output": "~\n~"}}),
        Message("tool", "a.txt", tool_call_id="c2", extra={"recorded": {"exit_code": 0, "output": "a.txt"}}),
    ]
    steps = recorded_steps(chat, {"harness": "openhands"})
    assert [(s.exit_code, s.output, s.finished) for s in steps] == [(-1, None, False), (0, "a.txt", True)]


def test_a_command_the_harness_killed_at_its_timeout_is_checked_by_the_next_observations():
    # cartpole-rl-training: mini-swe-agent killed `python train_agent.py` at its timeout; the replay
    # runs it for that timeout and kills it the same way (137); one that ends here before it, failing
    # or not, is no divergence by itself: what it left is checked by the observations after it
    from pivot_core import KILLED_STATUS, mini_swe_agent_command
    from pivot_tasks._replay_check import recorded_steps

    answer = "The last command <command>python train_agent.py</command> timed out and has been killed.\n"
    chat = [Message("assistant", "```bash\npython train_agent.py\n```"), Message("user", answer)]
    (step,) = recorded_steps(chat, {"harness": "mini-swe-agent", "command_timeout": 7})
    assert step.timed_out and step.exit_code == KILLED_STATUS and step.output is None
    assert step.commands == (mini_swe_agent_command("python train_agent.py", 7.0),)
    killed = SimpleNamespace(killed=None, exit_code=KILLED_STATUS, stdout=b"")
    assert first_divergence([step], [[(killed, "/app")], [(killed, "/app")]]) is None
    # held-back split, hf-model-inference: `pip install transformers torch flask` was killed in the run and
    # completes here from the registries' mirror; the run's next `pip install flask` downloaded it, the replay's
    # finds it installed: the divergence is that next step's, where the state shows
    ended = SimpleNamespace(killed=None, exit_code=0, stdout=b"")
    assert first_divergence([step], [[(ended, "/app")], [(ended, "/app")]]) is None
    again = Step(1, ("pip install flask",), 0, "Collecting flask\nInstalling collected packages: flask")
    satisfied = SimpleNamespace(killed=None, exit_code=0, stdout=b"Requirement already satisfied: flask\n")
    turn, reason = first_divergence([step, again], [[(ended, "/app"), (satisfied, "/app")]] * 2)
    assert turn == 1 and reason == "output differs from the recorded one: 'pip install flask'", reason
    stopped = SimpleNamespace(killed="timeout", exit_code=None, stdout=b"")  # the sandbox's own limit: no record
    assert "was stopped" in first_divergence([step], [[(stopped, "/app")], [(stopped, "/app")]])[1]
    # one that fails here before the timeout (a `pip install` that waited on a download in the run fails at
    # once here) is no divergence by itself: the next observations check what it left
    failed = SimpleNamespace(killed=None, exit_code=1, stdout=b"ERROR: no matching distribution\n")
    look = Step(1, ("pip list | grep -c torch",), 1, "0")
    same, other = (SimpleNamespace(killed=None, exit_code=1, stdout=out) for out in (b"0\n", b"3\n"))
    assert first_divergence([step, look], [[(failed, "/app"), (same, "/app")]] * 2) is None
    assert first_divergence([step, look], [[(failed, "/app"), (other, "/app")]] * 2)[0] == 1
    # and the transcript goes on past it: the replay stops only where the same rule finds a divergence
    # (get-bitcoin-nodes: it stopped after a killed `pip install` that failed here, and the next step was
    # reported "the replay stopped before 'pip install Flask'")
    from pivot_tasks._replay_check import _exit_code_differs

    stop = _exit_code_differs([step, look])
    assert not stop(0, failed) and not stop(0, killed) and not stop(0, ended)
    assert stop(1, other) is False and stop(1, SimpleNamespace(killed=None, exit_code=0, stdout=b""))


def test_a_directorys_link_count_is_the_filesystems_not_the_states():
    # organization-json-generator: the run's overlayfs listed `data` with 1 link, a replay here with 2
    recorded = "drwxr-xr-x 1 root root 4096 Aug  8 06:25 data\n-rw-r--r-- 1 root root 3420 Aug  2 22:10 schema.json"
    same = b"drwxr-xr-x 2 root root 4096 Dec  2 18:46 data\n-rw-r--r-- 1 root root 3420 Dec  2 18:17 schema.json\n"
    other = b"drwxr-xr-x 2 root root 4096 Dec  2 18:46 data\n-rw-r--r-- 2 root root 3420 Dec  2 18:17 schema.json\n"
    step = Step(2, ("ls -la",), 0, recorded)
    for stdout, want in ((same, None), (other, 2)):
        raw = SimpleNamespace(killed=None, exit_code=0, stdout=stdout)
        found = first_divergence([step], [[(raw, "/app")], [(raw, "/app")]])
        assert (found and found[0]) == want, found  # a file's link count (a hard link) still counts


def diverged_at(step: Step, stdout: bytes, exit_code: int = 0) -> int | None:
    """The turn where `step` diverges when both replays printed `stdout` and exited `exit_code` (None: faithful)."""
    raw = SimpleNamespace(killed=None, exit_code=exit_code, stdout=stdout)
    found = first_divergence([step], [[(raw, "/app")], [(raw, "/app")]])
    return found[0] if found else None


def test_a_compressed_archives_size_may_move_by_what_the_clock_in_its_headers_explains():
    # decommissioning-service: `tar -czf` of the data the image build made, listed with `ls -la`: 245 bytes in
    # the OpenHands run, 246 in mini-swe-agent's, 247 here (the members' mtimes are each build's clock)
    recorded = "-rw-r--r-- 1 root root 245 Jul 11 23:21 sensitive_files.tar.gz\nsensitive_service_data/\n"
    step = Step(5, ("ls -la sensitive_files.tar.gz && tar -tzf sensitive_files.tar.gz",), 0, recorded)
    found = functools.partial(diverged_at, step)

    assert found(b"-rw-r--r-- 1 root root 247 Dec  7 02:34 sensitive_files.tar.gz\nsensitive_service_data/\n") is None
    # another size than the clock explains, another member, another name, mode or owner: a divergence
    assert found(b"-rw-r--r-- 1 root root 2450 Dec  7 02:34 sensitive_files.tar.gz\nsensitive_service_data/\n") == 5
    assert found(b"-rw-r--r-- 1 root root 247 Dec  7 02:34 sensitive_files.tar.gz\nother/\n") == 5
    assert found(b"-rw-r--r-- 1 root root 247 Dec  7 02:34 sensitive_file.tar.gz\nsensitive_service_data/\n") == 5
    assert found(b"-rw-rw-rw- 1 root root 247 Dec  7 02:34 sensitive_files.tar.gz\nsensitive_service_data/\n") == 5
    # a file that is not a compressed archive: its size is the state's
    plain = Step(5, ("ls -la notes.txt",), 0, "-rw-r--r-- 1 root root 245 Jul 11 23:21 notes.txt")
    assert diverged_at(plain, b"-rw-r--r-- 1 root root 247 Dec  7 02:34 notes.txt\n") == 5


def test_cli_check_replay_reports_faithful_pivots(shared_data: Path, docker_client, tmp_path):
    from typer.testing import CliRunner

    from pivot_cli import app

    src = shared_data / "terminal" / "agent_runs" / "openhands-claude-4-sonnet" / "hello-world"
    tasks = shared_data / "terminal" / "tasks"
    out = tmp_path / "hello.jsonl"
    args = ["convert", str(src), str(out), "--tasks-dir", str(tasks), "--check-replay", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.stdout
    report = json.loads(result.stdout)
    assert (report["runs"], report["pivots"], report["sandboxed"], report["faithful"]) == (1, 12, 12, 12)
    assert report["skipped"] == [] and report["diverged"] == {}
    alone = CliRunner().invoke(app, ["convert", str(src), str(out), "--check-replay"])
    assert alone.exit_code == 1 and "--tasks-dir" in alone.stderr


def test_a_tab_printed_as_spaces_in_mini_swe_agents_log_is_the_same_output():
    # raman-fitting: `head -20 graphene.dat` prints tab-separated columns; agent.log (through rich) shows
    # them at 8-column stops, and the replay diverged there before. A trajectory file keeps tabs as tabs
    from pivot_tasks._replay_check import recorded_steps

    answer = "<returncode>0</returncode>\n<output>\n47183,554644    19261,547207\n1,5     2\n</output>"
    chat = [Message("assistant", "THOUGHT: look.\n\n```bash\nhead -2 graphene.dat\n```"), Message("user", answer)]
    replayed = SimpleNamespace(killed=None, exit_code=0, stdout=b"47183,554644\t19261,547207\r\n1,5\t2\r\n")
    runs = [[(replayed, "/app")]] * 2
    (logged,) = recorded_steps(chat, {"harness": "mini-swe-agent", "format": "mini-swe-agent-log"})
    assert first_divergence([logged], runs) is None
    (kept,) = recorded_steps(chat, {"harness": "mini-swe-agent", "format": "mini-swe-agent-trajectory"})
    assert "output differs" in first_divergence([kept], runs)[1]
    # spaces are not tabs the other way round: a replay that printed other spaces still diverges
    other = SimpleNamespace(killed=None, exit_code=0, stdout=b"47183,554644 19261,547207\n1,5 2\n")
    assert first_divergence([logged], [[(other, "/app")]] * 2) is not None


def test_unsandboxed_reasons_are_counted_without_their_turn_and_quoted_command():
    from pivot_tasks import unsandboxed_counts

    def pivot(n: int, why: str | None, sandbox: dict | None = None) -> Pivot:
        context = {"unsandboxed": why} if why else {}
        context |= {"sandbox": sandbox} if sandbox else {}
        return Pivot(f"r#{n}", "terminal", (Message("user", "go"),), Message("assistant", "ok"), context=context)

    diverged = "the replay diverged at turn {}: output differs from the recorded one: {}"
    pivots = [
        pivot(1, diverged.format(4, "'ls -la'")),
        pivot(2, diverged.format(50, repr("strings x || grep -a '[[:print:]'"))),  # quoted with "..."
        pivot(3, "turn 7: an IPython cell (the kernel's state is not replayed)"),
        pivot(4, None, {"image": "pivot-gym/task:t"}),
    ]
    assert unsandboxed_counts(pivots) == {
        "the replay diverged: output differs from the recorded one": 2,
        "an IPython cell (the kernel's state is not replayed)": 1,
    }


def test_a_date_printed_in_dates_own_format_is_the_clocks_not_the_states():
    # processing-pipeline: the agent's script writes `Generated on: $(date)` into its report and `cat`s it
    recorded = "=== ANALYSIS REPORT ===\nGenerated on: Sat Jul 12 00:02:54 UTC 2025\nData summary: TEST DATA\n"
    step = Step(56, ("cat /data/output/final_report.txt",), 0, recorded)
    found = functools.partial(diverged_at, step)

    assert (
        found(b"=== ANALYSIS REPORT ===\nGenerated on: Mon Dec  7 09:12:03 UTC 2026\nData summary: TEST DATA\n") is None
    )
    assert found(b"=== ANALYSIS REPORT ===\nGenerated on: Mon Dec  7 09:12:03 2026\nData summary: TEST DATA\n") is None
    # the rest of the report is the state's
    assert found(b"=== ANALYSIS REPORT ===\nGenerated on: Mon Dec  7 09:12:03 UTC 2026\nData summary: OTHER\n") == 56
    assert found(b"=== ANALYSIS REPORT ===\nCreated on: Mon Dec  7 09:12:03 UTC 2026\nData summary: TEST DATA\n") == 56


def test_the_sandboxs_host_name_compares_equal_to_a_terminal_bench_containers():
    # git-workflow-hack: `git commit` with no identity printed the run's container id as its host name;
    # the sandbox's was `pivot-sandbox`, and the replay diverged there
    from pivot_sandbox.contract.hardening import HOSTNAME

    recorded = "fatal: unable to auto-detect email address (got 'root@5d2c0e8b71fa.(none)')"
    step = Step(52, ("git commit -m 'Initial commit'",), 128, recorded)
    replayed = recorded.replace("5d2c0e8b71fa", HOSTNAME).encode()
    assert diverged_at(step, replayed, 128) is None
    assert diverged_at(step, b"fatal: unable to auto-detect email address (got 'root@web.(none)')", 128) == 52
