"""`tool_args` acceptor: same tool, schema-valid arguments, values compared type- and value-aware.

Ids and enums compare exactly, numbers by value (`50`, `50.0`, `5e1` agree; integral values
exactly, others within a tight relative tolerance), free text (several words, mostly letters) by
normalised similarity with the ids and numbers inside it compared exactly, lists as multisets,
objects key by key (key order never matters; a key left out equals its schema default). A string
never equals a number or a boolean unless the argument's schema declares both types (the tool
would then take either); without that declaration a `"50"` for `50` is a guess, and guesses are
rejected. The command of a shell tool (`exec_command`, `execute_bash`, ...) compares after
`loose_shell` (flag order, spacing; quoting and escapes only where they keep meaning), never by
similarity. Parallel calls are matched
as a multiset: a one-to-one pairing of expert and candidate calls must exist.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from rapidfuzz import fuzz

from pivot_core import SHELL_TOOLS, Message, Pivot, ToolCall, digit_tokens, loose_shell, normalize_text
from verifiers_plugins._memo import CACHE_SIZE, call_arguments
from verifiers_plugins._verdict import Verdict
from verifiers_plugins.builtin.json_schema import schema_errors
from verifiers_plugins.hookspecs import hookimpl

_ID_LIKE = re.compile(r"^[\w\-.:/@#+]*\d[\w\-.:/@#+]*$|^[A-Z0-9_\-]+$")


def _is_free_text(value: str, schema: Mapping[str, Any] | None) -> bool:
    """Prose (several words, mostly letters), not an id, enum, code or expression."""
    if schema and ("enum" in schema or "const" in schema or schema.get("format")):
        return False
    text = value.strip()
    if " " not in text or _ID_LIKE.match(text):
        return False
    visible = [c for c in text if not c.isspace()]
    return sum(c.isalpha() for c in visible) >= 0.5 * len(visible)


def _text_match(want: str, got: str, schema: Mapping[str, Any] | None, text_threshold: float) -> bool:
    if want.strip() == got.strip():
        return True
    if _is_free_text(want, schema):
        if digit_tokens(want) != digit_tokens(got):
            return False
        return fuzz.ratio(normalize_text(want), normalize_text(got)) / 100.0 >= text_threshold
    # Ids, codes and enum values are exact; a plain word may differ in case only.
    return want.strip().casefold() == got.strip().casefold() and not _ID_LIKE.match(want.strip())


SHELL_ARGS = ("command", "cmd", "keystrokes", "script")  # the arguments of a shell tool that hold its command
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _declares(schema: Mapping[str, Any] | None, *json_types: str) -> bool:
    """True when the argument's schema explicitly allows one of `json_types` (a `type` string or list)."""
    declared = schema.get("type") if isinstance(schema, Mapping) else None
    types = [declared] if isinstance(declared, str) else declared if isinstance(declared, list) else []
    return any(t in types for t in json_types)


def numbers_equal(want: float, got: float, rel_tol: float) -> bool:
    """Equal by value: integral values exactly (an id or an amount off by one differs), others within `rel_tol`."""
    if isinstance(want, int) and isinstance(got, int):
        return want == got  # exact, and no float conversion of a huge int
    try:
        a, b = float(want), float(got)
    except OverflowError:
        return False  # an int beyond any float cannot equal a float
    if not (math.isfinite(a) and math.isfinite(b)):
        return False
    if a.is_integer() and b.is_integer():
        return int(a) == int(b)
    return math.isclose(a, b, rel_tol=rel_tol, abs_tol=0.0)


def _number_text(text: str) -> float | None:
    """The value of a string that is exactly a JSON number literal (not `1_0`, `nan`, ` 5`), else None."""
    if not _JSON_NUMBER.fullmatch(text):
        return None
    try:
        return int(text) if text.lstrip("-").isdigit() and len(text) < 100 else float(text)
    except (ValueError, OverflowError):
        return None


def values_match(want: Any, got: Any, schema: Mapping[str, Any] | None, rel_tol: float, text_threshold: float) -> bool:
    """Type- and value-aware equality used by `tool_args`."""
    if isinstance(want, bool) or isinstance(got, bool):
        if isinstance(want, bool) and isinstance(got, bool):
            return want is got
        # "true" for true only where the schema takes both, so the tool would read either.
        text, flag = (got, want) if isinstance(got, str) else (want, got)
        return (
            isinstance(text, str)
            and isinstance(flag, bool)
            and _declares(schema, "string")
            and _declares(schema, "boolean")
            and text == str(flag).lower()
        )
    if _is_number(want) and _is_number(got):
        return numbers_equal(want, got, rel_tol)
    if _is_number(want) or _is_number(got):
        # A number written as a string (or the reverse) is the same value only where the schema
        # takes both types; otherwise the tool may reject or misread it.
        text, number = (got, want) if isinstance(got, str) else (want, got)
        if not (isinstance(text, str) and _declares(schema, "string") and _declares(schema, "number", "integer")):
            return False
        value = _number_text(text)
        return value is not None and numbers_equal(number, value, rel_tol)
    if isinstance(want, str):
        if not isinstance(got, str):
            return False
        return _text_match(want, got, schema, text_threshold)
    if isinstance(want, list):
        if not isinstance(got, list) or len(want) != len(got):
            return False
        item_schema = (schema or {}).get("items") if isinstance(schema, Mapping) else None
        return multiset_match(want, got, lambda w, g: values_match(w, g, item_schema, rel_tol, text_threshold))
    if isinstance(want, Mapping):
        return not object_diff(want, got, schema, rel_tol, text_threshold)
    return want == got


