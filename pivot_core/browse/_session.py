"""`BrowseSession`: runs search/open/find/answer calls on a backend and renders observations.

The oracle uses it to produce observations, and `retrieval_match` uses the same `resolve` and
`find` rules, so what a candidate's call would have returned is what the pivot's history shows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pivot_core.browse._backend import SearchBackend, SearchHit
from pivot_core.browse._corpus import Document
from pivot_core.browse._tools import DEFAULT_K, MAX_K
from pivot_core.errors import QueryRejected, SearchTimeout

SIMILAR_TITLES = 5


def resolve(backend: SearchBackend, target: str) -> Document | None:
    """The document `open(target)` shows: by doc id, else by exact title (case-insensitive fallback)."""
    target = (target or "").strip()
    if not target:
        return None
    return backend.get(target) or backend.by_title(target)


def find_sentences(doc: Document, keyword: str) -> list[str]:
    """Sentences of `doc` containing `keyword` (case-insensitive), in order."""
    key = " ".join((keyword or "").split()).casefold()
    if not key:
        return []
    return [s for s in doc.sentences if key in " ".join(s.split()).casefold()]


def render_hits(query: str, hits: list[SearchHit]) -> str:
    """Search results as the observation text."""
    if not hits:
        return f"No results for [{query}]."
    return "\n".join(f"{i}. {h.title} (id: {h.doc_id})\n   {h.snippet}" for i, h in enumerate(hits, start=1))


def call_k(args: Mapping[str, Any]) -> int:
    """The `k` of a search call, clamped to [1, MAX_K] (DEFAULT_K when missing or not an integer)."""
    k = args.get("k", DEFAULT_K)
    if isinstance(k, bool) or not isinstance(k, int):
        return DEFAULT_K
    return max(1, min(MAX_K, k))


@dataclass
class BrowseSession:
    """The state of one browsing episode: the open document and the find cursor.

    Attributes:
        backend: the search backend.
        open_doc: the document opened last (None before any successful open).
        opened: doc ids opened so far, in order.
    """

    backend: SearchBackend
    open_doc: Document | None = None
    opened: list[str] = field(default_factory=list)
    _cursor: tuple[str, int] = ("", 0)

    def search(self, query: str, k: int = DEFAULT_K) -> tuple[str, list[SearchHit]]:
        """Run a search; returns the observation and the hits (none, and the reason, for a query refused or stopped)."""
        try:
            hits = self.backend.search(query, k)
        except (QueryRejected, SearchTimeout) as e:
            return f"Search failed: {e}.", []
        return render_hits(query, hits), hits

    def open(self, target: str) -> tuple[str, Document | None]:
        """Open by doc id or title; a miss lists similar titles (ReAct's Wikipedia behaviour)."""
        doc = resolve(self.backend, target)
        if doc is None:
            similar = [h.title for h in self.search(target, SIMILAR_TITLES)[1]]
            return f"Could not find [{target}]. Similar: {similar}", None
        self.open_doc = doc
        self.opened.append(doc.doc_id)
        self._cursor = ("", 0)
        return doc.text, doc

    def find(self, keyword: str) -> str:
        """The next sentence of the open document containing `keyword`, as `(Result i / n) ...`."""
        if self.open_doc is None:
            return "No document is open: open one first."
        hits = find_sentences(self.open_doc, keyword)
        if not hits:
            return f"No results for [{keyword}] in {self.open_doc.title}."
        key = keyword.casefold()
        i = self._cursor[1] if self._cursor[0] == key else 0
        if i >= len(hits):
            return "No more results."
        self._cursor = (key, i + 1)
        return f"(Result {i + 1} / {len(hits)}) {hits[i].strip()}"

    def call(self, name: str, arguments: str | Mapping[str, Any]) -> str:
        """Run one tool call by name and return its observation text."""
        args = json.loads(arguments) if isinstance(arguments, str) else dict(arguments)
        if name == "search":
            return self.search(str(args.get("query", "")), call_k(args))[0]
        if name == "open":
            return self.open(str(args.get("title", "")))[0]
        if name == "find":
            return self.find(str(args.get("keyword", "")))
        if name == "answer":
            return "Answer submitted."
        raise ValueError(f"expected a tool in ('search', 'open', 'find', 'answer'), got {name!r}")
