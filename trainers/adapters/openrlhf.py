"""OpenRLHF: a `--remote_rm_url reward_func.py` reward function and a JSONL prompt export.

OpenRLHF (reinforced fine-tuning) loads a Python file given as `--remote_rm_url` and calls
`reward_func(queries, prompts, labels)`: `queries` are prompt + response texts, `prompts` the prompt
texts, `labels` the `--label_key` column. It expects `{"rewards": tensor, "scores": tensor,
"extra_logs": {...}}` (scores in [0, 1], used for dynamic filtering).

Export with `write_openrlhf_jsonl(pivots, path)` and train with
`--prompt_data path --input_key context_messages --apply_chat_template --label_key label
--remote_rm_url trainers/adapters/openrlhf.py`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from pivot_envs._model import Pivot
from trainers.adapters._common import DEFAULT_ENV, PivotScorer, pivot_ref, prompt_messages

_SCORER: PivotScorer | None = None


def _scorer() -> PivotScorer:
    global _SCORER  # one scorer per worker process: envs and verifier chains are built once
    if _SCORER is None:
        _SCORER = PivotScorer(DEFAULT_ENV)
    return _SCORER


def write_openrlhf_jsonl(pivots: Sequence[Pivot], path: str | Path, env_id: str = DEFAULT_ENV) -> int:
    """Write one JSON line per pivot: `context_messages` (chat) and `label` (a JSON pivot reference)."""
    path = Path(path)
    with path.open("w", encoding="utf-8") as f:
        for p in pivots:
            row = {"context_messages": prompt_messages(p), "label": json.dumps(pivot_ref(env_id, p))}
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return len(pivots)


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[str], **kwargs: Any) -> dict:
    """OpenRLHF's reward function: the response is the query minus its prompt.

    Args:
        queries: prompt + response texts, as OpenRLHF decodes them.
        prompts: the prompt texts (each a prefix of its query).
        labels: `label` values written by `write_openrlhf_jsonl`.
        kwargs: anything newer OpenRLHF versions pass (ignored).

    Returns:
        `{"rewards", "scores", "extra_logs"}`: rewards and scores are float tensors; a verdict resting
        on a verifier error scores 0 here (OpenRLHF has no "not applicable") and is counted in
        `extra_logs["pivot/verifier_errors"]`.
    """
    rewards, errors = [], 0
    for query, prompt, label in zip(queries, prompts, labels, strict=True):
        ref = json.loads(label)
        response = query[len(prompt) :] if query.startswith(prompt) else query
        (result,) = _scorer().score([response], pivot=ref["pivot_json"], env_id=ref["env_id"])
        rewards.append(result.reward)
        errors += result.error is not None
    r = torch.tensor(rewards, dtype=torch.float32)
    return {"rewards": r, "scores": r.clamp(0, 1), "extra_logs": {"pivot/verifier_errors": torch.tensor(float(errors))}}
