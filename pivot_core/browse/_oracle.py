"""Oracle expert trajectories: one per HotpotQA question, from its gold documents and supporting facts.

The expert searches for the first gold document by title, opens it, finds the bridge fact (the
second document's title when the first mentions it, else a word of the supporting sentence),
searches for and opens the second document, and answers. Every observation comes from the local
engine, so each pivot's history matches what the candidate's own tool calls would return.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pivot_core._jsonl import iter_jsonl
from pivot_core._model import Message, ToolCall, Trajectory
from pivot_core.browse._annotate import annotate
from pivot_core.browse._backend import SearchBackend
from pivot_core.browse._corpus import Document
from pivot_core.browse._session import BrowseSession, find_sentences
from pivot_core.browse._tools import BROWSE_TOOLS, DEFAULT_K
from pivot_core.errors import DataFileError, InvalidTrajectory

PathLike = str | os.PathLike[str]

SYSTEM_PROMPT = (
    "Answer the question by browsing a document collection. Use `search` to find documents, `open` to "
    "read one, `find` to look for a keyword in the open document, and `answer` with a short final answer."
)
_WORD = re.compile(r"[^\W\d_]{4,}", re.UNICODE)


def hop_order(question: Mapping[str, Any], docs: Sequence[Document]) -> list[Document]:
    """Gold documents in visiting order: the one that mentions the other's title first (the bridge)."""
    if len(docs) == 2:
        a, b = docs
        a_names_b = b.title.casefold() in a.text.casefold()
        b_names_a = a.title.casefold() in b.text.casefold()
        if a_names_b != b_names_a:
            return [a, b] if a_names_b else [b, a]
    titles = [f.get("title") for f in question.get("supporting_facts") or ()]
    order = {t: i for i, t in reversed(list(enumerate(titles)))}
    return sorted(docs, key=lambda d: order.get(d.title, len(order)))


def bridge_keyword(question: Mapping[str, Any], first: Document, second: Document | None) -> str | None:
    """What the expert looks up in the first document (None when nothing there can be found)."""
    if second is not None and find_sentences(first, second.title):
        return second.title
    sent_ids = [f.get("sent_id") for f in question.get("supporting_facts") or () if f.get("title") == first.title]
    for sid in sent_ids:
        if isinstance(sid, int) and 0 <= sid < len(first.sentences):
            words = sorted(set(_WORD.findall(first.sentences[sid])), key=lambda w: (-len(w), w))
            for word in words:
                if find_sentences(first, word):
                    return word
    return None


class _Script:
    """Builds the chat while the session produces observations."""

    def __init__(self, backend: SearchBackend) -> None:
        self.session = BrowseSession(backend)
        self.messages: list[Message] = []

    def act(self, thought: str, name: str, args: dict[str, Any]) -> None:
        call = ToolCall(name, json.dumps(args, ensure_ascii=False), f"call_{len(self.messages) // 2 + 1}")
        self.messages.append(Message("assistant", thought, (call,)))
        self.messages.append(Message("tool", self.session.call(name, args), tool_call_id=call.id, name=name))

    def visit(self, doc: Document, why: str) -> None:
        self.act(f"{why} I will search for {doc.title}.", "search", {"query": doc.title, "k": DEFAULT_K})
        # Open by title unless another document has the same title (then by id, which is exact).
        same = self.session.backend.by_title(doc.title)
        target = doc.title if same is not None and same.doc_id == doc.doc_id else doc.doc_id
        self.act(f"The result {doc.title} looks relevant; I will open it.", "open", {"title": target})


def oracle_trajectory(question: Mapping[str, Any], backend: SearchBackend, corpus: str) -> Trajectory:
    """The expert trajectory for one question record of questions.jsonl (see SOURCES.md).

    Raises:
        InvalidTrajectory: a gold document id is missing from the corpus, or the record lacks a field.
    """
    qid = question.get("question_id")
    docs = []
    for doc_id in question.get("gold_doc_ids") or ():
        doc = backend.get(doc_id)
        if doc is None:
            raise InvalidTrajectory(f"question {qid!r}: gold document {doc_id!r} is not in the corpus")
        docs.append(doc)
    if not docs or not isinstance(question.get("question"), str) or not isinstance(question.get("answer"), str):
        raise InvalidTrajectory(f"question {qid!r}: expected 'question', 'answer' and 'gold_doc_ids'")
    hops = hop_order(question, docs)
    script = _Script(backend)
    script.visit(hops[0], "I need the first document this question depends on.")
    keyword = bridge_keyword(question, hops[0], hops[1] if len(hops) > 1 else None)
    if keyword is not None:
        script.act(f"I will look for {keyword!r} in this document.", "find", {"keyword": keyword})
    for doc in hops[1:]:
        script.visit(doc, "Now I need the next document.")
    script.act("I have the facts I need.", "answer", {"answer": question["answer"]})
    traj = Trajectory(
        id=f"browse-oracle/{qid}",
        domain="browse",
        messages=(Message("system", SYSTEM_PROMPT), Message("user", question["question"]), *script.messages),
        tools=BROWSE_TOOLS,
        reward=1.0,
        context={
            "source_format": "oracle",
            "question_id": qid,
            "question": question["question"],
            "gold_answer": question["answer"],
            "gold_doc_ids": [d.doc_id for d in docs],
            "question_type": question.get("type"),
        },
        source="hotpotqa-oracle",
    )
    return annotate(traj, backend, corpus)


def synthesize(questions: PathLike, backend: SearchBackend, corpus: str) -> Iterator[Trajectory]:
    """An oracle trajectory per line of a questions JSONL.

    Raises:
        DataFileError: a line is not valid JSON, or its question cannot be synthesized (names file and line).
    """
    for lineno, q in iter_jsonl(questions):
        try:
            yield oracle_trajectory(q, backend, corpus)
        except InvalidTrajectory as e:
            raise DataFileError(str(questions), lineno, str(e)) from e
