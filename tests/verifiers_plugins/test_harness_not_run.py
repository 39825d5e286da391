"""Single-step scoring of an OpenHands call that OpenHands runs no command for (`pivot/terminal-v0`).

An `is_input` call, several commands in one call, a negative timeout: OpenHands takes the call and
runs nothing, so it scores 0 with the reason (`harness_format`), unless the expert's own call is
of the same kind; then the chain compares the calls as written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import pivot_envs  # noqa: F401  (registers the env ids)
from pivot_core import Message, Pivot, ToolCall, write_pivots
from pivot_core.convert.openhands import openhands_tools

CHEAP = ["harness_format", "turn_kind", "json_schema", "tool_args", "string_similarity"]


def _expert(**args: Any) -> Message:
    return Message("assistant", None, tool_calls=(ToolCall("execute_bash", json.dumps(args), "c1"),))


def _call(**args: Any) -> str:
    return "<tool_call>" + json.dumps({"name": "execute_bash", "arguments": args}) + "</tool_call>"


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    history = (Message("system", "You are OpenHands."), Message("user", "Write hello.txt in /app."))
    pivots = [
        Pivot(f"oh/t#{i}", "terminal", history, expert, openhands_tools(), {"harness": "openhands"})
        for i, expert in enumerate(
            [_expert(command="ls /app"), _expert(command="C-c", is_input="true"), _expert(command="")]
        )
    ]
    path = Path(tmp_path_factory.mktemp("oh")) / "pivots.jsonl"
    write_pivots(pivots, path)
    return gym.make("pivot/terminal-v0", dataset=str(path), verifiers=CHEAP).unwrapped


@pytest.mark.parametrize(
    ("args", "why"),
    [
        ({"command": "ls /app", "is_input": "true"}, "is_input sends the text to a running process"),
        ({"command": "ls /app\nls /"}, "refuses 2 commands in one call"),
        ({"command": "ls /app", "timeout": -5}, "invalid `timeout` -5"),
        ({"command": ""}, "an empty command reads a running process's output"),
    ],
)
def test_a_call_openhands_runs_nothing_for_scores_0_with_the_reason(env, args, why):
    (result,) = env.score(env.pivot("oh/t#0"), [_call(**args)])
    assert result.reward == 0.0 and result.decided_by == "harness_format", result.verdicts
    assert result.verdicts["harness_format"].reason.startswith("not run by OpenHands: ")
    assert why in result.verdicts["harness_format"].reason


def test_the_same_call_as_a_command_still_scores_1(env):
    (result,) = env.score(env.pivot("oh/t#0"), [_call(command="ls /app", timeout=30)])
    assert result.verdicts["harness_format"].accepted


@pytest.mark.parametrize(
    ("args", "reward", "decided_by"),
    [
        ({"command": "C-c", "is_input": "true"}, 1.0, "tool_args"),  # the same keys to the same process
        ({"command": "C-d", "is_input": "true"}, 0.0, "tool_args"),  # other keys: compared, and they differ
        ({"command": "C-c\nC-c"}, 0.0, "harness_format"),  # refused, a kind the expert's call is not
    ],
)
def test_input_where_the_expert_sent_input_is_compared_as_written(env, args, reward, decided_by):
    (result,) = env.score(env.pivot("oh/t#1"), [_call(**args)])
    assert (result.reward, result.decided_by) == (reward, decided_by), result.verdicts


def test_reading_a_running_process_where_the_expert_did_passes_the_gate(env):
    (result,) = env.score(env.pivot("oh/t#2"), [_call(command="", is_input="true")])
    assert result.verdicts["harness_format"].accepted


@pytest.mark.parametrize(
    "arguments",
    ['{"command": "ls", "is_input": [1]}', '{"command": "ls", "timeout": {"s": 1}}', '{"command": 7}'],
)
def test_odd_arguments_are_scored_never_raised(env, arguments):
    completion = '<tool_call>{"name": "execute_bash", "arguments": ' + arguments + "}</tool_call>"
    (result,) = env.score(env.pivot("oh/t#0"), [completion])
    assert result.reward == 0.0 and result.error is None, result.verdicts
