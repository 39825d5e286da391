"""TRL: a GRPOTrainer reward function that scores through a pivot env, a dataset export, a rollout function.

```python
from trl import GRPOConfig, GRPOTrainer
from trainers.adapters.trl import pivot_reward_func, pivots_to_dataset

train = pivots_to_dataset(pivots, tokenizer=tokenizer)     # prompt (rendered with tools) + pivot_id
reward = pivot_reward_func("pivot/tool-use-v0", dataset="pivots.jsonl")   # or pivot_reward_func(env)
trainer = GRPOTrainer(model=..., reward_funcs=reward, train_dataset=train, processing_class=tokenizer, ...)
```

TRL calls reward functions as `f(prompts=, completions=, completion_ids=, **kw)` where `kw` holds
every dataset column (one value per completion) plus `trainer_state`, `log_extra`, `log_metric`,
and expects one float, or None for "not applicable", per completion.

TRL renders conversational prompts with the trainer-level `tools` only (Python callables), so a
pivot's own tool schemas would be lost there: with a `tokenizer`, `pivots_to_dataset` renders each
prompt with `trainers.render_prompt` (history + that pivot's tools, as the project's own trainer
samples from) and gives TRL the text. TRL 1.16 no longer truncates prompts; `max_prompt_tokens`
keeps the last tokens, as the project's backends do.

`pivot_rollout_func(env)` is a TRL `rollout_func` (experimental in TRL 1.16): it samples the
completions with the trainer's model, steps the pivot env with each one, and hands the env's
reward to the `env_reward` reward function (`reward_funcs=env_reward`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pivot_core import Pivot
from trainers import render_prompt
from trainers.adapters._common import DEFAULT_ENV, PivotScorer, completion_text, pivot_ref, prompt_messages
from trainers.adapters._trl_env import PivotEnvironment, pivot_environment

RewardFunc = Callable[..., list[float | None]]
"""TRL's reward-function shape: keyword arguments in, one float-or-None per completion out."""


def rendered_prompt(
    tokenizer: Any, pivot: Pivot, max_history_messages: int | None = None, max_prompt_tokens: int | None = None
) -> str:
    """The prompt text of `pivot` (`trainers.render_prompt`), cut to its last `max_prompt_tokens` tokens."""
    text = render_prompt(tokenizer, pivot, max_history_messages)
    if max_prompt_tokens is None:
        return text
    ids = tokenizer(text=text, add_special_tokens=False)["input_ids"]
    return text if len(ids) <= max_prompt_tokens else tokenizer.decode(ids[-max_prompt_tokens:])


def pivots_to_dataset(
    pivots: Sequence[Pivot],
    env_id: str = DEFAULT_ENV,
    *,
    embed_pivot: bool = False,
    tokenizer: Any = None,
    max_history_messages: int | None = None,
    max_prompt_tokens: int | None = None,
) -> Any:
    """Pivots as a `datasets.Dataset` for TRL.

    Args:
        pivots: the pivots, one row each.
        env_id: the env whose verifiers score the rows (the `env_id` column).
        embed_pivot: add `pivot_json` (the whole pivot), so that scoring needs no data file.
        tokenizer: when given, `prompt` is the rendered text (history and the pivot's tool schemas);
            when None, the history as chat messages (TRL adds no per-row tools to those).
        max_history_messages: history messages kept when rendering (None keeps all).
        max_prompt_tokens: prompt tokens kept when rendering (None keeps all).

    Returns:
        Columns `prompt`, `pivot_id`, `env_id` (and `pivot_json`).
    """
    from datasets import Dataset

    rows = []
    for p in pivots:
        if tokenizer is not None:
            prompt: Any = rendered_prompt(tokenizer, p, max_history_messages, max_prompt_tokens)
        else:
            prompt = prompt_messages(p)
        row = {"prompt": prompt, "pivot_id": p.id, "env_id": env_id}
        if embed_pivot:
            row["pivot_json"] = pivot_ref(env_id, p)["pivot_json"]
        rows.append(row)
    return Dataset.from_list(rows)


def pivot_reward_func(env: Any = DEFAULT_ENV, *, log_acceptance: bool = True, **env_kwargs: Any) -> RewardFunc:
    """A TRL reward function scoring each completion at its row's pivot.

    Completions of the same pivot (TRL repeats each prompt `num_generations` times) are scored as one
    batched group through the env's scoring path. A completion whose verdict rests on a verifier
    that could not decide (an error verdict) gets None, which TRL aggregates NaN-aware, instead of
    a 0 that would read as "wrong".

    Args:
        env: an env id or a built env whose verifiers score the completions.
        log_acceptance: report the acceptance rate per deciding verifier through TRL's `log_metric`.
        env_kwargs: keyword arguments for `gym.make` when `env` is an id; `dataset=PATH` names the
            file the rows were exported from, when it is not the env's bundled data.

    Returns:
        The reward function (named `pivot_reward` in TRL's logs). A row whose `pivot_id` the env
        does not hold (and that embeds no pivot) fails the first call with the id and the fix.
    """
    scorer = PivotScorer(env, **env_kwargs)
    scorer.env()  # build now: a bad env id or dataset fails at construction, not after generation

    def pivot_reward(prompts=None, completions=None, completion_ids=None, **kw: Any) -> list[float | None]:
        if "pivot_id" not in kw:
            raise ValueError("pivot_reward: expected a 'pivot_id' dataset column, got columns " + str(sorted(kw)))
        texts = [completion_text(c) for c in completions]
        rewards: list[float | None] = [None] * len(texts)
        groups: dict[tuple[str, str | None], list[int]] = {}
        for i, pid in enumerate(kw["pivot_id"]):
            env_id = kw["env_id"][i] if "env_id" in kw else None
            groups.setdefault((pid, env_id), []).append(i)
        accepted: dict[str, list[float]] = {}
        for (pid, env_id), idx in groups.items():
            pivot = kw["pivot_json"][idx[0]] if "pivot_json" in kw else None
            results = scorer.score([texts[i] for i in idx], pivot_id=pid, pivot=pivot, env_id=env_id)
            for i, r in zip(idx, results, strict=True):
                rewards[i] = None if r.error else r.reward
                for name, verdict in r.verdicts.items():
                    accepted.setdefault(name, []).append(float(verdict.accepted))
        log_metric = kw.get("log_metric")
        if log_acceptance and callable(log_metric):
            for name in sorted(accepted):  # sorted: every rank logs the same keys in the same order
                log_metric(f"pivot/accept/{name}", sum(accepted[name]) / len(accepted[name]))
        return rewards

    return pivot_reward


