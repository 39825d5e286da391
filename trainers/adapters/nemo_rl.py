"""NeMo-RL / NeMo Gym: pivots as NeMo Gym rows, and a resources-server `/verify` mapping.

NeMo Gym trains from rows `{responses_create_params: {input, tools}, expected_action, ...}`
(`write_pivots(..., format="nemo-gym")` writes them). After a rollout, the agent server POSTs a
verify request to the resources server: the row's fields plus `response` (an OpenAI Responses
object whose `output` holds message / function_call items); the answer is the request plus
`reward`. `verify_payload` maps one request to that answer with a pivot env's verifiers, and
`verify_app` serves it as a FastAPI app (`POST /verify`, `POST /seed_session`), so a pivot env can
stand in for a PivotRL resources server.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pivot_core import Message, Pivot, iter_jsonl, render_completion, write_jsonl, write_pivots
from pivot_core.convert.nemo_gym import from_nemo_gym, items_to_messages
from pivot_core.errors import UnknownPivot
from trainers.adapters._common import DEFAULT_ENV, PivotScorer, error_result


def write_nemo_gym_rows(pivots: Sequence[Pivot], path: str | Path) -> int:
    """NeMo Gym rows, one per pivot (the foundation's writer) plus `pivot_id`; returns the count.

    NeMo Gym keeps a row's extra fields in its verify request, so a server holding the pivots
    (`pivot serve --protocol nemo-gym --dataset PATH`) scores the row at its own pivot, context
    included (a browse corpus, a terminal sandbox), not at the pivot rebuilt from the row's text.
    """
    count = write_pivots(pivots, path, format="nemo-gym")
    rows = [row for _, row in iter_jsonl(path)]
    if len(rows) != len(pivots):
        raise ValueError(f"{path}: expected {len(pivots)} rows from the nemo-gym writer, got {len(rows)}")
    write_jsonl([{**row, "pivot_id": p.id} for row, p in zip(rows, pivots, strict=True)], path)
    return count


def response_text(response: Mapping[str, Any], domain: str) -> str:
    """The completion text of a Responses object: its output items rendered as the policy's text."""
    items = [dict(i) for i in response.get("output") or () if i.get("type") != "reasoning"]
    messages, _ = items_to_messages(items)
    tool_calls = tuple(c for m in messages for c in m.tool_calls)
    text = "\n".join(m.content for m in messages if m.content)
    return render_completion(Message(role="assistant", content=text or None, tool_calls=tool_calls), domain)


def verify_payload(
    request: Mapping[str, Any], scorer: PivotScorer | None = None, max_completion_chars: int | None = None
) -> dict[str, Any]:
    """A NeMo Gym verify request -> its verify response (the request plus `reward`).

    Args:
        request: the row's fields plus `response`.
        scorer: the scorer (an env per env id); a tool-use scorer when None. A row of domain D is
            scored by the scorer's `pivot/D-v0` env.
        max_completion_chars: a response rendered longer than this scores 0 with the reason, unscored.

    Returns:
        A copy of the request with `reward` and `pivot_verdict` (the chain's decision) added; a
        request without a readable pivot or response gets reward 0 and an error verdict.
    """
    scorer = scorer or PivotScorer(DEFAULT_ENV)
    row = {k: v for k, v in request.items() if k not in ("response", "reward", "pivot_id")}
    try:
        pivot = held_pivot(scorer, request.get("pivot_id")) or from_nemo_gym(
            row, default_id=str(request.get("uuid") or "verify")
        )
        text = response_text(request.get("response") or {}, pivot.domain)
    except Exception as e:  # a malformed request scores 0 with the reason (an answer, not an HTTP 500)
        result = error_result(
            "nemo_gym_request", f"request holds no readable pivot or response: {type(e).__name__}: {e}"
        )
    else:
        if max_completion_chars is not None and len(text) > max_completion_chars:
            result = error_result(
                "nemo_gym_request",
                f"response has {len(text)} characters, max_completion_chars is {max_completion_chars}",
            )
        else:
            (result,) = scorer.score([text], pivot=pivot, env_id=f"pivot/{pivot.domain}-v0")
    out = copy.deepcopy(dict(request))
    out["reward"] = result.reward
    out["pivot_verdict"] = result.to_json()
    return out


def held_pivot(scorer: PivotScorer, pivot_id: Any) -> Pivot | None:
    """The scorer's default env's own pivot with that id; None when the row names none it holds."""
    if not isinstance(pivot_id, str):
        return None
    try:
        return scorer.env().pivot(pivot_id)
    except UnknownPivot:  # a row of another data set: scored at the pivot its own fields describe
        return None


def verify_scorer(env: Any = DEFAULT_ENV, **env_kwargs: Any) -> PivotScorer:
    """The scorer `verify_payload` uses: `env` (an id or a built env) for its domain's rows, defaults for the rest."""
    return PivotScorer(env, **env_kwargs)


def verify_app(scorer: PivotScorer | None = None) -> Any:
    """A FastAPI app answering NeMo Gym's resources-server endpoints with a pivot env's verifiers."""
    from fastapi import Body, FastAPI

    app = FastAPI(title="pivot-gym resources server")
    scorer = scorer or PivotScorer(DEFAULT_ENV)

    @app.post("/seed_session")
    def seed_session(body: dict = Body(default_factory=dict)) -> dict:  # noqa: B008 (FastAPI's API)
        return {}

    @app.post("/verify")
    def verify(body: dict = Body(...)) -> dict:  # noqa: B008 (FastAPI's API)
        return verify_payload(body, scorer)

    return app
