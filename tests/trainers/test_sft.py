import json
import math

import pytest
import torch
from typer.testing import CliRunner

from pivot_cli import app
from pivot_demo.tiny_model import TEST_MODEL
from pivot_envs._env import bundled_paths
from trainers.sft import SFTConfig, build_example


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
    assert prompt_cuts(tmp_path / "sft") == {
        "max_history_messages": 4,
        "max_prompt_tokens": 64,
        "max_new_tokens": 128,
        "temperature": 1.0,
    }
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
    from pivot_core._render import render_completion

    assert tok.decode(target) == render_completion(pivot.expert, pivot.domain) + "<|im_end|>"


def test_tiny_policy_fixture_learned_its_data(tiny_policy):
    summary = json.loads((tiny_policy.path.parent / "pivot_tiny_sft.json").read_text())
    assert summary["last_loss"] < summary["first_loss"] / 2
    assert TEST_MODEL.hidden_size == 64


def test_stock_template_without_generation_blocks_masks_the_expert_turn(tiny_policy):
    # Qwen's stock template has no {% generation %} blocks: return_assistant_tokens_mask is all 0,
    # and the expert turn must then be found as the full render's tokens after the prompt's
    import gymnasium as gym
    from transformers import AutoTokenizer

    import pivot_envs  # noqa: F401
    from pivot_core._render import render_completion
    from pivot_demo.tiny_model import CHAT_TEMPLATE

    tok = AutoTokenizer.from_pretrained(tiny_policy.path)
    stock = AutoTokenizer.from_pretrained(tiny_policy.path)
    stock.chat_template = CHAT_TEMPLATE.replace("{% generation %}", "").replace("{% endgeneration %}", "")
    env = gym.make("pivot/tool-use-v0").unwrapped
    config = SFTConfig(max_history_messages=2, max_prompt_tokens=None, max_completion_tokens=500)
    for pivot in list(env.pivots)[:6]:
        want = build_example(tok, pivot, config)
        got = build_example(stock, pivot, config)
        assert got == want, pivot.id
        target = [t for t, y in zip(got.input_ids, got.labels, strict=True) if y != -100]
        assert stock.decode(target) == render_completion(pivot.expert, pivot.domain) + "<|im_end|>"


def test_stage_settings_round_trip_and_bad_files(tmp_path):
    from trainers.settings import SETTINGS_FILE, StageSettings, settings_of

    s = StageSettings(max_history_messages=None, max_prompt_tokens=300, max_new_tokens=96, temperature=0.7)
    s.save(tmp_path)
    assert StageSettings.load(tmp_path) == s
    assert settings_of(tmp_path / "absent") == StageSettings()
    assert StageSettings.load(tmp_path / "absent") is None
    (tmp_path / SETTINGS_FILE).write_text('{"max_new_tokens": 0}')
    with pytest.raises(ValueError, match=SETTINGS_FILE):
        StageSettings.load(tmp_path)
    (tmp_path / SETTINGS_FILE).write_text('{"max_new_token": 5}')
    with pytest.raises(ValueError, match="unknown settings"):
        StageSettings.load(tmp_path)