def env_reward(completions=None, env_reward: Sequence[float | None] | None = None, **kw: Any) -> list[float | None]:
    """The reward function that goes with `pivot_rollout_func`: the env's reward of each rollout."""
    if env_reward is None:
        raise ValueError("env_reward: no 'env_reward' field; pass rollout_func=pivot_rollout_func(...) to GRPOTrainer")
    return list(env_reward)


def pivot_rollout_func(
    env: Any = DEFAULT_ENV,
    *,
    dataset_rows: Any,
    max_new_tokens: int = 64,
    temperature: float = 1.0,
    **env_kwargs: Any,
) -> Callable[[list, Any], dict[str, Any]]:
    """A TRL `rollout_func` whose rollouts are episodes of a pivot env.

    For each prompt TRL hands over, it samples one completion with the trainer's model (TRL has
    already repeated each prompt `num_generations` times), resets the env at that prompt's pivot,
    steps it with the completion, and returns the env's reward as the `env_reward` field.

    Args:
        env: an env id or a built env.
        dataset_rows: the train dataset (`pivots_to_dataset(..., tokenizer=...)`): rollout functions
            receive prompts only, so each prompt text is mapped back to its row's pivot id; two
            pivots with the same prompt text are an error here, not a guess later.
        max_new_tokens: the most tokens a completion may have.
        temperature: sampling temperature.
        env_kwargs: keyword arguments for `gym.make` when `env` is an id.

    Returns:
        `rollout(prompts, trainer) -> {"prompt_ids", "completion_ids", "logprobs", "env_reward"}`.
    """
    scorer = PivotScorer(env, **env_kwargs)
    by_prompt = _pivot_of_prompt(dataset_rows)

    def rollout(prompts: list, trainer: Any) -> dict[str, Any]:
        tokenizer, model = trainer.processing_class, trainer.model
        out: dict[str, list] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_reward": []}
        gym_env = scorer.env()
        for prompt in prompts:
            ids = tokenizer(text=prompt, add_special_tokens=False)["input_ids"]
            completion, logprobs = _sample(model, tokenizer, ids, temperature, max_new_tokens)
            gym_env.reset(options={"pivot_id": by_prompt[prompt]})
            _, reward, _, _, info = gym_env.step(tokenizer.decode(completion, skip_special_tokens=True))
            out["prompt_ids"].append(ids)
            out["completion_ids"].append(completion)
            out["logprobs"].append(logprobs.tolist())
            out["env_reward"].append(None if info["error"] else float(reward))
        return out

    return rollout


def _pivot_of_prompt(dataset_rows: Any) -> dict[str, str]:
    """Each rendered prompt text -> its row's pivot id (rollout functions receive prompts only)."""
    by_prompt: dict[str, str] = {}
    for row in dataset_rows:
        if not isinstance(row["prompt"], str):
            raise ValueError("pivot_rollout_func: expected rendered text prompts (pivots_to_dataset(tokenizer=...))")
        if by_prompt.setdefault(row["prompt"], row["pivot_id"]) != row["pivot_id"]:
            raise ValueError(f"pivot_rollout_func: pivots {by_prompt[row['prompt']]!r} and {row['pivot_id']!r} "
                             "render the same prompt; a rollout could not tell them apart")  # fmt: skip
    return by_prompt


def _sample(model: Any, tokenizer: Any, ids: list[int], temperature: float, max_new_tokens: int) -> tuple[list, Any]:
    """One sampled completion of prompt `ids`, and its tokens' log-probs under the sampling distribution."""
    import torch

    with torch.no_grad():
        gen = model.generate(
            torch.tensor([ids], device=model.device),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long, device=model.device),
            do_sample=True,
            temperature=temperature,
            max_new_tokens=max_new_tokens,
            output_scores=True,
            return_dict_in_generate=True,
            pad_token_id=tokenizer.pad_token_id,
        )
    completion = gen.sequences[0, len(ids) :].tolist()
    steps = torch.stack(gen.scores, dim=0)[:, 0, :] / temperature  # the sampling distribution
    logprobs = torch.log_softmax(steps.float(), dim=-1)[torch.arange(len(completion)), completion]
    return completion, logprobs


__all__ = [
    "PivotEnvironment",
    "env_reward",
    "pivot_environment",
    "pivot_reward_func",
    "pivot_rollout_func",
    "pivots_to_dataset",
    "rendered_prompt",
]
