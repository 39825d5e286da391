"""GRPO with TRL on tool-use pivots, rewarded by the pivot env's verifiers (CI runs it on the tiny policy).

Usage: python examples/trl_grpo.py MODEL_DIR [OUTPUT_DIR]   (a causal LM folder with its tokenizer)
"""

import sys

import gymnasium as gym
from transformers import AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

import pivot_envs  # noqa: F401  (registers the pivot/* env ids)
from trainers.adapters.trl import pivot_reward_func, pivots_to_dataset

model, out = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "trl-grpo-out"
env = gym.make("pivot/tool-use-v0")  # or gym.make(ID, dataset="my_pivots.jsonl")
tokenizer = AutoTokenizer.from_pretrained(model)
pivots = [p for p in env.unwrapped.pivots if p.expert.tool_calls]
# prompts rendered with each pivot's tool schemas, cut the way a small policy reads them
train = pivots_to_dataset(pivots, tokenizer=tokenizer, max_history_messages=2, max_prompt_tokens=96)
group = {"per_device_train_batch_size": 8, "num_generations": 8, "max_completion_length": 64, "temperature": 0.85}
args = GRPOConfig(
    output_dir=out, use_cpu=True, max_steps=2, logging_steps=1, report_to="none", save_strategy="no", **group
)
reward = pivot_reward_func(env)
trainer = GRPOTrainer(model=model, reward_funcs=reward, args=args, train_dataset=train, processing_class=tokenizer)
trainer.train()
print({k: v for k, v in trainer.state.log_history[-2].items() if k.startswith("rewards/")})
