"""`exact_match`: the strict reward of the paper's ablation (the demonstrated action, normalised).

Tool-call turns: the same multiset of (tool name, canonical arguments); arguments are compared
as canonical JSON (key order ignored, `12.50` == `12.5` == `1.25e1`, integral floats == ints).
Turns that run commands (fenced bash blocks, Terminus keystrokes): the same commands after
`normalize_shell`, which keeps meaning (blank runs, literal quote style; never escapes, heredoc
indentation or flag order); a Terminus turn by what its terminal runs (Enter included) and
leaves typed. Text turns: the same text after
`normalize_text` (NFKC, case, quotes, whitespace). Free text around an action (a THOUGHT, an
analysis) is not part of the action and is ignored.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from pivot_core import Message, Pivot, normalized_action
from verifiers_plugins._verdict import Verdict
from verifiers_plugins.hookspecs import hookimpl


class ExactMatch:
    """Accepts only the expert's own action (after normalisation): the strict-reward ablation."""

    role = "acceptor"
    cost = "cheap"
    deterministic = True
    # 2: commands compared by a normalisation that keeps meaning; keystrokes by what runs; 3: blanks
    # around control operators made one
    version = "3"

    def verify(self, pivot: Pivot, action: Message) -> Verdict:
        """Compare normalised actions."""
        want, got = normalized_action(pivot.expert), normalized_action(action)
        if want[0] == "text" and not want[1][0]:
            return Verdict.skip("expert turn is empty")
        if got[0] == "text" and not got[1][0]:
            return Verdict.reject("empty completion")
        if want[0] != got[0]:
            return Verdict.reject(f"expected {want[0]}, got {got[0]}")
        if Counter(want[1]) == Counter(got[1]):
            return Verdict.accept("the demonstrated action")
        return Verdict.reject(
            f"differs from the demonstrated {want[0]}", expected=list(want[1])[:3], got=list(got[1])[:3]
        )


@hookimpl
def register_verifiers(register: Callable[..., None]) -> None:
    """Register `exact_match`."""
    register("exact_match", ExactMatch)
