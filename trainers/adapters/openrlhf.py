"""OpenRLHF: a `--reward.remote_url reward_func.py` reward function and a JSONL prompt export.

OpenRLHF (0.11: reinforced fine-tuning through its single-turn agent executor) loads the Python
file given as `--reward.remote_url` and calls `reward_func(queries, prompts, labels)`: `queries`
are the decoded prompt + response tokens, `prompts` the rendered prompt texts, `labels` the
`--data.label_key` column. It expects `{"rewards": tensor, "scores": tensor, "extra_logs": {...}}`
(scores in [0, 1], used for dynamic filtering).

When a prompt is longer than `--data.max_len` minus `--rollout.max_new_tokens`, OpenRLHF keeps its
last tokens only, so the query no longer starts with the prompt. The completion is then located
by `locate_response` (the query's prefix that is a tail of the prompt), and the pivot by the label,
never by the text. A completion that cannot be located exactly gets an error verdict.

Export with `write_openrlhf_jsonl(pivots, path)` and train with
`--data.prompt_dataset path --data.input_key context_messages --data.apply_chat_template
--data.label_key label --reward.remote_url trainers/adapters/openrlhf.py`.
"""

# No `from __future__ import annotations`: OpenRLHF runs this file with `exec_module` outside
# `sys.modules`, where `dataclass` cannot resolve string annotations (it raises AttributeError).
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from pivot_core import Pivot
from trainers import render_prompt
from trainers.adapters._common import DEFAULT_ENV, PivotScorer, error_result, pivot_ref, prompt_messages
from verifiers_plugins import ChainResult

log = logging.getLogger(__name__)

# A truncated prompt keeps `max_len - max_new_tokens` tokens: far more than this many characters
# in any real run. Shorter overlaps between the query and the prompt's tail are taken for chance
# (a newline, a role header), not for the kept prompt, so such a query gets an error verdict.
MIN_OVERLAP_CHARS = 64

# Decoding a token cut inside a multi-byte character gives replacement characters at the start.
_REPLACEMENT = "\ufffd"

_SCORER: PivotScorer | None = None


def _scorer() -> PivotScorer:
    global _SCORER  # one scorer per worker process: envs and verifier chains are built once
    if _SCORER is None:
        _SCORER = PivotScorer(DEFAULT_ENV)
    return _SCORER


def write_openrlhf_jsonl(
    pivots: Sequence[Pivot], path: str | Path, env_id: str = DEFAULT_ENV, *, tokenizer: Any = None
) -> int:
    """Write one JSON line per pivot: `context_messages` (chat), `label` (a JSON pivot reference).

    OpenRLHF's `--data.apply_chat_template` renders `context_messages` without tool schemas. With
    `tokenizer`, each line also holds `prompt`: the text `trainers.render_prompt` renders (history
    and the pivot's tools, as the project's own trainer samples from); train on it with
    `--data.input_key prompt` and no `--data.apply_chat_template`.
    """
    path = Path(path)
    with path.open("w", encoding="utf-8") as f:
        for p in pivots:
            row = {"context_messages": prompt_messages(p), "label": json.dumps(pivot_ref(env_id, p))}
            if tokenizer is not None:
                row["prompt"] = render_prompt(tokenizer, p)
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return len(pivots)


@dataclass(frozen=True)
class Located:
    """Where the response starts in a query.

    Attributes:
        readings: the possible response texts, longest kept-prompt first; one when the prompt was
            not truncated. Several when the response may begin with a copy of the prompt's tail.
        truncated: the query does not start with the whole prompt.
        problem: why no reading was found (then `readings` is empty).
    """

    readings: tuple[str, ...]
    truncated: bool
    problem: str | None = None


