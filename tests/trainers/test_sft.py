import json
import math

import pytest
import torch
from typer.testing import CliRunner

from pivot_envs._env import bundled_paths
from pivot_envs.cli import app
from trainers.sft import SFTConfig, build_example
from trainers.tiny_model import TEST_MODEL


@pytest.mark.slow
def test_cli_builds_a_tiny_model_and_sft_changes_it(tmp_path):
    runner = CliRunner()
    # A 1-layer, 32-wide model: the smoke test checks plumbing, not learning.
    res = runner.invoke(
        app,
        [
            "model",
            "tiny",
            "--out",
            str(tmp_path / "base"),
            "--hidden-size",
            "32",
            "--layers",
            "1",
            "--vocab-size",
            "400",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    built = json.loads(res.stdout)
    assert 0 < built["parameters"] < 200_000 and built["vocab_size"] >= 400
    pivots = bundled_paths(["tool_use_nemo.jsonl"])[0]
    res = runner.invoke(
        app,
        [
            "sft",
            "--model",
            str(tmp_path / "base"),
            "--pivots",
            str(pivots),
            "--out",
            str(tmp_path / "sft"),
            "--steps",
            "2",
            "--batch-size",
            "2",
            "--max-prompt-tokens",
            "64",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["steps"] == 2 and summary["examples"] > 0
    assert math.isfinite(summary["first_loss"]) and math.isfinite(summary["last_loss"])
    from trainers.sft import prompt_cuts

    # `pivot profile --model` samples with the cuts the model was trained with.
    assert prompt_cuts(tmp_path / "sft") == {"max_history_messages": 4, "max_prompt_tokens": 64, "max_new_tokens": 128}
    assert prompt_cuts(tmp_path / "base") == {}
    from transformers import AutoModelForCausalLM

    before = AutoModelForCausalLM.from_pretrained(tmp_path / "base").state_dict()
    after = AutoModelForCausalLM.from_pretrained(tmp_path / "sft").state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)


def test_sft_labels_only_the_expert_turn_and_cuts_the_prompt_from_the_left(tiny_policy):
    import gymnasium as gym
    from transformers import AutoTokenizer

    import pivot_envs  # noqa: F401

    tok = AutoTokenizer.from_pretrained(tiny_policy.path)
    env = gym.make("pivot/tool-use-v0").unwrapped
    pivot = max(env.pivots, key=lambda p: len(p.history))
    ex = build_example(tok, pivot, SFTConfig(max_history_messages=2, max_prompt_tokens=32, max_completion_tokens=500))
    n_prompt = sum(1 for x in ex.labels if x == -100)
    assert n_prompt == 32
    target = [t for t, y in zip(ex.input_ids, ex.labels, strict=True) if y != -100]
    from pivot_envs._render import render_completion

    assert tok.decode(target) == render_completion(pivot.expert, pivot.domain) + "<|im_end|>"


def test_tiny_policy_fixture_learned_its_data(tiny_policy):
    summary = json.loads((tiny_policy.path.parent / "pivot_tiny_sft.json").read_text())
    assert summary["last_loss"] < summary["first_loss"] / 2
    assert TEST_MODEL.hidden_size == 64
