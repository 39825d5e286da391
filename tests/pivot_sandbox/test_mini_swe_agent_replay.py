"""mini-swe-agent runs replayed the way the harness ran them, converted and checked end to end.

mini-swe-agent runs every command as `subprocess.run(command, shell=True, timeout=...)`: a fresh
`/bin/sh` from its working directory (a `cd` inside one command never reaches the next), killed at
its timeout (the shell alone: what it started lives on, and its output pipe is no longer read).
The runs here are written in the harness's own transcript format (`sessions/agent.log` as rich
printed it, with `results.json` beside it), on the bundled CI task hello-world; what each records
is what mini-swe-agent 1.7 answered on that image (read there with the harness's own
`subprocess.run` calls). Each is converted with `--tasks-dir --check-replay` (the CLI, or the
library functions it calls) and replayed on every backend this machine can run.
"""

from __future__ import annotations

import dataclasses
import json
from importlib import resources
from pathlib import Path

import pytest

from pivot_core import Message, Pivot, convert_runs
from pivot_sandbox import usable_backends
from pivot_tasks import check_replay, sandbox_pivots
from verifiers_plugins import get_verifier, sandbox_backend

pytestmark = pytest.mark.docker

BACKENDS = [name for name, why in usable_backends().items() if why is None]
TASKS = Path(str(resources.files("pivot_core") / "data" / "terminal_tasks"))
RULE = "\x1b[92m" + "─" * 160 + "\x1b[0m\r\n"
TIMED_OUT = (
    "The last command <command>{}</command> timed out and has been killed.\nThe output of the command was:\n"
    " <output>\n\n</output>\nPlease try another command and make sure to avoid those requiring interactive input."
)
SUBMIT = ("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", None)
HELLO = ('echo "Hello, world!" > hello.txt', "<returncode>0</returncode>\n<output>\n</output>")
CD_RUN = [
    ("cd /tmp && echo scratch > note.txt && pwd", "<returncode>0</returncode>\n<output>\n/tmp\n</output>"),
    ("pwd && ls /tmp/note.txt", "<returncode>0</returncode>\n<output>\n/app\n/tmp/note.txt\n</output>"),
    HELLO,
    SUBMIT,
]
SERVER = "python3 -m http.server 8000"
ASK = "python3 -c \"import urllib.request as u; print(u.urlopen('http://localhost:8000').status)\" 2>&1 | tail -1"
# the server outlived the killed shell, and its first log line met the pipe nobody reads any more
REFUSED = "http.client.RemoteDisconnected: Remote end closed connection without response"
SERVER_RUN = [(SERVER, TIMED_OUT.format(SERVER)), (ASK, f"<returncode>0</returncode>\n<output>\n{REFUSED}\n</output>")]
SERVER_RUN += [HELLO, SUBMIT]


def transcript(steps: list[tuple[str, str | None]]) -> str:
    """A mini-swe-agent 1.7 `agent.log`: headers in rich's colours, CRLF, the rules, the end of the session."""
    out = [
        "\x1b[?2004hroot@4f2c9a1b7d3e:/app# mini -m anthropic/claude-sonnet-4-0 -t 'Create hello.txt' -y\r\n",
        "\U0001f44b This is \x1b[1;32mmini-swe-agent\x1b[0m version \x1b[1;32m1.7.0\x1b[0m.\r\n",
        "\x1b[1;32mSystem\x1b[0m:\r\nYou are a helpful assistant that can interact with a computer.\r\n",
        "\x1b[1;32mUser\x1b[0m:\r\nPlease solve this issue: Create hello.txt holding Hello, world!\r\n",
        RULE,
    ]
    for k, (command, answer) in enumerate(steps, 1):
        out.append(
            f"\x1b[1;31mmini-swe-agent\x1b[0m\x1b[31m (step \x1b[0m\x1b[1;31m{k}\x1b[0m\x1b[31m, \x1b[0m"
            f"\x1b[1;31m$0.0{k}\x1b[0m\x1b[31m):\x1b[0m\r\nTHOUGHT: step {k}.\r\n\r\n```bash\r\n{command}\r\n```\r\n"
        )
        if answer is not None:
            out.append("\x1b[1;32mUser\x1b[0m:\r\n" + answer.replace("\n", "\r\n") + "\r\n" + RULE)
    out.append(
        "Saved trajectory to '/root/.config/mini-swe-agent/last_mini_run.traj.json'\r\n\x1b[?2004hroot@4f2c:/app# "
    )
    return "".join(out)


def write_run(root: Path, name: str, steps: list[tuple[str, str | None]]) -> Path:
    """A Terminal-Bench trial folder of hello-world: `results.json` and `sessions/agent.log`; its log."""
    trial = root / "hello-world" / name
    (trial / "sessions").mkdir(parents=True)
    results = {"task_id": "hello-world", "trial_name": name, "is_resolved": True, "instruction": "Create hello.txt"}
    (trial / "results.json").write_text(json.dumps(results))
    log = trial / "sessions" / "agent.log"
    log.write_bytes(transcript(steps).encode())
    return log


