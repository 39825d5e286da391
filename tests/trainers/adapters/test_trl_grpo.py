"""TRL without friction: the documented forms, rendered prompts with tools, real GRPOTrainer runs on CPU."""

import math

import gymnasium as gym
import pytest

import pivot_envs  # noqa: F401
from pivot_core._formats import write_pivots
from pivot_core.errors import DataFileError, UnknownPivot
from trainers.adapters._common import expert_text
from trainers.adapters.trl import env_reward, pivot_reward_func, pivot_rollout_func, pivots_to_dataset


@pytest.fixture(scope="module")
def pivots():
    return gym.make("pivot/tool-use-v0").unwrapped.pivots


@pytest.fixture(scope="module")
def tokenizer(pivots):
    from pivot_demo.tiny_model import _bootstrap_tokenizer, build_tokenizer, corpus_texts

    return build_tokenizer(corpus_texts(pivots, _bootstrap_tokenizer()), 1024)


def test_rendered_prompts_keep_each_pivots_tools(pivots, tokenizer):
    tool_pivots = [p for p in pivots if p.tools][:3]
    ds = pivots_to_dataset(tool_pivots, tokenizer=tokenizer)
    for row, pivot in zip(ds, tool_pivots, strict=True):
        assert isinstance(row["prompt"], str) and row["pivot_id"] == pivot.id
        names = [(t.get("function") or t)["name"] for t in pivot.tools]
        assert all(f"{name}(" in row["prompt"] for name in names)  # the tiny template lists tools as name(...)
        assert row["prompt"].endswith("<|im_start|>assistant\n")
    cut = pivots_to_dataset(tool_pivots[:1], tokenizer=tokenizer, max_prompt_tokens=40)[0]["prompt"]
    assert len(tokenizer(text=cut, add_special_tokens=False)["input_ids"]) <= 41 and cut.endswith("assistant\n")


def test_reward_func_with_a_dataset_path_and_with_an_env(pivots, tmp_path):
    path = tmp_path / "mine.jsonl"
    mine = [p for p in pivots if p.expert.tool_calls][:2]
    write_pivots(mine, path)
    for fn in (
        pivot_reward_func("pivot/tool-use-v0", dataset=str(path)),
        pivot_reward_func(gym.make("pivot/tool-use-v0", dataset=str(path))),
    ):
        rewards = fn(
            prompts=["p"] * 2,
            completions=[expert_text(mine[0]), "no"],
            completion_ids=[[1]] * 2,
            pivot_id=[mine[0].id] * 2,
        )
        assert rewards == [1.0, 0.0]


def test_unknown_pivot_fails_the_first_call_with_the_fix(tmp_path):
    fn = pivot_reward_func("pivot/tool-use-v0")
    with pytest.raises(UnknownPivot, match=r"'not-a-pivot'.*dataset=PATH"):
        fn(prompts=["p"], completions=["x"], completion_ids=[[1]], pivot_id=["not-a-pivot"])
    with pytest.raises(DataFileError, match="missing.jsonl"):
        pivot_reward_func("pivot/tool-use-v0", dataset=str(tmp_path / "missing.jsonl"))  # at construction


def _config(tmp_path, **overrides):
    from trl import GRPOConfig

    fields = {
        "output_dir": str(tmp_path),
        "use_cpu": True,
        "max_steps": 2,
        "per_device_train_batch_size": 8,  # one group of 8 per step
        "num_generations": 8,
        "max_completion_length": 64,  # what the tiny policy was trained to emit
        "temperature": 0.85,  # the tiny policy's mixed-outcome temperature
        "learning_rate": 1e-4,
        "logging_steps": 1,
        "report_to": "none",
        "save_strategy": "no",
        "bf16": False,
        "seed": 0,
    }
    return GRPOConfig(**{**fields, **overrides})


def _policy_dataset(tiny_policy, pivots, tokenizer, n):
    # tool-call pivots first, cut as the tiny policy was trained (TRL 1.16 does not truncate prompts)
    chosen = [p for p in pivots if p.expert.tool_calls][:n]
    ds = pivots_to_dataset(
        chosen,
        tokenizer=tokenizer,
        max_history_messages=tiny_policy.max_history_messages,
        max_prompt_tokens=tiny_policy.max_prompt_tokens,
    )
    return chosen, ds


@pytest.mark.slow
def test_trl_grpo_on_exported_tool_use_pivots(tiny_policy, pivots, tmp_path):
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_policy.path))
    _, ds = _policy_dataset(tiny_policy, pivots, tokenizer, 4)
    seen: list[str] = []
    reward = pivot_reward_func("pivot/tool-use-v0")

    def pivot_reward(completions=None, **kw):
        seen.extend(completions)
        return reward(completions=completions, **kw)

    trainer = GRPOTrainer(
        model=str(tiny_policy.path),
        reward_funcs=pivot_reward,
        args=_config(tmp_path, max_steps=4),
        train_dataset=ds,
        processing_class=tokenizer,
    )
    trainer.train()
    logs = [x for x in trainer.state.log_history if "rewards/pivot_reward/mean" in x]
    assert len(logs) == 4 and all(math.isfinite(x["loss"]) for x in logs)
    assert any("<tool_call>" in c for c in seen)  # the rendered prompts make the policy call tools
    assert max(x["rewards/pivot_reward/std"] for x in logs) > 0  # mixed groups: GRPO has a signal
    assert any(k.startswith("pivot/accept/") for k in logs[0])


@pytest.mark.slow
def test_trl_grpo_through_the_pivot_rollout_func(tiny_policy, pivots, tmp_path):
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_policy.path))
    _, ds = _policy_dataset(tiny_policy, pivots, tokenizer, 2)
    trainer = GRPOTrainer(
        model=str(tiny_policy.path),
        reward_funcs=env_reward,
        args=_config(tmp_path),
        train_dataset=ds,
        processing_class=tokenizer,
        rollout_func=pivot_rollout_func("pivot/tool-use-v0", dataset_rows=ds, max_new_tokens=64, temperature=0.85),
    )
    trainer.train()
    logs = [x for x in trainer.state.log_history if "rewards/env_reward/mean" in x]
    assert len(logs) == 2 and all(math.isfinite(x["loss"]) for x in logs)
    assert all(0.0 <= x["rewards/env_reward/mean"] <= 1.0 for x in logs)
