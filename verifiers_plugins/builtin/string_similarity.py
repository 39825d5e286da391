"""`string_similarity` acceptor: normalised similarity of text turns, shell commands and Terminus keystrokes."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

from rapidfuzz import fuzz

from pivot_envs._actions import action_text
from pivot_envs._model import Message, Pivot
from verifiers_plugins._verdict import Verdict
from verifiers_plugins.hookspecs import hookimpl


def normalize_text(text: str) -> str:
    """NFKC, case-folded, punctuation-light, whitespace-collapsed."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = re.sub(r"[\"'`]", "", text)
    return " ".join(text.split())


class StringSimilarity:
    """Accepts when the normalised similarity (rapidfuzz ratio, 0-1) reaches `threshold`.

    Args:
        threshold: acceptance threshold in [0, 1].
    """

    role = "acceptor"
    cost = "cheap"
    deterministic = True
    version = "1"

    def __init__(self, threshold: float = 0.85) -> None:
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"string_similarity: expected threshold in [0, 1], got {threshold!r}")
        self.threshold = threshold

    def verify(self, pivot: Pivot, action: Message) -> Verdict:
        """Compare the comparable text of expert and candidate."""
        if pivot.expert.is_tool_call:
            return Verdict.skip("expert called a tool: compared by tool_args")
        want, got = normalize_text(action_text(pivot.expert)), normalize_text(action_text(action))
        if not got:
            return Verdict.reject("empty completion")
        if not want:
            return Verdict.reject("expert turn has no comparable text")
        score = fuzz.ratio(want, got) / 100.0
        details = {"similarity": round(score, 4), "threshold": self.threshold}
        if score >= self.threshold:
            return Verdict.accept(f"similarity {score:.2f} >= {self.threshold}", **details)
        return Verdict.reject(f"similarity {score:.2f} < {self.threshold}", **details)


@hookimpl
def register_verifiers(register: Callable[..., None]) -> None:
    """Register `string_similarity`."""
    register("string_similarity", StringSimilarity)
