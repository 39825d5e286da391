"""The browse domain's local search engine, tools, oracle expert and trajectory readers."""

from pivot_core.browse._annotate import annotate, browse_pivots, lift_turn
from pivot_core.browse._answer import exact_match, normalize_answer, token_f1
from pivot_core.browse._backend import SearchBackend, SearchHit
from pivot_core.browse._corpus import Document, bundled_corpus, corpus_digest, iter_corpus, resolve_corpus
from pivot_core.browse._fts import (
    MAX_QUERY_CHARS,
    MAX_QUERY_TERMS,
    FtsBackend,
    build_index,
    fts_query,
    index_path,
    open_backend,
    query_terms,
)
from pivot_core.browse._oracle import oracle_trajectory, synthesize
from pivot_core.browse._session import BrowseSession, call_k, find_sentences, resolve
from pivot_core.browse._tools import BROWSE_TOOLS, DEFAULT_K, MAX_K, TOOL_NAMES
from pivot_core.errors import QueryRejected, SearchTimeout

__all__ = [
    "call_k",
    "BROWSE_TOOLS",
    "DEFAULT_K",
    "MAX_K",
    "MAX_QUERY_CHARS",
    "MAX_QUERY_TERMS",
    "QueryRejected",
    "SearchTimeout",
    "TOOL_NAMES",
    "BrowseSession",
    "Document",
    "FtsBackend",
    "SearchBackend",
    "SearchHit",
    "annotate",
    "browse_pivots",
    "build_index",
    "bundled_corpus",
    "corpus_digest",
    "exact_match",
    "find_sentences",
    "fts_query",
    "index_path",
    "iter_corpus",
    "lift_turn",
    "normalize_answer",
    "open_backend",
    "oracle_trajectory",
    "query_terms",
    "resolve",
    "resolve_corpus",
    "synthesize",
    "token_f1",
]
