"""OpenHands' `execute_bash` calls that run no command: input for a running process, refused calls.

What every reader of a turn uses (`shell_call`, through `shell_actions`): the replay, the
sandboxed verifiers (`action_commands`) and the episode env never execute such a call.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from pivot_core import (
    Message,
    NotRun,
    Pivot,
    ToolCall,
    action_commands,
    history_commands,
    shell_actions,
    shell_call,
)
from pivot_core._openhands_bash import split_commands


def _turn(**args: Any) -> Message:
    return Message("assistant", None, tool_calls=(ToolCall("execute_bash", json.dumps(args), "c1"),))


@pytest.mark.parametrize(
    ("args", "kind"),
    [
        ({"command": "rm -rf /app/data", "is_input": "true"}, "input"),
        ({"command": "C-c", "is_input": "True"}, "input"),
        ({"command": "y", "is_input": True}, "input"),
        ({"command": ""}, "logs"),
        ({"command": "  ", "is_input": "true"}, "logs"),
        ({"command": "touch a\ntouch b"}, "several"),
        ({"command": "pwd", "timeout": -1}, "timeout"),
        ({"command": "pwd", "timeout": "soon"}, "timeout"),
        ({"command": 42}, "arguments"),
    ],
)
def test_a_call_openhands_does_not_run_is_no_command(args, kind):
    outcome = shell_call(ToolCall("execute_bash", json.dumps(args)))
    assert isinstance(outcome, NotRun) and outcome.kind == kind, outcome
    assert outcome.reason and outcome.answer.startswith("ERROR:")
    turn = _turn(**args)
    # nothing that reads commands sees one: the sandboxed verifiers, the task's tests, the replay
    assert shell_actions(turn) == [] and action_commands(turn) == []


def test_an_input_call_in_the_history_is_not_replayed_as_a_command():
    history = (Message("user", "task"), _turn(command="vim notes.txt"), _turn(command=":wq", is_input="true"))
    pivot = Pivot("oh#4", "terminal", history, _turn(command="cat notes.txt"), context={"harness": "openhands"})
    assert history_commands(pivot) == ["vim notes.txt"]


@pytest.mark.parametrize(
    "args",
    [
        {"command": "ls -la"},
        {"command": "ls", "is_input": "false"},
        {"command": "pwd", "timeout": 0},
        {"command": "pwd", "timeout": "30"},
        {"command": "pwd", "timeout": None},
        {"command": "cd /app && make; make test"},
    ],
)
def test_a_call_openhands_runs_is_its_command(args):
    assert shell_call(ToolCall("execute_bash", json.dumps(args))) == args["command"]


@pytest.mark.parametrize(
    ("text", "n"),
    [
        ("ls; pwd", 1),  # chained: one command
        ("make &&\nmake test", 1),  # a trailing && continues on the next line
        ("ls\npwd", 2),
        ("sleep 5 &\nls", 2),
        ("for f in *; do\n  echo $f\ndone", 1),
        ('python3 -c "\nprint(1)\n"', 1),
        ("cat <<EOF > f\nhi\nEOF\ncat f", 2),
        # bashlex (OpenHands' parser) cannot read a quoted heredoc delimiter: OpenHands sends it whole
        ("cat <<'EOF' > f.py\nprint(1)\nEOF\npython3 f.py", 1),
        ("x=$((1 + 2))\necho $x", 1),  # nor arithmetic
        ("# set up\nls", 2),  # a comment before the first command is a piece of its own
        ("ls\n# done", 1),  # after it, it belongs to the command before
        ("ls \\\n  -la", 1),
        ('echo "open', 1),  # not understood: one, as bashlex's failure is
    ],
)
def test_several_commands_are_counted_as_openhands_counts_them(text, n):
    assert len(split_commands(text)) == n


@pytest.mark.parametrize(
    "arguments",
    ['{"command": ["ls"]}', '{"command": "ls", "timeout": {"s": 1}}', '{"command": "ls", "is_input": [1]}', "[1]", "{"],
)
def test_odd_arguments_never_raise(arguments):
    outcome = shell_call(ToolCall("execute_bash", arguments))
    assert outcome is None or isinstance(outcome, (str, NotRun))


def test_counting_stays_linear_on_long_blank_runs():
    start = time.perf_counter()
    for text in ("ls" + "\n" * 150_000 + "pwd", "ls" + " \n" * 75_000 + "time pwd", "<<" + "a" * 150_000):
        split_commands(text)
    assert time.perf_counter() - start < 10  # quadratic reading took minutes
