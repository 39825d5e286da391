"""An OpenHands turn in an episode runs what OpenHands runs: a call it runs no command for runs nothing.

The turn runs through a real local bash (the episode env's `Run` contract: one command in one
shell, here a fresh `bash -c` in a temporary folder), so a command that ran leaves its file.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pivot_core import Message, Pivot, ToolCall
from pivot_core.convert.openhands import openhands_tools
from pivot_envs.episodes._harness import Ran, Run, harness_turn


def _local_bash(folder: Path) -> Run:
    def run(command: str) -> Ran:
        done = subprocess.run(["bash", "-c", command], cwd=folder, capture_output=True, text=True, timeout=60)
        return Ran(done.returncode, done.stdout + done.stderr, None, str(folder))

    return run


def _pivot() -> Pivot:
    history = (Message("system", "You are OpenHands."), Message("user", "Write hello.txt."))
    expert = Message("assistant", None, tool_calls=(ToolCall("execute_bash", '{"command": "ls"}', "e"),))
    return Pivot("oh/t#2", "terminal", history, expert, openhands_tools(), {"harness": "openhands"})


def _turn(*calls: dict[str, Any]) -> Message:
    tool_calls = tuple(ToolCall("execute_bash", json.dumps(args), f"c{i}") for i, args in enumerate(calls))
    return Message("assistant", None, tool_calls=tool_calls)


@pytest.mark.parametrize(
    ("args", "answer"),
    [
        ({"command": "touch made", "is_input": "true"}, "ERROR: No previous running command to interact with."),
        ({"command": "touch made\ntouch also"}, "ERROR: Cannot execute multiple commands at once."),
        ({"command": "touch made", "timeout": -5}, "ERROR: invalid `timeout` -5"),
    ],
)
def test_a_call_openhands_does_not_run_runs_nothing_and_gets_its_answer(tmp_path, args, answer):
    turn = harness_turn(_pivot(), _turn(args), _local_bash(tmp_path))
    (message,) = turn.messages
    assert message.tool_call_id == "c0" and message.text.startswith(answer) and turn.ended_by is None
    assert list(tmp_path.iterdir()) == []  # nothing ran


def test_the_other_calls_of_the_turn_still_run(tmp_path):
    turn = harness_turn(_pivot(), _turn({"command": "touch a\ntouch b"}, {"command": "touch c"}), _local_bash(tmp_path))
    refused, ran = turn.messages
    assert refused.text.startswith("ERROR: Cannot execute multiple commands at once.")
    assert "[The command completed with exit code 0.]" in ran.text
    assert [p.name for p in tmp_path.iterdir()] == ["c"]


def test_a_quoted_heredoc_and_its_command_run_whole_as_openhands_sends_them(tmp_path):
    command = "cat <<'EOF' > hello.txt\nHello, world!\nEOF\ncat hello.txt"
    turn = harness_turn(_pivot(), _turn({"command": command}), _local_bash(tmp_path))
    assert "Hello, world!" in turn.messages[0].text
    assert (tmp_path / "hello.txt").read_text() == "Hello, world!\n"
