"""`browse_tool` gate: one call, of the same kind as the expert's (retrieve, find or answer).

`search` and `open` are one kind: both bring a document into view, and `retrieval_match` decides
whether it is the right one. The generic `tool_name` verifier is an acceptor (a matching name
alone would accept a search for anything), so browse gates on the kind and lets
`retrieval_match`/`answer_match` accept.
"""

from __future__ import annotations

from collections.abc import Callable

from pivot_core import Message, Pivot
from verifiers_plugins._verdict import Verdict
from verifiers_plugins.hookspecs import hookimpl

TOOL_KINDS: dict[str, str] = {"search": "retrieve", "open": "retrieve", "find": "find", "answer": "answer"}


def tool_kind(name: str) -> str:
    """The kind of a browse tool (other tools are their own kind)."""
    return TOOL_KINDS.get(name, name)


_NO_EXPERT_CALL = Verdict.skip("expert turn calls no tool")


class BrowseToolGate:
    """Rejects several calls in one turn, unknown tools, and a call of another kind than the expert's."""

    role = "gate"
    cost = "cheap"
    deterministic = True
    version = "1"

    def verify(self, pivot: Pivot, action: Message) -> Verdict:
        """Compare the kind of the candidate's single call with the expert's."""
        if not pivot.expert.tool_calls:
            return _NO_EXPERT_CALL
        if len(action.tool_calls) != 1:
            return Verdict.reject(f"expected exactly one tool call, got {len(action.tool_calls)}")
        want, got = pivot.expert.tool_calls[0].name, action.tool_calls[0].name
        names = pivot.tool_schemas
        if names and got not in names:
            return Verdict.reject(f"unknown tool {got!r}; expected one of {sorted(pivot.tool_names)}")
        if want in TOOL_KINDS and got in TOOL_KINDS:  # the browse tools: one constant verdict per pair
            return _BROWSE_PAIRS[want, got]
        return kind_verdict(want, got)


def kind_verdict(want: str, got: str) -> Verdict:
    """The verdict on a call to `got` where the expert called `want` (their kinds decide)."""
    details = {"expected_tool": want, "got_tool": got, "expected_kind": tool_kind(want), "got_kind": tool_kind(got)}
    if tool_kind(want) != tool_kind(got):
        return Verdict.reject(f"expected a {tool_kind(want)} call ({want}), got {got}", **details)
    return Verdict.accept(f"{got} is a {tool_kind(got)} call like the expert's {want}", **details)


_BROWSE_PAIRS = {(w, g): kind_verdict(w, g) for w in TOOL_KINDS for g in TOOL_KINDS}


@hookimpl
def register_verifiers(register: Callable[..., None]) -> None:
    """Register `browse_tool`."""
    register("browse_tool", BrowseToolGate)