def multiset_match(want: list[Any], got: list[Any], same: Callable[[Any, Any], bool]) -> bool:
    """A perfect one-to-one matching between `want` and `got` under `same` (augmenting paths)."""
    if len(want) != len(got):
        return False
    owner: dict[int, int] = {}  # got index -> want index

    def assign(i: int, seen: set[int]) -> bool:
        for j, g in enumerate(got):
            if j in seen or not same(want[i], g):
                continue
            seen.add(j)
            if j not in owner or assign(owner[j], seen):
                owner[j] = i
                return True
        return False

    return all(assign(i, set()) for i in range(len(want)))


def object_diff(
    want: Any, got: Any, schema: Mapping[str, Any] | None, rel_tol: float, text_threshold: float
) -> list[str]:
    """Keys whose values differ (missing and extra keys included)."""
    if not isinstance(got, Mapping):
        return ["<not an object>"]
    props = (schema or {}).get("properties", {}) if isinstance(schema, Mapping) else {}
    props = props if isinstance(props, Mapping) else {}

    def default(k: str) -> Any:
        spec = props.get(k)
        return spec.get("default", None) if isinstance(spec, Mapping) else None

    # A key left out counts as its schema default (or empty), so spelling a default out is no difference.
    diffs = [k for k in want if k not in got and want[k] not in (None, "", [], {}, default(k))]
    diffs += [k for k in got if k not in want and got[k] not in (None, "", [], {}, default(k))]
    for k in want:
        if k in got and not values_match(want[k], got[k], props.get(k), rel_tol, text_threshold):
            diffs.append(k)
    return diffs


@functools.lru_cache(maxsize=CACHE_SIZE)
def _shell_arguments(call: ToolCall) -> dict[str, str]:
    """The command arguments of a shell tool's call, normalised (`loose_shell`); once per expert call."""
    args = call_arguments(call)
    if call.name not in SHELL_TOOLS or not isinstance(args, dict):
        return {}
    return {k: loose_shell(args[k]) for k in SHELL_ARGS if isinstance(args.get(k), str)}


_NO_EXPERT_CALL = Verdict.skip("expert turn calls no tool")
_NO_CALL = Verdict.reject("expected a tool call, got none")


class ToolArgs:
    """Accepts when every expert call has a matching candidate call (name + arguments), one to one.

    Args:
        rel_tol: relative tolerance for non-integral numbers (rounding noise such as `0.1 + 0.2`);
            tight, so that two different amounts never agree. Integral values compare exactly.
        text_threshold: similarity (0-1) at which free-text arguments match.
    """

    role = "acceptor"
    cost = "cheap"
    deterministic = True
    # 5: shell commands compared with quoting and escapes kept (`\\>` is no redirect); 6: blanks around
    # control operators made one (`a;b` is `a ; b`)
    version = "6"

    def __init__(self, rel_tol: float = 1e-9, text_threshold: float = 0.8) -> None:
        self.rel_tol = rel_tol
        self.text_threshold = text_threshold

    def verify(self, pivot: Pivot, action: Message) -> Verdict:
        """Match expert calls to candidate calls as a multiset."""
        want = list(pivot.expert.tool_calls)
        if not want:
            return _NO_EXPERT_CALL
        got = list(action.tool_calls)
        if not got:
            return _NO_CALL
        if len(got) != len(want):
            return Verdict.reject(
                f"expected {len(want)} tool call(s), got {len(got)}", expected=len(want), got=len(got)
            )
        problems = {(i, j): self._compare(pivot, w, g) for i, w in enumerate(want) for j, g in enumerate(got)}
        if multiset_match(list(range(len(want))), list(range(len(got))), lambda i, j: problems[i, j] is None):
            return Verdict.accept(f"{len(want)} call(s) match by name and arguments")
        for i, call in enumerate(want):
            if all(problems[i, j] is not None for j in range(len(got))):
                same = [problems[i, j] for j, g in enumerate(got) if g.name == call.name]
                return Verdict.reject(same[0] if same else f"no call to {call.name!r}", expected_tool=call.name)
        return Verdict.reject("the calls cannot be paired one to one with the expert's", expected=len(want))

    def _compare(self, pivot: Pivot, want: ToolCall, got: ToolCall) -> str | None:
        if want.name != got.name:
            return f"expected tool {want.name!r}, got {got.name!r}"
        got_args = call_arguments(got)
        if not isinstance(got_args, dict):
            return f"{got.name}: arguments are not a JSON object"
        schema = pivot.tool_schemas.get(want.name)
        errors = schema_errors(got_args, schema) if schema else []
        if errors:
            return f"{got.name}: arguments invalid {errors[0]}"
        want_args = call_arguments(want)
        if not isinstance(want_args, dict):
            return None if want.arguments.strip() == got.arguments.strip() else f"{got.name}: arguments differ"
        expert_shell = _shell_arguments(want)
        shell = list(expert_shell)
        # A shell command is no prose: `<expert command> && rm -rf ~` is 90 % alike and does something else.
        diffs = [
            k for k in shell if not isinstance(got_args.get(k), str) or expert_shell[k] != loose_shell(got_args[k])
        ]
        rest_want = {k: v for k, v in want_args.items() if k not in shell}
        rest_got = {k: v for k, v in got_args.items() if k not in shell}
        diffs += object_diff(rest_want, rest_got, schema, self.rel_tol, self.text_threshold)
        return f"{got.name}: arguments differ at {sorted(diffs)}" if diffs else None


@hookimpl
def register_verifiers(register: Callable[..., None]) -> None:
    """Register `tool_args`."""
    register("tool_args", ToolArgs)
