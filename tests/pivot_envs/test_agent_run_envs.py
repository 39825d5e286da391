"""Pivots of real agents' runs in `pivot/terminal-v0`: candidates read in the harness's own format.

The runs are Terminal-Bench leaderboard logs read by path (canary: tests only).
"""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import pytest
from typer.testing import CliRunner

import pivot_envs  # noqa: F401  (registers the env ids)
from pivot_cli import app
from pivot_core import convert_runs, write_pivots
from pivot_envs import render_completion

CHEAP = ["harness_format", "turn_kind", "json_schema", "tool_args", "string_similarity"]
TASKS = ["hello-world", "grid-pattern-transform", "fix-git"]


@pytest.fixture(scope="module")
def run_env(shared_data: Path, tmp_path_factory):
    root = shared_data / "terminal" / "agent_runs"
    pivots = []
    for agent in ("openhands-claude-4-sonnet", "mini-swe-agent-claude-4-sonnet"):
        for task in TASKS:
            if (root / agent / task).is_dir():
                pivots.extend(convert_runs(root / agent / task)[0])
    path = tmp_path_factory.mktemp("runs") / "pivots.jsonl"
    write_pivots(pivots, path)
    return gym.make("pivot/terminal-v0", dataset=str(path), verifiers=CHEAP).unwrapped


def test_every_expert_scores_1_through_the_cheap_chain(run_env):
    harnesses = {p.context["harness"] for p in run_env.pivots}
    assert harnesses == {"openhands", "mini-swe-agent"}
    for pivot in run_env.pivots:
        (result,) = run_env.score(pivot, [render_completion(pivot.expert, pivot.domain)])
        assert result.reward == 1.0, (pivot.id, {k: v.reason for k, v in result.verdicts.items()})


def _pivot(env, harness: str, tool: str | None):
    for p in env.pivots:
        if p.context["harness"] != harness:
            continue
        name = p.expert.tool_calls[0].name if p.expert.tool_calls else None
        if name == tool:
            return p
    raise AssertionError(f"no {harness} pivot with {tool}")


TERMINUS = json.dumps({"analysis": "a", "plan": "b", "commands": [{"keystrokes": "ls -la\n", "duration": 1}]})
CALL = '<tool_call>{"name": "execute_bash", "arguments": {"command": "ls -la"}}</tool_call>'


@pytest.mark.parametrize(
    ("completion", "why"),
    [
        (TERMINUS, "exactly one ```bash block, found 0"),
        (CALL, "not tool calls"),
        ("THOUGHT: two.\n\n```bash\nls\n```\n\n```bash\npwd\n```", "found 2"),
    ],
)
def test_wrong_format_on_a_mini_swe_agent_pivot_scores_0_with_the_reason(run_env, completion, why):
    pivot = _pivot(run_env, "mini-swe-agent", None)
    run_env.reset(options={"pivot_id": pivot.id})
    _, reward, _, _, info = run_env.step(completion)
    assert reward == 0.0 and info["decided_by"] == "harness_format"
    assert why in info["verdicts"]["harness_format"]["reason"]


@pytest.mark.parametrize(
    ("completion", "why"),
    [
        ("THOUGHT: x\n\n```bash\nls -la\n```", "a command in the text is a message"),
        (TERMINUS, "a command in the text is a message"),
        ('<tool_call>{"name": "bash", "arguments": {"command": "ls -la"}}</tool_call>', "no tool 'bash'"),
        ('<tool_call>{"name": "execute_bash", "arguments": {"cmd": "ls -la"}}</tool_call>', "needs ['command']"),
    ],
)
def test_wrong_format_on_an_openhands_pivot_scores_0_with_the_reason(run_env, completion, why):
    pivot = _pivot(run_env, "openhands", "execute_bash")
    run_env.reset(options={"pivot_id": pivot.id})
    _, reward, _, _, info = run_env.step(completion)
    assert reward == 0.0 and info["decided_by"] == "harness_format"
    assert why in info["verdicts"]["harness_format"]["reason"]


def test_the_right_format_passes_the_gate(run_env):
    pivot = _pivot(run_env, "openhands", "execute_bash")
    (result,) = run_env.score(pivot, [CALL])
    assert result.verdicts["harness_format"].accepted


def test_cli_convert_json_report(shared_data: Path, tmp_path):
    src = shared_data / "terminal" / "agent_runs" / "openhands-claude-4-sonnet"
    out = tmp_path / "oh.jsonl"
    result = CliRunner().invoke(app, ["convert", "--from", "openhands", str(src), str(out), "--json"])
    assert result.exit_code == 0, result.stdout
    report = json.loads(result.stdout)
    assert report["runs"] == 44 and report["sandboxed"] == 0
    assert report["pivots"] == report["actions"] > 0 and report["written"] == report["pivots"]
    assert {s["reason"] for s in report["skipped"]} == {"the trial folder holds results.json but no agent log"}
    assert sum(1 for _ in out.open()) == report["pivots"]


def test_terminus_pivots_from_a_harbor_atif_file_read_terminus_json():
    atif = Path(__file__).parents[1] / "pivot_core" / "data" / "harbor_terminus2_hello_world_timeout.trajectory.json"
    env = gym.make("pivot/terminal-v0", dataset=str(atif), verifiers=CHEAP).unwrapped
    pivot = env.pivots[0]
    assert pivot.context["harness"] == "terminus-2"
    expert, block = env.score(
        pivot, [render_completion(pivot.expert, pivot.domain), "```bash\necho 'Hello, world!'\n```"]
    )
    assert expert.reward == 1.0
    assert block.reward == 0.0 and block.decided_by == "harness_format"
    assert "Terminus reads a JSON object" in block.verdicts["harness_format"].reason
