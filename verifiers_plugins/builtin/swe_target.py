"""`swe_target` and `swe_target_continuous`: the paper's category check plus the action's target.

`swe_target` accepts when `tool_name` accepts (same category, same number of actions) AND each
action hits the expert's target: the same file path or a path suffix (a search scope may be
inside the expert's), an overlapping line range for reads, the same function/class for edits
(see `_targets`). `swe_target_continuous` scores 0.5 for the category and 0.5 for the target
(accepted only with both), for runs that want a graded reward. An action whose category and target
match but which also runs a state-changing command the expert's does not (`<expert>; rm -rf ~`), or
writes through a read (`grep x src > src.py`, `find -delete`, `$(git stash)`, see `_effects`), misses
the target. A submission is judged by what it submits, a test run by the tests it runs (`_targets`,
`_runs`).
"""

from __future__ import annotations

from collections.abc import Callable

from pivot_core import Message, Pivot
from verifiers_plugins._verdict import Verdict
from verifiers_plugins.builtin._targets import extra_effects, target_problem, targets_of
from verifiers_plugins.builtin.tool_name import ToolName
from verifiers_plugins.hookspecs import hookimpl


class SweTarget:
    """Category (as `tool_name`) and target must both match; reward 1 or 0."""

    role = "acceptor"
    cost = "cheap"
    deterministic = True
    # 3: tool_name (its category check) rejects state-changing riders; 4: writes hidden in reads (redirects,
    # substitutions, find actions, sed w), the submission itself, and test runs that run nothing; 5: a command
    # backgrounded with `&` is a command of its own; 6: a written Python file must compile where the expert's does;
    # 7: substitutions in an unquoted heredoc's body are the command's; 8: a test run cut under a minute
    version = "9"
    continuous = False

    def __init__(self) -> None:
        self.category = ToolName()

    def verify(self, pivot: Pivot, action: Message) -> Verdict:
        """Category first (tool_name), then the target of each paired action."""
        cat = self.category.verify(pivot, action)
        if not cat.applicable or not cat.details:  # no action, or the wrong number of actions
            return cat
        problem = self._target_problem(pivot, action)
        if cat.accepted and problem is None:
            # Same category and target, but an extra state-changing command rides along: the target is missed.
            problem = extra_effects(pivot.expert, action)
        details = {**dict(cat.details or {}), "category_match": cat.accepted, "target_match": problem is None}
        if cat.accepted and problem is None:
            return Verdict.accept(f"{cat.reason}; same target", **details)
        reward = 0.0
        if self.continuous:
            reward = 0.5 * cat.accepted + 0.5 * (problem is None)
        why = cat.reason if not cat.accepted else problem
        if not cat.accepted and problem is not None:
            why = f"{cat.reason}; {problem}"
        return Verdict.reject(str(why), reward=reward, **details)

    def _target_problem(self, pivot: Pivot, action: Message) -> str | None:
        want, got = targets_of(pivot.expert), targets_of(action)
        if not got:
            return "the completion takes no action"
        cats = self.category.expert_categories(pivot.expert)
        for i, w in enumerate(want[: len(got)]):
            problem = target_problem(w, got[i], cats[i] if i < len(cats) else "other")
            if problem:
                return problem
        return None


class SweTargetContinuous(SweTarget):
    """`swe_target` with a graded reward: 0.5 for the category plus 0.5 for the target."""

    continuous = True


@hookimpl
def register_verifiers(register: Callable[..., None]) -> None:
    """Register `swe_target` and `swe_target_continuous`."""
    register("swe_target", SweTarget)
    register("swe_target_continuous", SweTargetContinuous)
