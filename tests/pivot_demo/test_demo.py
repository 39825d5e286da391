"""`pivot demo pivotrl --quick`: the bundled reference on synthetic data, sft and pivotrl, one line per stage.

The real-data quick run (`--quick --data bundled`) checks every stage, pretraining and SFT included.
"""

import json
import math

import pytest
from typer.testing import CliRunner

from pivot_cli import app
from pivot_demo import (
    ARMS,
    BUNDLED,
    SYNTHETIC,
    DemoConfig,
    bundled_reference,
    demo_arms,
    evenly,
    profile_pool,
    synthetic_data,
)


def test_quick_configuration_starts_from_the_bundled_reference_and_the_real_data_one_keeps_every_stage():
    quick = DemoConfig().quick()
    assert (quick.data, quick.reference, quick.arms, quick.seeds) == (SYNTHETIC, BUNDLED, ("sft", "pivotrl"), (0, 1, 2))
    assert quick.profile_turns == "tool_calls" and quick.max_heldout_text and quick.grpo.steps > 0
    real = DemoConfig().quick_bundled()
    assert real.reference is None and real.data.endswith(".jsonl") and len(real.seeds) >= 2
    assert real.pretrain.steps > 0 and real.sft_steps > 0 and real.grpo.steps > 0
    assert real.pretrain.model.hidden_size < DemoConfig().pretrain.model.hidden_size
    assert evenly(list(range(10)), 3) == [0, 4, 9] and evenly([1, 2], None) == [1, 2]
    # the bundled reference trained on one split of the synthetic data: another split would hold out
    # conversations it has seen, so that is refused
    from dataclasses import replace

    with pytest.raises(ValueError, match="trained on"):
        replace(quick, split_seed=1)
    with pytest.raises(ValueError, match="sft and pivotrl"):
        replace(quick, arms=("pivotrl",))


def test_cli_presets_then_overrides(tmp_path):
    from pivot_cli._demo import demo_config

    assert demo_config(tmp_path, quick=True).reference == BUNDLED
    assert demo_config(tmp_path, quick=True, data=BUNDLED).reference is None
    assert demo_config(tmp_path, quick=True, data=BUNDLED).data.endswith("tool_use_tau_airline_exec.jsonl")
    full = demo_config(tmp_path, data=SYNTHETIC, arms="sft,pivotrl,strict")
    assert full.reference == BUNDLED and full.arms == ("sft", "pivotrl", "strict") and full.seeds == (0, 1, 2)
    assert demo_config(tmp_path, data=SYNTHETIC, reference="none").reference is None
    # hand-offs are other data than the bundled reference's: only from a reference made on them
    with pytest.raises(ValueError, match="bundled reference"):
        demo_config(tmp_path, data=SYNTHETIC, handoffs=True)
    assert demo_config(tmp_path, data=SYNTHETIC, reference=str(tmp_path), handoffs=True).synthetic_handoffs


def test_synthetic_data_is_held_out_by_conversation_and_has_no_e2e_arm(tmp_path):
    from pivot_core import load_pivots, split_pivots

    pivots = list(load_pivots(synthetic_data(20, tmp_path / "synthetic.jsonl")))
    assert len(pivots) >= 20 and all(p.context["world"] == "tau-airline-demo" for p in pivots)
    assert any(p.expert.tool_calls for p in pivots)
    split = split_pivots(pivots, heldout=0.25, by="auto", seed=0)
    assert split.by == "trajectory"
    train = {p.context["trajectory_id"] for p in split.train}
    assert train and not train & {p.context["trajectory_id"] for p in split.heldout}
    # the world writes them with their own seed: the same file twice, not the pretraining's conversations
    assert [p.expert for p in load_pivots(synthetic_data(20, tmp_path / "again.jsonl"))] == [p.expert for p in pivots]
    from pivot_demo.pretrain import PretrainConfig
    from pivot_demo.synthetic import synthetic_pivots
    from verifiers_plugins import get_host

    world = get_host().get("tool_worlds", PretrainConfig().world)()
    pretraining = synthetic_pivots(world, 20, PretrainConfig().seed)
    assert [p.history[1:] for p in pretraining] != [p.history[1:] for p in pivots]
    assert demo_arms(SYNTHETIC) == tuple(a for a in ARMS if a != "e2e") and demo_arms(None) == ARMS


