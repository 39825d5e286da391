"""The search-backend interface the browse tools and verifiers call.

The embedded default is `FtsBackend` (SQLite FTS5, BM25). A user with a large corpus implements
`SearchBackend` over OpenSearch or Elasticsearch in a plugin: `search` maps to a `match` query
(`multi_match` over title^10 and text, BM25 is the engines' default similarity), `get` to a
document GET by id, `by_title` to a `term` query on a keyword sub-field of the title. Nothing else
in pivot-gym touches the index, so the tools, the oracle and `retrieval_match` work unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from pivot_core.browse._corpus import Document


@dataclass(frozen=True)
class SearchHit:
    """One ranked search result.

    Attributes:
        doc_id: the document id.
        title: the document title.
        snippet: a short extract around the matched terms.
        score: the backend's relevance score (higher is better; BM25 for the default backend).
    """

    doc_id: str
    title: str
    snippet: str
    score: float


@runtime_checkable
class SearchBackend(Protocol):
    """What a search backend provides. Every method is read-only and thread-safe.

    Implementations must be deterministic: the same query on the same corpus returns the same
    ranking, because verifier rewards are cached by pivot and verifier configuration.
    """

    digest: str
    """Identity of the indexed corpus content (the default backend uses the file's SHA-256)."""

    def search(self, query: str, k: int = 5) -> list[SearchHit]:
        """The top `k` documents for a free-text query, best first ([] for an empty query).

        Documents whose title equals the query (case-insensitively) rank first.

        Raises:
            QueryRejected: the query is past the backend's bounds (length, number of words).
            SearchTimeout: the query ran past the backend's time limit.
        """
        ...

    def get(self, doc_id: str) -> Document | None:
        """The document with this id, None when absent."""
        ...

    def by_title(self, title: str) -> Document | None:
        """The document with exactly this title (case-insensitive as a fallback; earliest wins)."""
        ...

    def __len__(self) -> int:
        """Number of indexed documents."""
        ...
