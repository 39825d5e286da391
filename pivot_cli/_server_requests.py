"""The requests `pivot serve` takes: strict body models, how a body is read, what is sent back.

A body is decoded with `decode_json` (so a huge integer, deep nesting, NaN or a lone surrogate
is a 422, not a 500 from deep inside an endpoint) and validated strictly (a seed of "5" or true,
or a pivot id given as a list, is a 422 naming the field, not a coerced guess).
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pivot_cli.errors import BadRequest
from pivot_core import UnsafeJSON, decode_json


class _Body(BaseModel):
    # Strict: a seed of "5" or true, or a pivot id given as a list, is a 422, not a coerced guess.
    model_config = ConfigDict(strict=True, extra="forbid")


# Pivot ids are short; a longer one is no id, and would cost a did-you-mean search over megabytes.
MAX_ID_CHARS = 1024


class ResetOptions(BaseModel):
    """`options` of `reset`: `pivot_id` is read; other keys are ignored, as by a local env."""

    model_config = ConfigDict(strict=True, extra="ignore")
    pivot_id: str | None = Field(default=None, max_length=MAX_ID_CHARS)


class ResetRequest(_Body):
    """Body of `reset`."""

    seed: int | None = Field(default=None, ge=0, lt=2**64)
    options: ResetOptions | None = None


class StepRequest(_Body):
    """Body of `step`."""

    action: str


class VerifyBatchRequest(_Body):
    """Body of `verify-batch`."""

    pivot_id: str = Field(max_length=MAX_ID_CHARS)
    completions: list[str] = Field(min_length=1)


Body = TypeVar("Body", bound=BaseModel)


async def read_body(request: Request, model: type[Body]) -> Body:
    """The request's JSON body, decoded with `decode_json` and validated strictly against `model`."""
    raw = await request.body()
    try:
        payload = decode_json(raw.decode("utf-8")) if raw.strip() else {}
    except UnicodeDecodeError as e:
        raise BadRequest(400, f"request body is not UTF-8 (byte {e.start})") from e
    except UnsafeJSON as e:  # JSON, but holding what no endpoint takes (lone surrogate, huge int, ...)
        raise BadRequest(422, f"request body is unusable JSON: {e.msg}") from e
    except json.JSONDecodeError as e:
        raise BadRequest(400, f"request body is not usable JSON: {e.msg}") from e
    try:
        return model.model_validate(payload)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'body'}: {err['msg']}" for err in e.errors()[:5])
        raise BadRequest(422, f"expected {model.__name__}: {problems}") from e


def check_completions(completions: list[str], max_chars: int) -> None:
    """413 for a completion longer than the env's `max_completion_chars` (the action space's bound)."""
    for i, text in enumerate(completions):
        if len(text) > max_chars:
            raise BadRequest(413, f"completion {i} has {len(text)} characters, max_completion_chars is {max_chars}")


def client_of(request: Request) -> str:
    """Whose request this is: the token it carried (see `TokenAuth`), else the peer address."""
    named = getattr(request.state, "client", None)
    if named:
        return str(named)
    return request.client.host if request.client else "unknown"


def action_summary(action: dict[str, Any]) -> dict[str, Any]:
    """What `info["action"]` says over HTTP: the parsed shape, never the completion's text."""
    calls = action.get("tool_calls") or []
    out: dict[str, Any] = {
        "role": action.get("role"),
        "content_chars": len(action.get("content") or ""),
        "tool_calls": [
            {"name": c["function"]["name"][:200], "arguments_chars": len(c["function"]["arguments"])} for c in calls
        ],
    }
    parse_error = (action.get("extra") or {}).get("parse_error")
    if parse_error:
        out["parse_error"] = str(parse_error)[:500]
    return out


__all__ = [
    "BadRequest",
    "ResetOptions",
    "ResetRequest",
    "StepRequest",
    "VerifyBatchRequest",
    "action_summary",
    "check_completions",
    "client_of",
    "read_body",
]
