"""`answer_match` acceptor: HotpotQA-normalised exact match, or token F1 at least `threshold`."""

from __future__ import annotations

from collections.abc import Callable

from pivot_core import Message, Pivot
from pivot_core.browse import exact_match, token_f1
from verifiers_plugins._memo import call_arguments
from verifiers_plugins._verdict import Verdict
from verifiers_plugins.hookspecs import hookimpl


def _answer_arg(message: Message) -> str | None:
    if len(message.tool_calls) != 1 or message.tool_calls[0].name != "answer":
        return None
    args = call_arguments(message.tool_calls[0])
    value = args.get("answer") if isinstance(args, dict) else None
    return value if isinstance(value, str) else None


def _references(pivot: Pivot) -> tuple[str | None, str, tuple[str, ...]]:
    """(the expert's answer or None, "gold" or "expert", the answers a candidate is compared with)."""
    expert = _answer_arg(pivot.expert)
    golds = [
        g
        for g in [pivot.context.get("gold_answer"), *(pivot.context.get("gold_answers") or ())]
        if isinstance(g, str) and g.strip()
    ]
    reference = "gold" if golds else "expert"
    return expert, reference, tuple(golds or ([expert] if expert is not None else []))


_NOT_AN_ANSWER = Verdict.skip("expert turn is not an answer call")
_NO_ANSWER = Verdict.reject("expected an answer call with a string 'answer'")


class AnswerMatch:
    """Scores an `answer` call against the gold answer(s) in `context["gold_answer"]`/`["gold_answers"]`.

    Pivots without a gold answer are compared with the expert's own answer (FireAct and the ReAct
    prompts keep only correct episodes, so there the expert's answer is the reference).

    Args:
        threshold: token F1 at or above which a non-exact answer is accepted.
    """

    role = "acceptor"
    cost = "cheap"
    deterministic = True
    version = "1"

    def __init__(self, threshold: float = 0.8) -> None:
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"answer_match: expected threshold in (0, 1], got {threshold!r}")
        self.threshold = threshold

    def verify(self, pivot: Pivot, action: Message) -> Verdict:
        """Exact match first, then the best F1 over the references."""
        expert, reference, golds = _references(pivot)
        if expert is None:
            return _NOT_AN_ANSWER
        got = _answer_arg(action)
        if got is None:
            return _NO_ANSWER
        if any(exact_match(got, g) for g in golds):
            return Verdict.accept("normalised exact match", reference=reference)
        f1 = max(token_f1(got, g) for g in golds)
        details = {"f1": round(f1, 4), "threshold": self.threshold, "reference": reference}
        if f1 >= self.threshold:
            return Verdict.accept(f"token F1 {f1:.2f} >= {self.threshold}", **details)
        return Verdict.reject(f"token F1 {f1:.2f} < {self.threshold}", **details)


@hookimpl
def register_verifiers(register: Callable[..., None]) -> None:
    """Register `answer_match`."""
    register("answer_match", AnswerMatch)
