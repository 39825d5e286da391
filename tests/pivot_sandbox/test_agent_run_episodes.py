"""A real agent's whole run in `pivot/terminal-episode-v0`, in its harness's own format.

hello-world by OpenHands and by mini-swe-agent (Terminal-Bench leaderboard logs, read by path:
canary, tests only), converted with the bundled CI task folder. From each run's first pivot the
agent's own recorded turns are stepped to the end: the task's tests give the recorded outcome,
and each answer is the one the harness gave (OpenHands' tool messages, its editor's messages,
mini-swe-agent's `<returncode>`/`<output>` user messages).
"""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import pytest

import pivot_envs  # noqa: F401  (registers the env ids)
from pivot_core import Message
from pivot_envs import render_completion

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def episodes(hello_world_agent_runs, docker_client):
    path, _ = hello_world_agent_runs
    env = gym.make("pivot/terminal-episode-v0", dataset=str(path)).unwrapped
    yield env
    env.close()


def _first(env, harness: str):
    """The first pivot of the harness's first run (the task's initial state), and the run's recorded turns."""
    first = min(
        (p for p in env.pivots if p.context["harness"] == harness),
        key=lambda p: (p.context["trajectory_id"], p.context["turn_index"]),
    )
    recorded = env.recorded_messages(first)[len(first.history) :]
    return first, recorded


def _play(env, first, turns):
    """Step `turns` from the pivot; (the new messages of each step, the last info)."""
    env.reset(options={"pivot_id": first.id})
    shown = []
    for message in turns:
        _, reward, terminated, truncated, info = env.step(render_completion(message, "terminal"))
        shown.append(info["new_messages"])
        if terminated or truncated:
            return shown, info
    raise AssertionError(f"the episode did not end after {len(turns)} turns")


@pytest.mark.parametrize(("harness", "ended_by"), [("openhands", "finish"), ("mini-swe-agent", "submitted")])
def test_the_agents_own_turns_reproduce_the_recorded_outcome(episodes, harness, ended_by):
    first, recorded = _first(episodes, harness)
    assert first.context["is_resolved"] is True and not any(m.role == "assistant" for m in first.history)
    turns = [m for m in recorded if m.role == "assistant"]
    shown, info = _play(episodes, first, turns)
    assert len(shown) == len(turns)
    assert info["outcome"]["reward"] == 1.0 and info["outcome"]["ended_by"] == ended_by, info["outcome"]
    assert info["outcome"]["details"]["counts"] == {"PASSED": 2}


def test_openhands_answers_are_the_recorded_tool_messages(episodes):
    first, recorded = _first(episodes, "openhands")
    turns = [m for m in recorded if m.role == "assistant"]
    shown, _ = _play(episodes, first, turns)
    answers = [m for step in shown for m in step]
    wanted = [m for m in recorded if m.role in ("tool", "user")]
    # the last turn (finish) is answered by the end of the episode, not by a message the run recorded
    assert [a["role"] for a in answers[:-1]] == [m.role for m in wanted]
    for got, want in zip(answers, wanted, strict=False):
        # its editor's messages (ERROR: relative path, File created, cat -n views), bash's own error,
        # the exit code, working directory and interpreter lines, the "Please continue" reply
        assert got["content"] == want.content, (got, want.content)
        if want.role == "tool":
            assert got["tool_call_id"]


def test_mini_swe_agent_answers_are_its_returncode_and_output_messages(episodes):
    first, recorded = _first(episodes, "mini-swe-agent")
    turns = [m for m in recorded if m.role == "assistant"]
    shown, _ = _play(episodes, first, turns)
    wanted = [m.content for m in recorded if m.role == "user"]
    # `echo > hello.txt`, then `cat hello.txt`; the third (`ls -la`) shows today's clock
    assert [s[0]["content"] for s in shown[:2]] == wanted[:2]
    assert shown[2][0]["content"].startswith("<returncode>0</returncode>\n<output>\n-rw-r--r-- 1 root root 14 ")


