"""`pivot split` never straddles a task; `pivot eval`'s clustered intervals on hand-made cases."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from pivot_cli import app
from pivot_core._model import Message, Pivot
from pivot_core._split import split_pivots, task_key
from trainers.eval import SampleRecord, clustered_interval, contrast_ci, summarize


def _pivot(task: int | None, trial: int, turn: int) -> Pivot:
    context = {"benchmark": "tau-bench", "tau_domain": "airline", "trial": trial}
    if task is not None:
        context["task_id"] = task
    context["trajectory_id"] = f"t{task}/trial{trial}"
    return Pivot(
        f"t{task}/trial{trial}#{turn}", "tool-use", (Message("user", "hi"),), Message("assistant", "x"), (), context
    )


def test_split_by_task_keeps_every_trial_of_a_task_on_one_side():
    # 10 tasks x 4 trials x 3 turns: trials of one task share user, reservations and request
    pivots = [_pivot(t, r, i) for t in range(10) for r in range(4) for i in range(3)]
    s = split_pivots(pivots, heldout=0.3, seed=1)
    assert s.by == "task" and len(s.heldout_groups) == 3 and len(s.heldout) == 3 * 4 * 3
    assert not {task_key(p) for p in s.train} & {task_key(p) for p in s.heldout}
    assert split_pivots(list(reversed(pivots)), heldout=0.3, seed=1).heldout_groups == s.heldout_groups
    assert split_pivots(pivots, heldout=0.3, seed=2).heldout_groups != s.heldout_groups
    # by trajectory: trials of a task may straddle (that is what --by task exists to prevent)
    t = split_pivots(pivots, heldout=0.5, by="trajectory", seed=0)
    assert t.by == "trajectory" and {task_key(p) for p in t.train} & {task_key(p) for p in t.heldout}


def test_split_auto_falls_back_to_trajectories_and_task_mode_names_the_pivot():
    pivots = [_pivot(None, r, i) for r in range(5) for i in range(2)]
    s = split_pivots(pivots, heldout=0.2)
    assert s.by == "trajectory" and len(s.heldout) == 2
    with pytest.raises(ValueError, match=r"tNone/trial0#0.*task_id"):
        split_pivots(pivots, by="task")
    with pytest.raises(ValueError, match="held-out share"):
        split_pivots(pivots, heldout=1.0)


def test_split_cli_on_the_real_airline_file(shared_data, tmp_path):
    src = shared_data / "tool_use" / "tau_bench_airline_gpt4o.jsonl"
    res = CliRunner().invoke(
        app, ["split", str(src), str(tmp_path / "tr.jsonl"), str(tmp_path / "ho.jsonl"), "--heldout", "0.2", "--json"]
    )
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["by"] == "task" and summary["heldout_groups"] == 10  # 50 tasks
    from pivot_envs import load_pivots

    train, held = list(load_pivots(tmp_path / "tr.jsonl")), list(load_pivots(tmp_path / "ho.jsonl"))
    assert len(train) + len(held) == 2388
    assert not {task_key(p) for p in train} & {task_key(p) for p in held}


def test_clustered_interval_by_hand():
    # every cluster identical: every resample gives the same rate, the interval is a point
    one = clustered_interval(["a"] * 4 + ["b"] * 4, [1, 0, 1, 0] * 2)
    assert (one.value, one.low, one.high, one.n, one.clusters) == (0.5, 0.5, 0.5, 8, 2)
    # two clusters, one all-accepted and one all-rejected, of equal size: resamples are
    # {aa: 1, ab/ba: 0.5, bb: 0}, so the 95 % percentile interval is [0, 1]
    two = clustered_interval(["a"] * 3 + ["b"] * 3, [1, 1, 1, 0, 0, 0], resamples=4000)
    assert two.value == 0.5 and two.low == 0.0 and two.high == 1.0
    # many independent clusters: the interval holds the truth and is narrower than with few
    rng = np.random.default_rng(0)
    acc = (rng.random(2000) < 0.3).astype(float).tolist()
    many = clustered_interval([str(i // 4) for i in range(2000)], acc)
    few = clustered_interval([str(i // 500) for i in range(2000)], acc)
    assert many.low < 0.3 < many.high and (many.high - many.low) < 0.08
    assert many.clusters == 500 and few.clusters == 4


def test_contrast_is_paired_over_clusters():
    # two runs that agree on which clusters are hard: their difference has a tight interval even
    # though each run's own interval is wide (clusters differ a lot)
    rates = np.linspace(0.05, 0.95, 20)
    trials = np.full((20, 2), 100.0)
    successes = np.stack([rates * 100, rates * 100 + 10], axis=1)
    diff, low, high = contrast_ci(successes, trials, [-1.0, 1.0])
    assert diff == pytest.approx(0.1) and low == pytest.approx(0.1) and high == pytest.approx(0.1)
    a, a_low, a_high = contrast_ci(successes, trials, [1.0, 0.0])
    assert a_high - a_low > 0.2
    with pytest.raises(ValueError, match="one weight per run"):
        contrast_ci(successes, trials, [1.0])


def test_summarize_slices_by_tool_and_kind():
    rec = [
        SampleRecord("p1", "t1", "get_user_details", "tool_call", 0, 1.0),
        SampleRecord("p1", "t1", "get_user_details", "tool_call", 0, 0.0),
        SampleRecord("p2", "t2", "text", "text", 0, 0.0, error=True),
    ]
    out = summarize(rec).to_json()
    assert out["accept"] == pytest.approx(1 / 3) and out["clusters"] == 2 and out["verifier_errors"] == 1
    assert out["per_kind"]["tool_call"]["accept"] == 0.5 and out["per_tool"]["text"]["accept"] == 0.0


@pytest.mark.slow
def test_eval_cli_on_a_local_model_reads_its_saved_settings(tiny_policy, tmp_path):
    from pivot_envs import load_pivots, write_pivots
    from pivot_envs._env import bundled_paths

    pivots = [p for p in load_pivots(bundled_paths(("tool_use_tau_airline.jsonl",))[0]) if p.expert.tool_calls]
    write_pivots(pivots, tmp_path / "calls.jsonl")
    res = CliRunner().invoke(
        app,
        [
            "eval",
            "--model",
            str(tiny_policy.path),
            "--pivots",
            str(tmp_path / "calls.jsonl"),
            "--k",
            "2",
            "--seeds",
            "0,1",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["n"] == 2 * 2 * len(pivots) and 0.0 <= out["ci"][0] <= out["accept"] <= out["ci"][1] <= 1.0
    assert set(out["per_kind"]) == {"tool_call"} and out["settings"]["max_new_tokens"] == tiny_policy.max_new_tokens
    assert out["settings"]["max_prompt_tokens"] == tiny_policy.max_prompt_tokens
    # greedy: one sample per pivot and seed
    res = CliRunner().invoke(
        app, ["eval", "--model", str(tiny_policy.path), "--pivots", str(tmp_path / "calls.jsonl"), "--greedy", "--json"]
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["n"] == len(pivots)
