"""Per-turn replay facts for browse trajectories, and their lifting into pivot contexts.

`annotate` replays a trajectory's tool calls on the local backend and records, for each
assistant turn, what `retrieval_match` needs: the document the expert's action led to
(`target_doc_id`), the open document (`open_doc_id`), the documents opened before
(`opened_doc_ids`) and whether the turn can be replayed on this corpus (`replayable`). The facts
sit in the trajectory's `context["turns"]` (keyed by message index) and `browse_pivots` moves
each turn's facts into its pivot's context.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

from pivot_core._model import Message, Pivot, Trajectory
from pivot_core._pivots import extract_pivots
from pivot_core.browse._backend import SearchBackend
from pivot_core.browse._session import BrowseSession, call_k, resolve


def _call(message: Message) -> tuple[str, dict[str, Any]] | None:
    if not message.tool_calls:
        return None
    args = message.tool_calls[0].parsed_arguments()
    return message.tool_calls[0].name, args if isinstance(args, dict) else {}


def _next_open(messages: tuple[Message, ...], start: int, backend: SearchBackend) -> str | None:
    """Doc id of the first later `open` call that resolves, before any other search."""
    for m in messages[start + 1 :]:
        call = _call(m) if m.role == "assistant" else None
        if call is None:
            continue
        if call[0] == "open":
            doc = resolve(backend, str(call[1].get("title", "")))
            return doc.doc_id if doc else None
        if call[0] == "search":
            return None
    return None


def _turn_facts(i: int, traj: Trajectory, session: BrowseSession, gold_answer: Any) -> dict[str, Any]:
    name, args = _call(traj.messages[i]) or ("", {})
    facts: dict[str, Any] = {
        "tool": name,
        "opened_doc_ids": list(session.opened),
        "open_doc_id": session.open_doc.doc_id if session.open_doc else None,
        "target_doc_id": None,
        "replayable": False,
    }
    if name == "search":
        hits = session.search(str(args.get("query", "")), call_k(args))[1]
        target = _next_open(traj.messages, i, session.backend)
        if target is not None and target in {h.doc_id for h in hits}:
            facts.update(target_doc_id=target, replayable=True)
    elif name == "open":
        doc = resolve(session.backend, str(args.get("title", "")))
        facts.update(target_doc_id=doc.doc_id if doc else None, replayable=doc is not None)
        session.open(str(args.get("title", "")))
    elif name == "find":
        facts.update(target_doc_id=facts["open_doc_id"], replayable=session.open_doc is not None)
        session.find(str(args.get("keyword", "")))
    elif name == "answer":
        facts["replayable"] = isinstance(gold_answer, str) and bool(gold_answer.strip())
    return facts


def annotate(trajectory: Trajectory, backend: SearchBackend, corpus: str) -> Trajectory:
    """Replay the tool calls on `backend`; returns the trajectory with `context["turns"]` filled.

    Args:
        trajectory: a browse trajectory with search/open/find/answer calls.
        backend: the local search backend.
        corpus: how pivots name the corpus (a path or `"bundled:<file>"`).
    """
    session = BrowseSession(backend)
    gold = trajectory.context.get("gold_answer")
    turns = {
        str(i): _turn_facts(i, trajectory, session, gold)
        for i, m in enumerate(trajectory.messages)
        if m.role == "assistant"
    }
    context = {**trajectory.context, "corpus": corpus, "corpus_sha256": backend.digest, "turns": turns}
    return dataclasses.replace(trajectory, context=context)


def lift_turn(pivot: Pivot) -> Pivot:
    """Move the pivot's own turn facts from `context["turns"]` into its context."""
    ctx = dict(pivot.context)
    turns: Mapping[str, Any] = ctx.pop("turns", None) or {}
    ctx.update(turns.get(str(ctx.get("turn_index")), {}))
    ctx.setdefault("replayable", False)
    return dataclasses.replace(pivot, context=ctx)


def browse_pivots(trajectory: Trajectory, successful_only: bool = False) -> Iterator[Pivot]:
    """Candidate pivots of a browse trajectory, each carrying its own turn facts."""
    for pivot in extract_pivots(trajectory, successful_only=successful_only):
        yield lift_turn(pivot)
