"""`tool_name` acceptor: the paper's SWE verifier (the action's category must match the expert's).

Categories (search, read, edit, run, plan, finish, other) come from `_categories`: tool names for
tool-call agents, the command verb for bash-only agents. The candidate must also take as many
actions as the expert (one fenced command where the expert ran one; the same number of tool
calls), so spraying several actions to hit the right category is not rewarded. Two actions that
both fall in "other" match only when they call the same tool with the same argument keys.

This module also registers the built-in alias table through `register_categories`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from pivot_core import Message, Pivot, message_commands
from verifiers_plugins._memo import CACHE_SIZE, call_arguments
from verifiers_plugins._verdict import Verdict
from verifiers_plugins.builtin._categories import (
    TOOL_ALIASES,
    action_categories,
    action_count,
    category_table,
    command_verb,
)
from verifiers_plugins.builtin._effects import rider_problem
from verifiers_plugins.hookspecs import hookimpl


def _same_other_call(pivot: Pivot, action: Message) -> bool:
    """Both turns run the same uncategorised program, or call the same tools with the expert's argument keys."""
    want, got = pivot.expert.tool_calls, action.tool_calls
    if not want and not got:
        a, b = message_commands(pivot.expert), message_commands(action)
        return len(a) == len(b) and all(
            command_verb(x) and command_verb(x) == command_verb(y) for x, y in zip(a, b, strict=True)
        )
    if not want or len(want) != len(got):
        return False
    for w, g in zip(want, got, strict=True):
        wa, ga = call_arguments(w), call_arguments(g)
        if w.name != g.name or not isinstance(ga, dict) or not isinstance(wa, dict):
            return False
        if any(ga.get(k) in (None, "", [], {}) for k in wa):
            return False
    return True


def _missing_arguments(pivot: Pivot, action: Message) -> str | None:
    """A call to the expert's own tool must fill every argument the expert filled (no schema needed)."""
    for w, g in zip(pivot.expert.tool_calls, action.tool_calls, strict=False):
        wa, ga = call_arguments(w), call_arguments(g)
        if w.name != g.name or not isinstance(wa, dict):
            continue
        if not isinstance(ga, dict):
            return f"{g.name}: arguments are not a JSON object"
        empty = [k for k in wa if wa[k] not in (None, "", [], {}) and ga.get(k) in (None, "", [], {})]
        if empty:
            return f"{g.name}: missing arguments {empty}"
    return None


class ToolName:
    """Accepts when the candidate's actions fall in the expert's categories (as a multiset).

    Args:
        by_category: compare categories (the paper's verifier); False compares exact tool names.
    """

    role = "acceptor"
    cost = "cheap"
    deterministic = True
    # 3: a state-changing command riding along after the expert's is rejected; 4: the rider's hidden writes;
    # 5: a rider backgrounded with `&`
    version = "5"
    # Category-only by design (the paper's verifier): the right tool with type-valid junk arguments
    # is in the right category. `swe_target` is the verifier that checks what an action aims at.
    audit_exempt = {
        "tool_junk_args": "category-only verifier (the paper's): arguments are not compared; "
        "use swe_target to check targets",
        "newline_name": "category-only verifier (the paper's): a command's operands (the file it writes) are not "
        "compared; use swe_target or the sandbox to check them",
        **dict.fromkeys(
            ("hidden_write", "hidden_substitution", "escaped_redirect"),
            "category-only verifier (the paper's): what a command writes besides its category is not compared; "
            "use swe_target or the sandbox to check it",
        ),
    }

    def __init__(self, by_category: bool = True) -> None:
        self.by_category = by_category
        self.table = category_table()
        # The expert's categories, once per expert message (this instance's table decides them).
        self.expert_categories = functools.lru_cache(maxsize=CACHE_SIZE)(self._categories)

    def _categories(self, message: Message) -> tuple[str, ...]:
        return tuple(action_categories(message, self.table))

    def verify(self, pivot: Pivot, action: Message) -> Verdict:
        """Compare action counts, then categories (or names)."""
        want = list(self.expert_categories(pivot.expert))
        if not want:
            return Verdict.skip("expert turn takes no action: nothing to categorise")
        terminus = pivot.context.get("format") == "terminus" and not pivot.expert.tool_calls
        if not terminus and action_count(action) not in (0, len(want)):  # cheap check before parsing
            return Verdict.reject(f"expected {len(want)} action(s), got {action_count(action)}")
        missing = _missing_arguments(pivot, action) if self.by_category else None  # name mode: names only
        if missing:
            return Verdict.reject(missing)
        got = action_categories(action, self.table)
        details = {
            "expected_category": want[0],
            "got_category": got[0] if got else "none",
            "expected_tool": [c.name for c in pivot.expert.tool_calls][:1],
            "got_tool": [c.name for c in action.tool_calls][:1],
        }
        if not got:
            return Verdict.reject("the completion takes no action", **details)
        if terminus:  # a Terminus turn batches keystrokes: compare the first command's category
            want, got = want[:1], got[:1]
        if len(got) != len(want):
            return Verdict.reject(f"expected {len(want)} action(s), got {len(got)}", **details)
        if not self.by_category:
            names = sorted(c.name for c in action.tool_calls) == sorted(c.name for c in pivot.expert.tool_calls)
            return (
                Verdict.accept("same tool names", **details)
                if names and action.tool_calls
                else Verdict.reject("tool names differ", **details)
            )
        if "other" in want or "other" in got:
            if want == got and _same_other_call(pivot, action):
                return Verdict.accept(f"same uncategorised tool {details['got_tool']}", **details)
            return Verdict.reject(f"no category match ({want[0]} vs {got[0]})", **details)
        if sorted(want) == sorted(got):  # the same multiset of categories (sorting is cheaper than two Counters)
            rider = rider_problem(pivot.expert, action)
            if rider:
                return Verdict.reject(f"same category {got[0]!r}, but it {rider}", **details)
            return Verdict.accept(f"same category {got[0]!r}", **details)
        return Verdict.reject(f"expected category {want[0]!r}, got {got[0]!r}", **details)


@hookimpl
def register_verifiers(register: Callable[..., None]) -> None:
    """Register `tool_name`."""
    register("tool_name", ToolName)


@hookimpl
def register_categories(register: Callable[..., None]) -> None:
    """Register the built-in alias table (tool names and shell verbs -> category)."""
    for alias, category in TOOL_ALIASES.items():
        register(alias, category)
