"""`tool_name` acceptor: the paper's SWE verifier (same tool name, or same action category)."""

from __future__ import annotations

from collections.abc import Callable

from pivot_envs._model import Message, Pivot
from verifiers_plugins._verdict import Verdict
from verifiers_plugins.builtin._categories import message_category
from verifiers_plugins.hookspecs import hookimpl


class ToolName:
    """Accepts when the candidate calls the expert's tool, or (with `by_category`) one of its category.

    Args:
        by_category: compare categories (search/read/edit/run/plan/finish) instead of exact names.
    """

    role = "acceptor"
    cost = "cheap"
    deterministic = True
    version = "1"

    def __init__(self, by_category: bool = True) -> None:
        self.by_category = by_category

    def verify(self, pivot: Pivot, action: Message) -> Verdict:
        """Compare names, then categories."""
        want_names = [c.name for c in pivot.expert.tool_calls]
        got_names = [c.name for c in action.tool_calls]
        if want_names and got_names and want_names[0] == got_names[0] and not self.by_category:
            return Verdict.accept(f"same tool {got_names[0]!r}")
        want, got = message_category(pivot.expert), message_category(action)
        details = {"expected_category": want, "got_category": got, "expected_tool": want_names[:1],
                   "got_tool": got_names[:1]}
        if not self.by_category:
            return Verdict.reject(f"expected tool {want_names[:1]}, got {got_names[:1]}", **details)
        if want == "other" or got == "other":
            if want_names and got_names and want_names[0] == got_names[0]:
                return Verdict.accept(f"same tool {got_names[0]!r}", **details)
            return Verdict.reject(f"no category match ({want} vs {got})", **details)
        if want == got:
            return Verdict.accept(f"same category {got!r}", **details)
        return Verdict.reject(f"expected category {want!r}, got {got!r}", **details)


@hookimpl
def register_verifiers(register: Callable[..., None]) -> None:
    """Register `tool_name`."""
    register("tool_name", ToolName)
