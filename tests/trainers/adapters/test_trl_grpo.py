"""Two real TRL GRPOTrainer steps on CPU with the tiny local model, rewarded through a pivot env."""

import json
import math

import gymnasium as gym
import pytest

import pivot_envs  # noqa: F401
from trainers.adapters.trl import pivot_reward_func, pivots_to_dataset


@pytest.mark.slow
def test_two_trl_grpo_steps_with_pivot_reward(tiny_policy, tmp_path):
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    pivots = gym.make("pivot/tool-use-v0").unwrapped.pivots
    # TRL 1.16 has no prompt truncation: take the two pivots with the shortest histories so the
    # rendered prompts (about 130 tokens) fit the tiny policy's 512 positions
    pivots = sorted(pivots, key=lambda p: len(json.dumps([m.to_json() for m in p.history])))[:2]
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_policy.path))
    args = GRPOConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        max_steps=2,  # the smoke run: two optimizer steps
        per_device_train_batch_size=4,  # one group of 4 per step
        num_generations=4,  # G=4: the smallest group that can mix rewards
        max_completion_length=16,  # a few tokens of a tool call; keeps 2 cores busy for seconds only
        learning_rate=1e-3,  # a tiny model needs a large step to move in two steps
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        bf16=False,
    )
    trainer = GRPOTrainer(
        model=str(tiny_policy.path),
        reward_funcs=pivot_reward_func("pivot/tool-use-v0"),
        args=args,
        train_dataset=pivots_to_dataset(pivots),
        processing_class=tokenizer,
    )
    trainer.train()
    logs = [x for x in trainer.state.log_history if "rewards/pivot_reward/mean" in x]
    assert len(logs) == 2
    for entry in logs:
        assert 0.0 <= entry["rewards/pivot_reward/mean"] <= 1.0
        assert math.isfinite(entry["loss"])
        # per-verifier acceptance logged by the reward function through TRL's log_metric
        assert any(k.startswith("pivot/accept/") for k in entry)