def test_profile_turns_keep_the_tool_calls_and_the_cli_overrides_come_after_the_preset(tmp_path):
    from pivot_cli._demo import demo_config
    from pivot_core import load_pivots

    pivots = list(load_pivots(synthetic_data(10, tmp_path / "synthetic.jsonl")))
    calls = profile_pool(pivots, "tool_calls")
    assert calls and all(p.expert.tool_calls for p in calls) and len(calls) < len(pivots)
    assert profile_pool(pivots, "all") == pivots
    with pytest.raises(ValueError, match="tool_calls"):
        DemoConfig(profile_turns="text")
    # the synthetic preset sets its own steps: --steps must still win (it used to be overwritten)
    cfg = demo_config(tmp_path, data=SYNTHETIC, steps=7, seeds="4,5", profile_turns="all")
    assert (cfg.grpo.steps, cfg.seeds, cfg.profile_turns, cfg.data) == (7, (4, 5), "all", SYNTHETIC)
    assert demo_config(tmp_path, data=SYNTHETIC).profile_turns == "tool_calls"


def test_every_grpo_arm_is_the_demo_grpo_config_filled_in_for_that_arm(tmp_path):
    from pivot_demo.run import arm_config
    from trainers.grpo_config import end_to_end_config

    cfg = DemoConfig().quick_bundled()
    arm = arm_config(tmp_path / "sft", tmp_path / "d_adv.jsonl", tmp_path / "run", cfg, 3, ("exact_match",))
    assert (arm.steps, arm.pivots_per_step, arm.group_size, arm.seed, arm.verifiers) == (4, 4, 4, 3, ("exact_match",))
    assert (arm.objective.learning_rate, arm.objective.beta) == (1e-3, 0.02)
    assert (arm.model, arm.max_new_tokens) == (str(tmp_path / "sft"), cfg.settings.max_new_tokens)
    # the e2e arm: the same config in episode mode, with the demo's turn and observation budgets
    e2e = end_to_end_config(arm, str(tmp_path / "train_split.jsonl"), str(tmp_path / "e2e"))
    assert (e2e.episode.max_turns, e2e.episode.max_observation_tokens, e2e.steps) == (2, 64, 4)


@pytest.mark.slow
def test_arm_intervals_pair_every_arm_with_pivotrl_on_the_same_trajectories():
    from pivot_demo import arm_intervals
    from trainers.eval import SampleRecord

    def run(accepted):  # one sample per trajectory
        return [SampleRecord(f"p{i}", f"t{i}", "calculate", "tool_call", 0, a, False) for i, a in enumerate(accepted)]

    good, bad = [1.0] * 4 + [1.0, 0.0, 1.0, 0.0], [0.0] * 4 + [1.0, 0.0, 1.0, 0.0]
    records = {("sft", 0): run(bad), ("pivotrl", 0): run(good), ("strict", 0): run(good)}
    per_arm, paired = arm_intervals(records, (0,), ("sft", "pivotrl", "strict"))
    assert per_arm["pivotrl"][0] == 0.75 and per_arm["sft"][0] == 0.25
    assert set(paired["vs"]) == {"sft", "strict"} and paired["clusters"] == 8
    assert paired["vs"]["strict"] == {"pivotrl_minus": 0.0, "ci": [0.0, 0.0]}  # identical runs: a point
    sft = paired["vs"]["sft"]
    assert sft["pivotrl_minus"] == 0.5 and 0.0 < sft["ci"][0] <= 0.5 <= sft["ci"][1] <= 1.0


