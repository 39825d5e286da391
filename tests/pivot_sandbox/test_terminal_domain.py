"""The terminal domain end to end: synthesize -> pivot file -> gym.make("pivot/terminal-v0") -> rewards."""

from __future__ import annotations

import json
import subprocess
import sys

import gymnasium as gym
import pytest

import pivot_envs
from pivot_envs import load_pivots
from pivot_tasks import skip_reason, synthesize_task, task_spec

from .conftest import DEMO_TASKS


@pytest.mark.docker
def test_synthesize_cli_and_env(busybox, tmp_path):
    src = tmp_path / "tasks.jsonl"
    src.write_text("".join(json.dumps(t) + "\n" for t in DEMO_TASKS))
    out = tmp_path / "pivots.jsonl"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pivot_cli",
            "synthesize",
            "terminal-bench",
            str(src),
            "--out",
            str(out),
            "--image",
            busybox,
            "--json",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert (report["total"], report["succeeded"]) == (3, 1)
    pivots = load_pivots(out)
    assert len(pivots) == report["pivots"] == len(DEMO_TASKS[0]["solution_commands"]) + 1

    env = gym.make("pivot/terminal-v0", dataset=str(out))
    grep = next(p for p in pivots if "grep TODO notes.txt > todo.txt" in p.expert.text)
    env.reset(options={"pivot_id": grep.id})
    _, reward, terminated, _, info = env.step(grep.expert.text)
    assert reward == 1.0 and terminated
    rewrite = json.dumps(
        {"analysis": "x", "plan": "y", "commands": [{"keystrokes": "cat notes.txt | grep TODO > todo.txt\n"}]}
    )
    _, reward, _, _, info = env.step(rewrite)
    assert reward == 1.0 and info["decided_by"] == "docker_shell", info
    wrong = json.dumps({"analysis": "x", "plan": "y", "commands": [{"keystrokes": "rm notes.txt\n"}]})
    _, reward, _, _, info = env.step(wrong)
    assert reward == 0.0 and info["verdicts"]["docker_shell"]["details"]["differed"]
    results = env.unwrapped.score(grep, [rewrite, wrong, "{not json"])
    assert [r.reward for r in results] == [1.0, 0.0, 0.0]


def test_nemo_terminus_rows_work_statically():
    env = gym.make("pivot/terminal-v0")
    assert "docker_shell" in env.unwrapped.chain.names
    pivot = next(p for p in env.unwrapped.pivots if p.context.get("sandbox") is None and p.expert.content)
    env.reset(options={"pivot_id": pivot.id})
    _, reward, _, _, info = env.step(pivot.expert.content)
    assert reward == 1.0, info
    assert info["verdicts"].get("docker_shell", {"applicable": False})["applicable"] is False


def test_terminal_bench_skip_reasons(shared_data):
    records = [json.loads(line) for line in open(shared_data / "terminal" / "terminal_bench_core_tasks.jsonl")]
    reasons = {r["task_id"]: skip_reason(r) for r in records}
    assert reasons["hello-world"] is None
    assert "network" in reasons["csv-to-parquet"]
    assert "custom environment" in reasons["simple-sheets-put"]
    assert reasons["polyglot-rust-c"] == "no solution commands"


@pytest.mark.docker
def test_terminal_bench_hello_world_synthesizes(busybox, shared_data):
    records = [json.loads(line) for line in open(shared_data / "terminal" / "terminal_bench_core_tasks.jsonl")]
    record = next(r for r in records if r["task_id"] == "hello-world")
    from pivot_sandbox import docker_backend

    traj, reason = synthesize_task(record, task_spec(record, busybox), docker_backend())
    assert traj is not None, reason
    assert traj.context["canary_guid"] == record["canary_guid"]  # marked: tests and demos only
    assert "echo" in traj.messages[1].content and traj.context["sandbox"]["workdir"] == "/app"


def test_enigma_trajectories_convert(shared_data):
    from pivot_core._actions import shell_actions
    from pivot_core.convert.swe_agent_enigma import from_enigma, to_enigma

    path = shared_data / "terminal" / "swe_agent_enigma_ctf_demos.jsonl"
    pivots = load_pivots(path)
    assert pivot_envs.detect_format(path).name == "swe-agent-enigma"
    assert len(pivots) > 50 and all(p.domain == "terminal" for p in pivots)
    assert all(shell_actions(p.expert) for p in pivots)
    record = json.loads(path.read_text().splitlines()[0])
    back = to_enigma(from_enigma(record))
    assert [m["content"] for m in back["messages"]] == [m["content"] for m in record["messages"]]
    assert [m.get("action") for m in back["messages"]] == [m.get("action") for m in record["messages"]]
