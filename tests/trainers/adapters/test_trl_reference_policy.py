"""TRL's `environment_factory` with a real tiny policy: the bundled reference generates, nothing is scripted.

The bundled reference (`pivot_demo.bundled_reference()`, 0.34M parameters) was trained on
synthetic airline conversations whose ids are whole tokens of its vocabulary; it writes Hermes
tool calls (`<tool_call>\\n{json}\\n</tool_call>`, Qwen's form). TRL 1.16 parses generated calls
with the tokenizer's `response_template` and knows none for this template (`add_response_schema`
raises "Unrecognized chat template"), so the test sets TRL's own Qwen template, as a user of a
Hermes-writing model must. The rows are synthetic conversations of the airline world the episode
env restores (its default database), each given the conversation's own calls as the tau-bench
task's gold actions (the episode env starts only from tau-bench tasks; the reward here is the
pivot's verifiers on the first call, not the outcome). Rows are those the reference was trained
to copy: every argument of the expert's call is one token of its vocabulary.
"""

import json
import math
import statistics
from collections import Counter

import pytest

import pivot_envs  # noqa: F401
from pivot_demo import bundled_reference
from pivot_demo.synthetic import synthetic_pivots
from pivot_envs import write_pivots
from pivot_tool_worlds import tau_airline
from trainers.adapters.trl import pivot_environment

PROMPT_TOKENS = 400  # the reference has 512 positions: room for the prompt, one call and a short reply


def with_gold_task(pivots):
    """Each pivot with its conversation's own calls as the task's gold actions (what tau-bench tasks hold)."""
    import dataclasses

    last = {}
    for p in pivots:
        last[p.context["trajectory_id"]] = p
    tasks = {}
    for tid, p in last.items():
        calls = [c for m in (*p.history, p.expert) if m.role == "assistant" for c in m.tool_calls]
        tasks[tid] = {"actions": [{"name": c.name, "kwargs": json.loads(c.arguments)} for c in calls], "outputs": []}
    return [dataclasses.replace(p, context={**p.context, "task": tasks[p.context["trajectory_id"]]}) for p in pivots]


def copyable(pivot, vocab):
    """The expert's first call has only string arguments that are whole tokens (what the reference copies)."""
    if not pivot.expert.tool_calls:
        return False
    args = json.loads(pivot.expert.tool_calls[0].arguments)
    return bool(args) and all(isinstance(v, str) and v in vocab for v in args.values())


@pytest.mark.slow
def test_grpo_trainer_with_the_reference_generating_gets_varied_rewards_from_get_reward(trl_args, tmp_path):
    from transformers import AutoTokenizer
    from trl import GRPOTrainer
    from trl.chat_template_utils import add_response_schema, qwen3_template

    tokenizer = AutoTokenizer.from_pretrained(str(bundled_reference()))
    with pytest.raises(ValueError, match="Unrecognized chat template"):  # what GRPOTrainer would call on its own
        add_response_schema(tokenizer)
    tokenizer.response_template = qwen3_template  # the reference's calls are Qwen/Hermes calls
    vocab = tokenizer.get_vocab()
    pivots = [p for p in with_gold_task(synthetic_pivots(tau_airline(), 60, seed=7)) if copyable(p, vocab)]
    write_pivots(pivots, tmp_path / "synthetic.jsonl")
    env = pivot_environment(
        "pivot/tool-use-episode-v0",
        dataset=str(tmp_path / "synthetic.jsonl"),
        max_history_messages=2,
        system_prompt=False,
    )
    tools = [t for t in vars(env.environment_class) if not t.startswith("_") and t not in ("reset", "get_reward")]
    assert tools, "the airline tools"

    def short(row):
        text = tokenizer.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True)
        return len(tokenizer(text=text)["input_ids"]) + 6 * len(tools) < PROMPT_TOKENS  # about the tools block's size

    rows = env.train_dataset.filter(short)
    rows = rows.select(range(min(24, len(rows))))
    rewards: list[float | None] = []
    calls: list[int] = []  # tool calls per rollout, as the environment ran them

    def factory():
        rollout = env.factory()
        get_reward = rollout.get_reward

        def recording_reward():
            rewards.append(get_reward())
            calls.append(len(rollout._calls))
            return rewards[-1]

        rollout.get_reward = recording_reward
        return rollout

    args = trl_args(
        output_dir=str(tmp_path / "out"),
        max_steps=6,  # 96 rollouts: the reference gets a first call right in a few of every hundred
        per_device_train_batch_size=16,  # 4 pivots, 4 rollouts each, per step
        num_generations=4,
        max_completion_length=96,  # one call and its result when short; TRL drops a result past the context
        temperature=0.7,  # the reference's own sampling temperature (pivot_prompt_cuts.json)
    )
    trainer = GRPOTrainer(
        model=str(bundled_reference()),
        args=args,
        train_dataset=rows,
        processing_class=tokenizer,
        environment_factory=factory,
    )
    trainer.train()
    logs = [x for x in trainer.state.log_history if "rewards/PivotToolUseEnvironment/mean" in x]
    assert len(logs) == 6 and all(math.isfinite(x["loss"]) for x in logs)
    assert len(rewards) == 96 and None not in rewards
    frequency = [x["tools/call_frequency"] for x in logs]
    print(f"reference in TRL: {sum(rewards)}/{len(rewards)} first calls right; calls/rollout {frequency}")
    print(f"rollouts by the number of tool calls they made: {sorted(Counter(calls).items())}")
    assert statistics.pstdev(rewards) > 0  # the policy itself sometimes gets the first call right
    assert any(x["tools/call_frequency"] > 0 for x in logs)  # TRL parsed and ran the policy's calls
