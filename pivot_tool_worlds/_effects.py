"""Effects of a turn's tool calls and their comparison (what `tool_exec` accepts on).

The effect of a turn is each call's output plus the state changes of all its calls together.
Two turns have the same effect when their calls pair up one to one (same tool, equal canonical
output, similar free-text notes) and the state changes are equal. Parallel calls are a set:
order never matters. Two outputs prove nothing about the calls when they are an empty result
of a read-only call ("no flights found") or the same error (a booking on another destination
fails "payment amount does not add up" just like the expert's): there the arguments must be
equal too (after canonical JSON, so key order still does not matter).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rapidfuzz import fuzz

from pivot_core import ToolCall, digit_tokens
from pivot_tool_worlds._state import WorldState
from pivot_tool_worlds._world import Outcome, ToolWorld, canonical_json, canonical_output, same_output

EMPTY_OUTPUTS = frozenset({"", "[]", "{}", "null", '""'})


@dataclass(frozen=True)
class Effect:
    """What a turn's calls did on a copy of the pivot state."""

    outcomes: tuple[Outcome, ...]
    changes: Mapping[str, Any]


def execute_turn(world: ToolWorld, state: WorldState, calls: Sequence[ToolCall]) -> Effect:
    """Run the calls in order on forks of `state` (never changed) and collect their effect."""
    outcomes = []
    current = state
    for call in calls:
        outcome, current = world.step(current, call.name, call.arguments)
        outcomes.append(outcome)
    return Effect(tuple(outcomes), current.changes_since(state) if current is not state else {})


def _is_empty(output: str) -> bool:
    return len(output) <= 8 and canonical_output(output) in EMPTY_OUTPUTS


def _canon(value: Any) -> str:
    return canonical_json(value)


def json_diff(want: Any, got: Any, path: str = "", limit: int = 5) -> list[str]:
    """Paths where two JSON values differ (at most `limit`), e.g. `flights[1].price`."""
    if isinstance(want, dict) and isinstance(got, dict):
        out: list[str] = []
        for k in list(want) + [k for k in got if k not in want]:
            if len(out) >= limit:
                break
            if k not in want or k not in got:
                out.append(f"{path}.{k}".lstrip("."))
            elif want[k] != got[k]:
                out.extend(json_diff(want[k], got[k], f"{path}.{k}", limit - len(out)))
        return out[:limit]
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        out = []
        for i, (w, g) in enumerate(zip(want, got, strict=True)):
            if w != g:
                out.extend(json_diff(w, g, f"{path}[{i}]", limit - len(out)))
            if len(out) >= limit:
                break
        return out[:limit]
    return [path.lstrip(".") or "<value>"]


def _output_diff(want: Outcome, got: Outcome) -> list[str]:
    try:
        return json_diff(json.loads(want.output), json.loads(got.output))
    except ValueError:
        return ["<text>"]


def compare_outcomes(world: ToolWorld, want: Outcome, got: Outcome, note_threshold: float) -> str | None:
    """Why `got` does not have `want`'s effect, or None when it does."""
    if want.name != got.name:
        return f"expected a call to {want.name!r}, got {got.name!r}"
    # Arguments equal by value (`50.0` for `50`) are the same call on the same state: an output that
    # differs only in how it prints a number it was given (`... with amount 50.0.`) is the same effect.
    same_call = _canon(want.arguments) == _canon(got.arguments)
    if not same_call and not same_output(want.output, got.output):
        return (
            f"{got.name}: output differs at {_output_diff(want, got)}: expected {want.output[:120]!r}, "
            f"got {got.output[:120]!r}"
        )
    tool = world.tools.get(want.name)
    empty = tool is not None and tool.read_only and not tool.note_args and _is_empty(want.output)
    if (empty or want.error) and not same_call:
        what = "the same error" if want.error else "an empty output"
        return f"{got.name}: {what}, but the arguments differ at {json_diff(want.arguments, got.arguments)}"
    for arg, text in want.notes.items():
        if digit_tokens(text) != digit_tokens(got.notes.get(arg, "")):
            # A hand-off naming another reservation (or a thought with another price) reads alike but is not alike.
            return f"{got.name}: {arg!r} names other ids or numbers than the expert's"
        score = fuzz.ratio(_norm(text), _norm(got.notes.get(arg, ""))) / 100.0
        if score < note_threshold:
            return f"{got.name}: {arg!r} differs (similarity {score:.2f} < {note_threshold})"
    return None


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


def compare_effects(world: ToolWorld, want: Effect, got: Effect, note_threshold: float) -> dict[str, Any] | None:
    """None when the effects match; else `{"reason": ..., details...}` naming what differed."""
    if len(want.outcomes) != len(got.outcomes):
        return {"reason": f"expected {len(want.outcomes)} tool call(s), got {len(got.outcomes)}"}
    unmatched = list(got.outcomes)
    for w in want.outcomes:
        problems = []
        for g in unmatched:
            problem = compare_outcomes(world, w, g, note_threshold)
            if problem is None:
                unmatched.remove(g)
                break
            problems.append((g.name != w.name, problem))
        else:
            # Report the closest candidate: one calling the same tool, if any.
            same_tool = [p for other, p in problems if not other]
            return {"reason": (same_tool or [p for _, p in problems])[0], "expected_call": w.name}
    # Dict equality ignores key order and is much cheaper than dumping both sides to canonical JSON
    # (it equates true with 1, but each changed record also appears verbatim in the output text).
    if want.changes != got.changes:
        return {
            "reason": f"state changes differ: {_changes_diff(want.changes, got.changes)}",
            "expected_changes": sorted(want.changes),
            "got_changes": sorted(got.changes),
        }
    return None


def _changes_diff(want: Mapping[str, Any], got: Mapping[str, Any]) -> str:
    parts = [f"{k} not changed" for k in sorted(set(want) - set(got))]
    parts += [f"{k} changed unexpectedly" for k in sorted(set(got) - set(want))]
    parts += [f"{k} differs at {json_diff(want[k], got[k])}" for k in sorted(set(want) & set(got)) if want[k] != got[k]]
    return "; ".join(parts[:5])
