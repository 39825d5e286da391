"""`pivot profile` and `pivot report` over pivots converted from real agents' runs, split by harness.

hello-world runs of OpenHands and mini-swe-agent (Terminal-Bench leaderboard logs, read by path:
canary, tests only), converted without task images: the cheap part of `pivot/terminal-v0`'s chain
scores the tiny policy's samples.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from pivot_cli import app
from pivot_core import Message, Pivot, Profile, convert_runs, write_pivots
from trainers.profiling import harness_rows

AGENTS = ("openhands-claude-4-sonnet", "mini-swe-agent-claude-4-sonnet")


def test_profile_and_report_split_converted_pivots_by_harness(shared_data: Path, tiny_policy, tmp_path):
    pivots = []
    for agent in AGENTS:
        converted, _ = convert_runs(shared_data / "terminal" / "agent_runs" / agent / "hello-world")
        pivots.extend(converted[:2])  # a few pivots: the split, not the policy, is under test
    dataset = tmp_path / "runs.jsonl"
    write_pivots(pivots, dataset)
    out = tmp_path / "profiled.jsonl"
    args = ["profile", "--env", "pivot/terminal-v0", "--dataset", str(dataset), "--model", str(tiny_policy.path)]
    # K=2 and the tiny policy's own prompt cuts and budget keep it to seconds
    args += ["--k", "2", "--out", str(out), "--max-new-tokens", str(tiny_policy.max_new_tokens)]
    args += ["--max-history", str(tiny_policy.max_history_messages)]
    args += ["--max-prompt-tokens", str(tiny_policy.max_prompt_tokens), "--cache", str(tmp_path / "c.sqlite")]
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["profiled"] == 4 and summary["errors"] == 0
    rows = {r["harness"]: r for r in summary["harnesses"]}
    assert set(rows) == {"mini-swe-agent", "openhands", "all"}
    assert rows["openhands"]["profiled"] == rows["mini-swe-agent"]["profiled"] == 2
    assert rows["all"]["profiled"] == 4
    total = sum(rows[h]["mean_reward"] * 2 for h in ("openhands", "mini-swe-agent")) / 4
    assert abs(rows["all"]["mean_reward"] - total) < 1e-9
    assert abs(summary["mean_reward"] - total) < 1e-9

    report = CliRunner().invoke(app, ["report", str(out), "--json"])
    assert report.exit_code == 0, report.output
    assert json.loads(report.stdout)["harnesses"] == summary["harnesses"]
    table = CliRunner().invoke(app, ["report", str(out)])
    assert "by agent harness" in table.output and "mini-swe-agent" in table.output


def _profiled(pid: str, harness: str | None, rewards: tuple[float, ...]) -> Pivot:
    return Pivot(
        id=pid,
        domain="terminal",
        history=(Message("user", "task"),),
        expert=Message("assistant", "x"),
        context={"harness": harness} if harness else {},
        profile=Profile(len(rewards), rewards, "policy", "chain"),
    )


def test_harness_rows_count_each_harness_and_the_rest_under_none():
    rows = harness_rows(
        [
            _profiled("a#1", "openhands", (1.0, 0.0)),
            _profiled("a#2", "openhands", (1.0, 1.0)),
            _profiled("b#1", "mini-swe-agent", (0.0, 0.0)),
            _profiled("c#1", None, (0.0, 1.0)),
        ]
    )
    by = {r["harness"]: r for r in rows}
    assert [r["harness"] for r in rows] == ["mini-swe-agent", "none", "openhands", "all"]
    assert by["openhands"]["pivots"] == 2 and by["openhands"]["mixed"] == 1 and by["openhands"]["all_one"] == 0.5
    assert by["mini-swe-agent"]["all_zero"] == 1.0 and by["mini-swe-agent"]["mean_reward"] == 0.0
    assert by["all"]["pivots"] == 4 and by["all"]["mean_reward"] == 0.5
    # pivots of no converted run: no split to show
    assert harness_rows([_profiled("c#1", None, (0.0, 1.0))]) == []