def replayed(log: Path, backend: str, **context):
    """The run's pivots converted, sandboxed and replay-checked on `backend` (`context` overrides its keys)."""
    pivots, _ = convert_runs(log)
    pivots = [dataclasses.replace(p, context={**p.context, **context}) for p in pivots]
    sandboxed, report = sandbox_pivots(pivots, TASKS)
    assert report["sandboxed"] == len(pivots) == 4, report
    return check_replay(sandboxed, backend=sandbox_backend(backend, memory="2g", pids=1024, replay_timeout=900.0))


def _at(pivots, command: str):
    return next(p for p in pivots if f"```bash\n{command}\n```" in (p.expert.content or ""))


def _bash(command: str) -> Message:
    return Message("assistant", f"THOUGHT: try.\n\n```bash\n{command}\n```")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cd_inside_a_command_never_reaches_the_next_one(tmp_path, backend, monkeypatch):
    from typer.testing import CliRunner

    from pivot_cli import app

    monkeypatch.setenv("PIVOT_SANDBOX", backend)  # what `--check-replay` replays on, and docker_shell judges on
    log = write_run(tmp_path / "runs", "hello-world.1-of-1.cd", CD_RUN)
    out = tmp_path / "cd.jsonl"
    args = ["convert", "--from", "mini-swe-agent-log", str(log), str(out), "--tasks-dir", str(TASKS)]
    result = CliRunner().invoke(app, [*args, "--check-replay", "--json"])
    assert result.exit_code == 0, result.stdout
    report = json.loads(result.stdout)
    assert (report["pivots"], report["sandboxed"], report["faithful"]) == (4, 4, 4), report
    assert report["unsandboxed"] == {} and report["diverged"] == {}
    pivots = [Pivot.from_json(json.loads(line)) for line in out.read_text().splitlines()]
    assert all(p.context["replay"] == {"faithful": True} for p in pivots)
    # at the pivot after the `cd`, the shell is where mini-swe-agent's was: /app
    pivot = _at(pivots, "pwd && ls /tmp/note.txt")
    verifier = get_verifier("docker_shell", backend=backend)
    expert, moved_back, moved = verifier.verify_batch(
        pivot, [pivot.expert, _bash("cd /tmp && cd /app && pwd && ls /tmp/note.txt"), _bash("cd /tmp && pwd")]
    )
    assert expert.accepted and moved_back.accepted, (expert.reason, moved_back.reason)
    assert moved.applicable and not moved.accepted, moved


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_run_whose_cd_had_persisted_diverges_there(tmp_path, backend):
    # as if the harness had kept one shell: its `pwd` would have printed /tmp
    steps = [CD_RUN[0], ("pwd && ls /tmp/note.txt", CD_RUN[1][1].replace("/app\n", "/tmp\n")), HELLO, SUBMIT]
    checked, report = replayed(write_run(tmp_path, "hello-world.1-of-1.kept", steps), backend)
    (where,) = report["divergences"]
    assert where["reason"] == "output differs from the recorded one: 'pwd && ls /tmp/note.txt'", where
    at = _at(checked, "pwd && ls /tmp/note.txt").context["turn_index"]
    assert where["turn"] == at and (report["faithful"], report["unfaithful"]) == (1, 3)  # the cd's pivot alone
    later = _at(checked, HELLO[0])
    assert "sandbox" not in later.context and "diverged" in later.context["unsandboxed"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_foreground_server_killed_at_the_timeout_replays_as_the_harness_left_it(tmp_path, backend):
    # the run's configured timeout: 2 s (`environment.timeout`), so that the test waits 2 s per kill
    log = write_run(tmp_path, "hello-world.1-of-1.server", SERVER_RUN)
    checked, report = replayed(log, backend, command_timeout=2)
    assert (report["faithful"], report["unfaithful"], report["diverged"]) == (4, 0, {}), report
    pivot = _at(checked, HELLO[0])  # two turns after the kill: the server still runs, deaf
    assert pivot.context["replay"] == {"faithful": True} and pivot.context["sandbox"]
    expert, other = get_verifier("docker_shell", backend=backend).verify_batch(
        pivot, [pivot.expert, _bash("echo 'Hello world' > hello.txt")]
    )
    assert expert.accepted, expert.reason
    assert other.applicable and not other.accepted, other
    # the expert of the killed turn did not finish in the run: no reference for a candidate
    killed = _at(checked, SERVER)
    assert killed.context["sandbox"]["expert_unfinished"] == "the expert's command timed out in the run and was killed"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_run_whose_server_had_answered_diverges_where_it_is_asked(tmp_path, backend):
    steps = [SERVER_RUN[0], (ASK, "<returncode>0</returncode>\n<output>\n200\n</output>"), HELLO, SUBMIT]
    checked, report = replayed(write_run(tmp_path, "hello-world.1-of-1.answered", steps), backend, command_timeout=2)
    (where,) = report["divergences"]
    assert where["reason"].startswith("output differs from the recorded one: 'python3 -c"), where
    assert where["turn"] == _at(checked, ASK).context["turn_index"]
