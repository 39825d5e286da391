"""TRL: a GRPOTrainer reward function that scores through a pivot env, and a dataset export.

```python
from trl import GRPOConfig, GRPOTrainer
from trainers.adapters.trl import pivot_reward_func, pivots_to_dataset

train = pivots_to_dataset(env.unwrapped.pivots)           # prompt (chat messages) + pivot_id
trainer = GRPOTrainer(model=..., reward_funcs=pivot_reward_func("pivot/tool-use-v0"), train_dataset=train, ...)
```

TRL calls reward functions as `f(prompts=, completions=, completion_ids=, **kw)` where `kw` holds
every dataset column (one value per completion) plus `trainer_state`, `log_extra`, `log_metric`,
and expects one float, or None for "not applicable", per completion.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pivot_envs._model import Pivot
from trainers.adapters._common import DEFAULT_ENV, PivotScorer, completion_text, pivot_ref, prompt_messages

RewardFunc = Callable[..., list[float | None]]
"""TRL's reward-function shape: keyword arguments in, one float-or-None per completion out."""


def pivots_to_dataset(pivots: Sequence[Pivot], env_id: str = DEFAULT_ENV, *, embed_pivot: bool = False) -> Any:
    """Pivots as a `datasets.Dataset` with conversational prompts.

    Columns: `prompt` (the history as chat messages), `pivot_id`, `env_id`, and `pivot_json` (the whole
    pivot, when `embed_pivot`, so that scoring does not need the env's data file).
    Tool schemas stay in the pivot: TRL passes dataset-level `tools` through its own argument.
    """
    from datasets import Dataset

    rows = []
    for p in pivots:
        ref = pivot_ref(env_id, p)
        row = {"prompt": prompt_messages(p), "pivot_id": p.id, "env_id": env_id}
        if embed_pivot:
            row["pivot_json"] = ref["pivot_json"]
        rows.append(row)
    return Dataset.from_list(rows)


def pivot_reward_func(env: Any = DEFAULT_ENV, *, log_acceptance: bool = True, **env_kwargs: Any) -> RewardFunc:
    """A TRL reward function scoring each completion at its row's pivot.

    Completions of the same pivot (TRL repeats each prompt `num_generations` times) are scored as one
    batched group. A completion whose verdict rests on a verifier that could not decide (an error
    verdict) gets None, which TRL aggregates NaN-aware, instead of a 0 that would read as "wrong".

    Args:
        env: an env id or a built env whose verifiers score the completions.
        log_acceptance: report the acceptance rate per deciding verifier through TRL's `log_metric`.
        env_kwargs: keyword arguments for `gym.make` when `env` is an id.

    Returns:
        The reward function (named `pivot_reward` in TRL's logs).
    """
    scorer = PivotScorer(env, **env_kwargs)

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
