"""`bench/agent_runs.py`: what it counts per split and which destructive variants it scores per harness.

No Docker: rows of whole runs and synthetic pivots; the sandboxed measurement itself is the bench's run.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from pivot_core import Message, Pivot, ToolCall

BENCH = Path(__file__).resolve().parents[2] / "bench" / "agent_runs.py"


@pytest.fixture(scope="module")
def ar():
    spec = importlib.util.spec_from_file_location("agent_runs_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def row(run: str, task: str, resolved: bool | None, reward: float | None, harness: str = "mini-swe-agent") -> dict:
    return {"run": run, "task_id": task, "harness": harness, "is_resolved": resolved, "reward": reward}


def test_a_run_whose_outcome_is_null_is_reported_apart_never_counted_as_either(ar):
    rows = [row("a", "t1", True, 1.0), row("b", "t1", True, 0.0), row("c", "t2", False, 1.0), row("d", "t2", None, 0.0)]
    out = ar.outcomes(rows)
    assert out["resolved"] == {"runs": 2, "reproduced": 1}
    assert out["unresolved"] == {"runs": 1, "stayed_0": 0}
    assert out["flipped_to_1"] == ["c"]
    assert out["unknown_outcome"] == [{"run": "d", "reward": 0.0}]
    assert [r["run"] for r in out["not_reproduced"]] == ["b"]


def test_outcomes_are_split_by_held_back_task_and_harness(ar):
    rows = [row("a", "held", True, 1.0), row("b", "seen", True, 0.0, "openhands"), row("c", "held", False, 0.0)]
    split = ar.split_outcomes(rows, {"held"})
    assert split["held_out"]["mini-swe-agent"]["resolved"] == {"runs": 1, "reproduced": 1}
    assert split["held_out"]["mini-swe-agent"]["unresolved"] == {"runs": 1, "stayed_0": 1}
    assert set(split["held_out"]) == {"mini-swe-agent"}
    assert split["rest"]["openhands"]["resolved"] == {"runs": 1, "reproduced": 0}


def sandboxed(harness: str, expert: Message) -> Pivot:
    context = {"harness": harness, "sandbox": {"image": "pivot-gym/task:t", "workdir": "/app"}, "task_id": "t"}
    history = [Message("system", "You act in a shell."), Message("user", "Make /app/out.txt.")]
    return Pivot(f"{harness}/t#1", "terminal", history, expert, context=context)


def test_shell_state_variants_are_scored_only_where_the_harness_keeps_one_shell(ar):
    mini = sandboxed("mini-swe-agent", Message("assistant", "THOUGHT: write it.\n\n```bash\necho hi > out.txt\n```"))
    call = ToolCall("execute_bash", json.dumps({"command": "echo hi > out.txt"}), "c1")
    openhands = sandboxed("openhands", Message("assistant", "", tool_calls=(call,)))
    mini_cases, openhands_cases = set(ar.destructive_variants(mini)), set(ar.destructive_variants(openhands))
    assert {"destructive_suffix", "destructive_home", "hidden_write", "emptied_output"} <= mini_cases
    assert not mini_cases & {"shell_state_path", "shell_state_alias", "test_environment"}
    assert "shell_state_path" in openhands_cases and mini_cases < openhands_cases
    # each variant keeps the expert's command and adds to it
    assert "echo hi > out.txt" in ar.destructive_variants(mini)["destructive_home"]
