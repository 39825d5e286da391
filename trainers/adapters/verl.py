"""verl: a `custom_reward_function` and a Parquet export in verl's RL dataset layout.

verl's RL datasets are Parquet files with the columns `data_source`, `prompt` (chat messages
`{role, content}`), `ability`, `reward_model` (`{style, ground_truth}`) and `extra_info` (free-form;
here `split`, `index`, `pivot_id`, `pivot_json`). Point verl (0.9) at the reward function with
`reward.custom_reward_function.path=trainers/adapters/verl.py reward.custom_reward_function.name=compute_score`
(read by verl's `get_custom_reward_fn`); its reward managers (`NaiveRewardManager`, classic and
reward-loop) call `compute_score(data_source=, solution_str=, ground_truth=, extra_info=)` per
response, with the response alone decoded, so no prompt truncation can shift it.

Per-pivot tools: verl renders an agent loop's prompt with the tools of its tool config, filtered
per row by `extra_info["tool_selection"]` (verl's `ToolAgentLoop`). `verl_rows` writes each pivot's
tool names there and `write_verl_tool_config(pivots, PATH)` writes the config
(`actor_rollout_ref.rollout.multi_turn.tool_config_path=PATH`, `...multi_turn.format=hermes`, and
`...multi_turn.max_assistant_turns=1` so that a single-step pivot stays one turn: its tools are
declared, never run there; episodes run tools in `verl_agent_loop`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pivot_core import Pivot
from trainers.adapters._common import (
    DEFAULT_ENV,
    PivotScorer,
    error_result,
    expert_text,
    flat_prompt_messages,
    pivot_ref,
)
from verifiers_plugins import ChainResult

log = logging.getLogger(__name__)

_SCORER: PivotScorer | None = None


def _scorer() -> PivotScorer:
    global _SCORER  # one per reward worker: envs and verifier chains are built once
    if _SCORER is None:
        _SCORER = PivotScorer(DEFAULT_ENV)
    return _SCORER


def verl_rows(pivots: Sequence[Pivot], env_id: str = DEFAULT_ENV, split: str = "train") -> list[dict[str, Any]]:
    """One verl RL row per pivot; `data_source` is the env id, so `compute_score` knows which env scores it."""
    rows = []
    for i, p in enumerate(pivots):
        ref = pivot_ref(env_id, p)
        rows.append(
            {
                "data_source": env_id,
                "prompt": flat_prompt_messages(p),
                "ability": p.domain,
                "reward_model": {"style": "rule", "ground_truth": expert_text(p)},
                "extra_info": {
                    "split": split,
                    "index": i,
                    "pivot_id": p.id,
                    "pivot_json": ref["pivot_json"],
                    "tool_selection": [tool_name(t) for t in p.tools],
                },
            }
        )
    return rows


def write_verl_parquet(
    pivots: Sequence[Pivot], path: str | Path, env_id: str = DEFAULT_ENV, split: str = "train"
) -> int:
    """Write `verl_rows` as a Parquet file (pyarrow); returns the row count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = verl_rows(pivots, env_id, split)
    pq.write_table(pa.Table.from_pylist(rows), str(path))
    return len(rows)


def tool_name(schema: Mapping[str, Any]) -> str:
    """The function name of an OpenAI tool schema (`{"type": "function", "function": {...}}` or the bare function)."""
    return str((schema.get("function") or schema)["name"])


SCHEMA_TOOL = "trainers.adapters.verl_agent_loop.PivotSchemaTool"


def write_verl_tool_config(pivots: Sequence[Pivot], path: str | Path) -> int:
    """Verl's tool config (`tools: [{class_name, config, tool_schema}]`) declaring every pivot tool; returns the count.

    Written as JSON, which is YAML (`OmegaConf.load` reads it). Two pivots declaring one name with
    different schemas is an error: verl keys its tools by name.

    Raises:
        ValueError: a tool name with two different schemas.
    """
    import json

    schemas: dict[str, dict[str, Any]] = {}
    for p in pivots:
        for t in p.tools:
            schema = {"type": "function", "function": dict(t.get("function") or t)}
            name = tool_name(schema)
            if schemas.setdefault(name, schema) != schema:
                raise ValueError(f"tool {name!r}: expected one schema per name, pivot {p.id!r} declares another")
    tools = [{"class_name": SCHEMA_TOOL, "config": {"type": "native"}, "tool_schema": s} for s in schemas.values()]
    Path(path).write_text(json.dumps({"tools": tools}, indent=1, ensure_ascii=False))
    return len(tools)


def compute_score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: dict | None = None, **kwargs: Any
) -> dict[str, Any]:
    """Score `solution_str` at the pivot named in `extra_info`.

    Args:
        data_source: the env id written by `verl_rows` (e.g. `pivot/tool-use-v0`).
        solution_str: the decoded response.
        ground_truth: the expert action text (kept for verl's logs; the verifiers read the pivot).
        extra_info: the row's `extra_info` (needs `pivot_json`, or a `pivot_id` of the env's data).
        kwargs: anything newer verl versions pass (ignored).

    Returns:
        `{"score": reward, "accepted": bool, "verifier_error": bool}`; verl logs the extra keys. A row
        without a readable pivot, or a verifier that could not decide, scores 0 with
        `verifier_error` True and a logged reason (verl has no "not applicable").
    """
    result = score_row(solution_str, extra_info or {}, data_source)
    if result.error:
        log.warning("pivot reward error (scored 0): %s", result.error)
    return {"score": result.reward, "accepted": result.accepted, "verifier_error": result.error is not None}


def score_row(solution_str: str, extra_info: Mapping[str, Any], env_id: str) -> ChainResult:
    """The verdict on one response at the pivot its row's `extra_info` names; an error verdict when none."""
    scorer = _scorer()
    try:
        env = scorer.env(env_id)  # data_source names the env: an unknown id is the row's fault too
        pivot = scorer.pivot(pivot_id=extra_info.get("pivot_id"), pivot=extra_info.get("pivot_json"), env_id=env_id)
    except Exception as e:  # a bad row scores 0 with the reason; it never stops verl's reward worker
        return error_result("verl_row", f"row names no pivot ({sorted(extra_info)}): {type(e).__name__}: {e}")
    return env.score(pivot, [solution_str])[0]
