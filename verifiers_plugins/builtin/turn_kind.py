"""`turn_kind` gate: a tool call answers a tool-call turn, text answers a text turn."""

from __future__ import annotations

from collections.abc import Callable

from pivot_core import Message, Pivot
from verifiers_plugins._verdict import Verdict
from verifiers_plugins.hookspecs import hookimpl


class TurnKindGate:
    """Rejects a text reply where the expert called a tool, and a tool call where it replied in text."""

    role = "gate"
    cost = "cheap"
    deterministic = True
    version = "1"

    def verify(self, pivot: Pivot, action: Message) -> Verdict:
        """Compare whether expert and candidate call tools."""
        want = "tool_call" if pivot.expert.tool_calls else "text"
        got = "tool_call" if action.tool_calls else "text"
        if want != got:
            return _MISMATCH[want]
        if got == "text" and not action.text.strip():
            return _EMPTY
        return _AS_EXPECTED[got]


_KINDS = ("tool_call", "text")
_MISMATCH = {
    want: Verdict.reject(f"expected a {want} turn, got a {got} turn", expected=want, got=got)
    for want, got in (_KINDS, _KINDS[::-1])
}
_EMPTY = Verdict.reject("expected a non-empty reply, got an empty completion")
_AS_EXPECTED = {kind: Verdict.accept(f"{kind} turn as expected") for kind in _KINDS}


@hookimpl
def register_verifiers(register: Callable[..., None]) -> None:
    """Register `turn_kind`."""
    register("turn_kind", TurnKindGate)