@pytest.mark.slow
def test_demo_quick_on_real_data_runs_every_stage_and_each_arm_learns(tmp_path):
    out = tmp_path / "results.json"
    result = CliRunner().invoke(
        app, ["demo", "pivotrl", "--quick", "--data", "bundled", "--out", str(tmp_path / "demo"), "--json", str(out)]
    )
    assert result.exit_code == 0, result.output
    for stage in ("split", "pretrain", "sft", "profile", "arms", "eval"):
        assert f"] {stage}: " in result.output  # one line per stage, with its elapsed time
    data = json.loads(out.read_text())
    rows = {r["method"]: r for r in data["rows"]}
    assert list(rows) == list(ARMS)
    for r in rows.values():
        assert 0.0 <= r["heldout_ci"][0] <= r["heldout_accept"] <= r["heldout_ci"][1] <= 1.0
        assert len(r["seeds"]) == len(r["heldout_per_seed"]) == len(r["weight_change"]) >= 2
        assert math.isfinite(r["reward_std"]) and 0.0 <= r["zero_var_share"] <= 1.0
    for r in (rows[m] for m in ARMS if m != "e2e"):
        # an arm changed its parameters (a no_filter seed whose batches all had equal rewards
        # rightly stays put: zero advantages and a zero KL at the reference give no gradient)
        assert max(r["weight_change"]) > 0, f"{r['method']} did not change its parameters"
    # the end-to-end arm ran whole episodes through the same trainer; with outcome rewards on this
    # budget its groups rarely mix, so it may rightly stay put (the paper's point about e2e RL)
    e2e = rows["e2e"]
    assert e2e["turns_per_rollout"] > rows["pivotrl"]["turns_per_rollout"] == 1.0
    assert e2e["weight_change"][0] > 0 or e2e["zero_var_share"] == 1.0
    # selection: GRPO batches drawn from D_adv have fewer zero-variance groups than from D_cand
    assert rows["pivotrl"]["zero_var_share"] < rows["no_filter"]["zero_var_share"]
    assert data["contrast"]["d_cand_zero_var_share"] > 0.0
    low, high = data["contrast"]["ci"]
    assert low <= data["contrast"]["pivotrl_minus_sft"] <= high
    # held-out text turns are a second measure, with pivotrl's paired differences to every other arm
    assert data["sizes"]["heldout_text_eval"] > 0 and set(data["contrast"]["text"]["vs"]) == set(ARMS) - {"pivotrl"}
    assert all(r["heldout_text_ci"][0] <= r["heldout_text_accept"] <= r["heldout_text_ci"][1] for r in rows.values())
    assert "pivotrl - no_filter" in result.output
    assert 0.0 <= data["contrast"]["text"]["sft_start_accept"] <= 1.0 and "RL start" in result.output
    for plot in data["plots"]:
        assert (tmp_path / "demo" / plot.rsplit("/", 1)[-1]).stat().st_size > 0
    # every model folder carries its stage settings
    from trainers.settings import StageSettings

    for folder in ("pretrain", "sft", "runs/pivotrl-seed0/final", "runs/sft-seed0/final"):
        assert StageSettings.load(tmp_path / "demo" / folder) == DemoConfig().quick_bundled().settings


@pytest.mark.slow
def test_demo_quick_starts_from_the_bundled_reference_and_shows_both_domains(tmp_path):
    out = tmp_path / "results.json"
    result = CliRunner().invoke(
        app, ["demo", "pivotrl", "--quick", "--out", str(tmp_path / "demo"), "--json", str(out)]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    print(f"pivot demo pivotrl --quick: {data['seconds']} s, stages {data['stages']}")  # the runtime, in CI's log
    for stage in ("split", "reference", "profile", "arms", "eval"):
        assert f"] {stage}: " in result.output  # one line per stage, with its elapsed time
    assert "] pretrain: " not in result.output and "bundled" in result.output  # no pretraining here
    rows = {r["method"]: r for r in data["rows"]}
    assert list(rows) == ["sft", "pivotrl"]
    for r in rows.values():
        assert {"method", "heldout_accept", "heldout_ci", "zero_var_share", "reward_std", "seeds"} <= set(r)
        for kind in ("heldout", "heldout_text"):  # in domain and out of domain
            assert 0.0 <= r[f"{kind}_ci"][0] <= r[f"{kind}_accept"] <= r[f"{kind}_ci"][1] <= 1.0
        assert r["seeds"] == [0, 1, 2] and math.isfinite(r["reward_std"]) and max(r["weight_change"]) > 0
    for part in (data["contrast"], data["contrast"]["text"]):
        low, high = part["vs"]["sft"]["ci"]
        assert low <= part["vs"]["sft"]["pivotrl_minus"] <= high
    # arms train on tool calls alone: the text turns are out of domain
    assert data["config"]["profile_turns"] == "tool_calls" and data["sizes"]["heldout_text_eval"] > 0
    assert "Three short runs" in result.output and "single runs point both ways" in result.output  # what it can say
    assert [p.rsplit("/", 1)[-1] for p in data["plots"]] == ["arms.png", "zero_var.png"]
    for plot in data["plots"]:
        assert (tmp_path / "demo" / plot.rsplit("/", 1)[-1]).stat().st_size > 0
    # the arms sampled with the reference's own stage settings
    from trainers.settings import StageSettings

    ref = StageSettings.load(bundled_reference())
    assert StageSettings.load(tmp_path / "demo" / "runs" / "pivotrl-seed0" / "final") == ref