def _tail_overlaps(query: str, prompt: str) -> list[int]:
    """Every k >= 1 with `query[:k] == prompt[-k:]`, longest first (borders of query + sep + prompt)."""
    head = query[: len(prompt)]
    s: list[str | None] = [*head, None, *prompt]  # None: a separator no character equals
    pi = [0] * len(s)
    for i in range(1, len(s)):
        k = pi[i - 1]
        while k and s[i] != s[k]:
            k = pi[k - 1]
        pi[i] = k + (s[i] == s[k])
    out, k = [], pi[-1]
    while k:
        out.append(k)
        k = pi[k - 1]
    return out


def locate_response(query: str, prompt: str) -> Located:
    """The response part of an OpenRLHF query, given the (possibly left-truncated) prompt.

    An untruncated query is the prompt followed by the response. A truncated one starts with a
    tail of the prompt; every overlap of at least `MIN_OVERLAP_CHARS` between the query's head and
    the prompt's tail is a possible cut, and each gives one reading of the response (they differ
    only when the response begins with text that repeats the prompt's end).
    """
    if query.startswith(prompt):
        return Located((query[len(prompt) :],), truncated=False)
    body = query.lstrip(_REPLACEMENT)
    cuts = [k for k in _tail_overlaps(body, prompt) if k >= MIN_OVERLAP_CHARS]
    if not cuts:
        return Located(
            (),
            truncated=True,
            problem=f"the query starts with no tail of the prompt of {MIN_OVERLAP_CHARS}+ characters",
        )
    return Located(tuple(body[k:] for k in cuts), truncated=True)


def score_query(query: str, prompt: str, label: str, scorer: PivotScorer | None = None) -> ChainResult:
    """One query's verdict at the pivot its label names; an error verdict when either is not exact.

    Every reading of a truncated query is scored; they must agree, or the reward would rest on a
    guess of where the response starts.
    """
    scorer = scorer or _scorer()
    try:
        ref = json.loads(label) if isinstance(label, str) else dict(label)
        env = scorer.env(ref.get("env_id"))
        pivot = scorer.pivot(pivot_id=ref.get("pivot_id"), pivot=ref.get("pivot_json"), env_id=ref.get("env_id"))
    except Exception as e:  # a bad label scores 0 with the reason; it never stops the rollout
        return error_result("openrlhf_label", f"label names no pivot: {type(e).__name__}: {e}")
    located = locate_response(query, prompt)
    if located.problem:
        return error_result("openrlhf_locate", f"pivot {pivot.id}: prompt truncated and {located.problem}")
    results = env.score(pivot, list(located.readings))
    if len(results) > 1 and (any(r.error for r in results) or len({(r.reward, r.accepted) for r in results}) > 1):
        return error_result(
            "openrlhf_locate",
            f"pivot {pivot.id}: prompt truncated; the response has {len(results)} readings that score "
            f"{[r.reward for r in results]}: where it starts is not known exactly",
        )
    return results[0]  # one reading, or several that agree; a verifier's error verdict passes as it is


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[str], **kwargs: Any) -> dict:
    """OpenRLHF's reward function.

    Args:
        queries: prompt + response texts, as OpenRLHF decodes them (the prompt possibly cut on the left).
        prompts: the prompt texts.
        labels: `label` values written by `write_openrlhf_jsonl`.
        kwargs: anything newer OpenRLHF versions pass (ignored).

    Returns:
        `{"rewards", "scores", "extra_logs"}`: rewards and scores are float tensors. OpenRLHF has no
        "not applicable", so an error verdict (a verifier that could not decide, a label without a
        pivot, a truncated response that cannot be located) scores 0 here, is logged with its
        reason, and is counted in `extra_logs["pivot/errors"]`.
    """
    rewards, errors = [], 0
    for query, prompt, label in zip(queries, prompts, labels, strict=True):
        result = score_query(query, prompt, label)
        if result.error:
            errors += 1
            log.warning("pivot reward error (scored 0): %s", result.error)
        rewards.append(result.reward)
    r = torch.tensor(rewards, dtype=torch.float32)
    return {"rewards": r, "scores": r.clamp(0, 1), "extra_logs": {"pivot/errors": torch.tensor(float(errors))}}
