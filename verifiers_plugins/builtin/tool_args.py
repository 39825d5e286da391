"""`tool_args` acceptor: same tool, schema-valid arguments, values compared type- and value-aware.

Ids and enums compare exactly, numbers with a relative tolerance, free text by normalised
similarity, lists as multisets, objects key by key (key order never matters). Parallel calls
are matched as a multiset: each expert call needs its own matching candidate call.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from rapidfuzz import fuzz

from pivot_envs._model import Message, Pivot, ToolCall
from verifiers_plugins._verdict import Verdict
from verifiers_plugins.builtin.json_schema import schema_errors
from verifiers_plugins.builtin.string_similarity import normalize_text
from verifiers_plugins.hookspecs import hookimpl

_ID_LIKE = re.compile(r"^[\w\-.:/@#+]*\d[\w\-.:/@#+]*$|^[A-Z0-9_\-]+$")


def _is_free_text(value: str, schema: Mapping[str, Any] | None) -> bool:
    if schema and ("enum" in schema or "const" in schema or schema.get("format")):
        return False
    return " " in value.strip() and not _ID_LIKE.match(value.strip())


def values_match(want: Any, got: Any, schema: Mapping[str, Any] | None, rel_tol: float, text_threshold: float) -> bool:
    """Type- and value-aware equality used by `tool_args`."""
    if isinstance(want, bool) or isinstance(got, bool):
        return want is got or (isinstance(got, str) and got.lower() == str(want).lower())
    if isinstance(want, (int, float)) and not isinstance(want, bool):
        try:
            g = float(got)
        except (TypeError, ValueError):
            return False
        return math.isclose(float(want), g, rel_tol=rel_tol, abs_tol=1e-9)
    if isinstance(want, str):
        if not isinstance(got, str):
            return isinstance(got, (int, float)) and values_match(got, want, schema, rel_tol, text_threshold)
        if want.strip() == got.strip():
            return True
        if _is_free_text(want, schema):
            return fuzz.ratio(normalize_text(want), normalize_text(got)) / 100.0 >= text_threshold
        return want.strip().casefold() == got.strip().casefold() and not _ID_LIKE.match(want.strip())
    if isinstance(want, list):
        if not isinstance(got, list) or len(want) != len(got):
            return False
        item_schema = (schema or {}).get("items") if isinstance(schema, Mapping) else None
        remaining = list(got)
        for w in want:
            for i, g in enumerate(remaining):
                if values_match(w, g, item_schema, rel_tol, text_threshold):
                    del remaining[i]
                    break
            else:
                return False
        return True
    if isinstance(want, Mapping):
        return not object_diff(want, got, schema, rel_tol, text_threshold)
    return want == got


def object_diff(
    want: Any, got: Any, schema: Mapping[str, Any] | None, rel_tol: float, text_threshold: float
) -> list[str]:
    """Keys whose values differ (missing and extra keys included)."""
    if not isinstance(got, Mapping):
        return ["<not an object>"]
    props = (schema or {}).get("properties", {}) if isinstance(schema, Mapping) else {}
    diffs = [k for k in want if k not in got]
    diffs += [k for k in got if k not in want and got[k] not in (None, "", [], {})]
    for k in want:
        if k in got and not values_match(want[k], got[k], props.get(k), rel_tol, text_threshold):
            diffs.append(k)
    return diffs


class ToolArgs:
    """Accepts when every expert call has a matching candidate call (name + arguments), one to one.

    Args:
        rel_tol: relative tolerance for numbers.
        text_threshold: similarity (0-1) at which free-text arguments match.
    """

    role = "acceptor"
    cost = "cheap"
    deterministic = True
    version = "1"

    def __init__(self, rel_tol: float = 1e-6, text_threshold: float = 0.8) -> None:
        self.rel_tol = rel_tol
        self.text_threshold = text_threshold

    def verify(self, pivot: Pivot, action: Message) -> Verdict:
        """Match expert calls to candidate calls as a multiset."""
        want = list(pivot.expert.tool_calls)
        if not want:
            return Verdict.skip("expert turn calls no tool")
        got = list(action.tool_calls)
        if not got:
            return Verdict.reject("expected a tool call, got none")
        if len(got) != len(want):
            return Verdict.reject(
                f"expected {len(want)} tool call(s), got {len(got)}", expected=len(want), got=len(got)
            )
        unmatched = list(got)
        for call in want:
            best, why = None, f"no call to {call.name!r}"
            for cand in unmatched:
                problem = self._compare(pivot, call, cand)
                if problem is None:
                    best = cand
                    break
                if cand.name == call.name:
                    why = problem
            if best is None:
                return Verdict.reject(why, expected_tool=call.name)
            unmatched.remove(best)
        return Verdict.accept(f"{len(want)} call(s) match by name and arguments")

    def _compare(self, pivot: Pivot, want: ToolCall, got: ToolCall) -> str | None:
        if want.name != got.name:
            return f"expected tool {want.name!r}, got {got.name!r}"
        got_args = got.parsed_arguments()
        if not isinstance(got_args, dict):
            return f"{got.name}: arguments are not a JSON object"
        schema = pivot.tool_schema(want.name)
        errors = schema_errors(got_args, schema) if schema else []
        if errors:
            return f"{got.name}: arguments invalid {errors[0]}"
        want_args = want.parsed_arguments()
        if not isinstance(want_args, dict):
            return None if want.arguments.strip() == got.arguments.strip() else f"{got.name}: arguments differ"
        diffs = object_diff(want_args, got_args, schema, self.rel_tol, self.text_threshold)
        return f"{got.name}: arguments differ at {sorted(diffs)}" if diffs else None


@hookimpl
def register_verifiers(register: Callable[..., None]) -> None:
    """Register `tool_args`."""
    register("tool_args", ToolArgs)