def test_leaving_out_the_turn_that_fixed_the_file_gives_0(episodes):
    # OpenHands' editor wrote the file without its newline; the agent's `echo` fixed it
    first, recorded = _first(episodes, "openhands")
    turns = [m for m in recorded if m.role == "assistant" and not any("echo" in c.arguments for c in m.tool_calls)]
    assert len(turns) == len([m for m in recorded if m.role == "assistant"]) - 1
    _, info = _play(episodes, first, turns)
    assert info["outcome"]["reward"] == 0.0 and info["outcome"]["ended_by"] == "finish"
    assert info["outcome"]["details"]["counts"] == {"PASSED": 1, "FAILED": 1}


def test_a_wrong_command_in_the_harness_format_gives_0(episodes):
    first, recorded = _first(episodes, "mini-swe-agent")
    turns = [m for m in recorded if m.role == "assistant"]
    wrong = dataclasses.replace(turns[0], content="THOUGHT: x\n\n```bash\necho 'Hello world' > hello.txt\n```")
    _, info = _play(episodes, first, [wrong, turns[-1]])
    assert info["outcome"]["reward"] == 0.0 and info["outcome"]["ended_by"] == "submitted"


def test_a_turn_in_the_wrong_format_gets_the_harness_error_and_the_run_goes_on(episodes):
    first, _ = _first(episodes, "mini-swe-agent")
    episodes.reset(options={"pivot_id": first.id})
    _, _, terminated, _, info = episodes.step("THOUGHT: two\n\n```bash\nls\n```\n\n```bash\npwd\n```")
    assert not terminated
    error = info["new_messages"][0]["content"]
    assert error.startswith("Please always provide EXACTLY ONE action in triple backticks, found 2 actions.")
    # a Terminus turn is no action for mini-swe-agent either: nothing runs
    _, _, terminated, _, info = episodes.step('{"analysis": "a", "plan": "b", "commands": [{"keystrokes": "ls\\n"}]}')
    assert not terminated and "found 0 actions" in info["new_messages"][0]["content"]
    first, _ = _first(episodes, "openhands")
    episodes.reset(options={"pivot_id": first.id})
    _, _, terminated, _, info = episodes.step('<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>')
    assert not terminated and info["new_messages"][0]["role"] == "tool"
    assert "OpenHands has no tool 'bash'" in info["new_messages"][0]["content"]
    _, _, terminated, _, info = episodes.step(render_completion(Message("assistant", "Done."), "terminal"))
    assert not terminated and info["new_messages"][0]["content"].startswith("Please continue on whatever approach")


def test_mini_swe_agent_commands_run_in_a_fresh_subshell(episodes):
    # "Directory or environment variable changes are not persistent": each command is its own /bin/sh
    first, _ = _first(episodes, "mini-swe-agent")
    episodes.reset(options={"pivot_id": first.id})
    episodes.step("THOUGHT: a\n\n```bash\ncd /tmp && export X=1 && pwd\n```")
    _, _, _, _, info = episodes.step('THOUGHT: b\n\n```bash\npwd; echo "x=$X"\n```')
    assert info["new_messages"][0]["content"] == "<returncode>0</returncode>\n<output>\n/app\nx=\n</output>"


def test_openhands_editor_messages_for_a_relative_path_and_a_folder(episodes):
    # as its editor answers (a relative path that exists gets a suggestion: recorded on organization-json-generator)
    first, _ = _first(episodes, "openhands")
    episodes.reset(options={"pivot_id": first.id})

    def view(path: str) -> str:
        call = '<tool_call>{"name": "str_replace_editor", "arguments": {"command": "view", "path": "%s"}}</tool_call>'
        *_, info = episodes.step(call % path)
        return info["new_messages"][0]["content"]

    assert view(".") == (
        "ERROR:\nInvalid `path` parameter: .. The path should be an absolute path, starting with `/`. "
        "Maybe you meant /app?"
    )
    assert view("nope.txt").endswith("starting with `/`.")
    bash = '<tool_call>{"name": "execute_bash", "arguments": {"command": "%s"}}</tool_call>'
    episodes.step(bash % "mkdir -p d/e && touch d/f .h")
    assert view("/app") == (
        "Here's the files and directories up to 2 levels deep in /app, excluding hidden items:\n/app/\n/app/d/\n"
        "/app/d/e/\n/app/d/f\n\n1 hidden files/directories in this directory are excluded. You can use "
        "'ls -la /app' to see them."
    )
