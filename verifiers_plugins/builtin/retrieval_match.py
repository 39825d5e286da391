"""`retrieval_match` acceptor: a search, open or find call is accepted by what it retrieves on the local corpus.

- `search`: its top-k results contain the document the expert's action led to, or a gold
  document not yet opened.
- `open`: it opens that document, or a gold document not yet opened.
- `find`: its keyword is similar to the expert's, or finds the same sentence of the open document.

The per-pivot facts (`target_doc_id`, `open_doc_id`, `opened_doc_ids`, `gold_doc_ids`,
`replayable`) are written by the oracle and the ReAct readers. A pivot that is not replayable
(FireAct's live web searches, ReAct titles missing from the corpus) is compared as text: same
tool and similar argument.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rapidfuzz import fuzz

from pivot_core import Message, Pivot
from pivot_core.browse import (
    DEFAULT_K,
    Document,
    QueryRejected,
    SearchBackend,
    SearchTimeout,
    call_k,
    find_sentences,
    normalize_answer,
    open_backend,
    resolve,
)
from verifiers_plugins._memo import call_arguments
from verifiers_plugins._verdict import Verdict
from verifiers_plugins.hookspecs import hookimpl

_HITS_CACHE_SIZE = 4096
RETRIEVAL_TOOLS = {"search": "query", "open": "title", "find": "keyword"}


def _call(message: Message) -> tuple[str, dict[str, Any] | None] | None:
    if not message.tool_calls:
        return None
    args = call_arguments(message.tool_calls[0])
    return message.tool_calls[0].name, args if isinstance(args, dict) else None


@dataclass(frozen=True)
class _ExpertForm:
    """What every candidate at a pivot is compared with: the expert's call and the documents it may reach."""

    call: tuple[str, dict[str, Any] | None] | None
    wanted: frozenset[str]


def _expert_form(pivot: Pivot) -> _ExpertForm:
    ctx = pivot.context
    unopened_gold = set(ctx.get("gold_doc_ids") or ()) - set(ctx.get("opened_doc_ids") or ())
    wanted = {ctx.get("target_doc_id")} | unopened_gold
    wanted.discard(None)
    return _ExpertForm(_call(pivot.expert), frozenset(wanted))


_NOT_RETRIEVAL = Verdict.skip("expert turn is not a search, open or find call")


def _arg(name: str, args: Mapping[str, Any]) -> str:
    value = args.get(RETRIEVAL_TOOLS.get(name, ""), "")
    return value if isinstance(value, str) else ""


class RetrievalMatch:
    """Replays a candidate's search/open/find on the local corpus and checks what it reaches.

    Args:
        corpus: the corpus JSONL; the pivot's `context["corpus"]` (else the bundled corpus) when None.
        k: the most results a candidate search may use (its own `k` is capped here).
        keyword_threshold: rapidfuzz ratio (0-1) at which a find keyword counts as the expert's.
        text_threshold: token-set ratio (0-1) for the text comparison of non-replayable pivots.
    """

    role = "acceptor"
    cost = "cheap"
    deterministic = True
    # 2: a query past the search bounds is rejected with the reason; repeated words count once
    version = "2"

    def __init__(
        self, corpus: str | None = None, k: int = DEFAULT_K, keyword_threshold: float = 0.8, text_threshold: float = 0.8
    ) -> None:
        if k < 1:
            raise ValueError(f"retrieval_match: expected k >= 1, got {k!r}")
        self.corpus, self.k = corpus, k
        self.keyword_threshold, self.text_threshold = keyword_threshold, text_threshold
        # Opened once per corpus; a GRPO group asks the same few queries again and again (the
        # index is read-only, so the hits of a query never change within a process).
        self._backends: dict[Any, SearchBackend] = {}
        self._hits: OrderedDict[tuple[Any, str, int], list[str]] = OrderedDict()
        self._docs: OrderedDict[tuple[Any, str], Document | None] = OrderedDict()

    def backend(self, pivot: Pivot) -> SearchBackend:
        """The backend for this pivot's corpus (opened once per corpus)."""
        corpus = self.corpus if self.corpus is not None else pivot.context.get("corpus")
        key = corpus if isinstance(corpus, str | None) else repr(corpus)
        if key not in self._backends:
            self._backends[key] = open_backend(corpus)
        return self._backends[key]

    def fingerprint(self, pivot: Pivot) -> str:
        """The content hash of the corpus this verifier searches for `pivot` (a corpus file edited in place changes it).

        "" where the verdict does not read the corpus (the expert is no retrieval call, or the
        pivot is compared as text).
        """
        expert = _expert_form(pivot).call
        if expert is None or expert[0] not in RETRIEVAL_TOOLS or not pivot.context.get("replayable"):
            return ""
        return f"corpus:{self.backend(pivot).digest}"

    def _search_hits(self, pivot: Pivot, query: Any, k: int) -> list[str]:
        key = (self.corpus if self.corpus is not None else repr(pivot.context.get("corpus")), repr(query), k)
        if key in self._hits:
            self._hits.move_to_end(key)
            return self._hits[key]
        hits = [h.doc_id for h in self.backend(pivot).search(query, k)]
        self._hits[key] = hits
        while len(self._hits) > _HITS_CACHE_SIZE:
            self._hits.popitem(last=False)
        return hits

    def verify(self, pivot: Pivot, action: Message) -> Verdict:
        """Dispatch on the candidate's tool."""
        form = _expert_form(pivot)
        expert = form.call
        if expert is None or expert[0] not in RETRIEVAL_TOOLS:
            return _NOT_RETRIEVAL
        if len(action.tool_calls) > 1:  # a spray of calls must not win on its best one
            return Verdict.reject(f"expected one tool call, got {len(action.tool_calls)}")
        cand = _call(action)
        if cand is None or cand[0] not in RETRIEVAL_TOOLS:
            return Verdict.reject(f"expected a search, open or find call, got {cand[0] if cand else 'no call'}")
        name, args = cand
        if args is None or not _arg(name, args).strip():
            return Verdict.reject(f"{name}: expected a non-empty {RETRIEVAL_TOOLS[name]!r} argument")
        if not pivot.context.get("replayable"):
            return self._as_text(expert, name, args)
        wanted = set(form.wanted)
        if name == "search":
            return self._search(pivot, args, wanted)
        if name == "open":
            return self._open(pivot, args, wanted)
        return self._find(pivot, expert, args)

    def _search(self, pivot: Pivot, args: Mapping[str, Any], wanted: set[str]) -> Verdict:
        k = min(call_k(args), self.k)
        try:
            hits = list(self._search_hits(pivot, args["query"], k))
        except QueryRejected as e:  # the candidate's own doing: a decision, as any other reject
            return Verdict.reject(f"search refused: {e}", k=k)
        except SearchTimeout as e:  # the machine's, perhaps: could not decide
            return Verdict.failed(f"retrieval_match: {e}", k=k)
        found = [d for d in hits if d in wanted]
        details = {"k": k, "hits": hits, "wanted": sorted(wanted)}
        if found:
            return Verdict.accept(f"top-{k} contains {found[0]} at rank {hits.index(found[0]) + 1}", **details)
        return Verdict.reject(f"top-{k} contains neither the expert's document nor an unopened gold one", **details)

    def _resolved(self, pivot: Pivot, title: Any) -> Document | None:
        """`resolve(backend, title)`, looked up once per corpus and title (the index is read-only, as for hits)."""
        key = (self.corpus if self.corpus is not None else repr(pivot.context.get("corpus")), repr(title))
        if key in self._docs:
            return self._docs[key]
        doc = resolve(self.backend(pivot), title)
        self._docs[key] = doc
        while len(self._docs) > _HITS_CACHE_SIZE:
            self._docs.popitem(last=False)
        return doc

    def _open(self, pivot: Pivot, args: Mapping[str, Any], wanted: set[str]) -> Verdict:
        doc = self._resolved(pivot, args["title"])
        details = {"opened": doc.doc_id if doc else None, "wanted": sorted(wanted)}
        if doc is None:
            return Verdict.reject(f"no document titled {args['title']!r}", **details)
        if doc.doc_id in wanted:
            return Verdict.accept(f"opens {doc.title!r}, a wanted document", **details)
        return Verdict.reject(f"opens {doc.title!r}, neither the expert's document nor an unopened gold one", **details)

    def _find(self, pivot: Pivot, expert: tuple[str, dict[str, Any] | None], args: Mapping[str, Any]) -> Verdict:
        if expert[0] != "find":
            return Verdict.reject("find at a pivot where the expert retrieves a document")
        want, got = _arg("find", expert[1] or {}), args["keyword"]
        similarity = fuzz.ratio(normalize_answer(want), normalize_answer(got)) / 100.0
        details: dict[str, Any] = {"similarity": round(similarity, 4), "threshold": self.keyword_threshold}
        if similarity >= self.keyword_threshold:
            return Verdict.accept(f"keyword similarity {similarity:.2f}", **details)
        doc = self.backend(pivot).get(str(pivot.context.get("open_doc_id")))
        if doc is not None:
            mine, theirs = find_sentences(doc, got), find_sentences(doc, want)
            if mine and theirs and mine[0] == theirs[0]:
                return Verdict.accept("finds the same sentence as the expert's keyword", **details)
        return Verdict.reject(f"keyword similarity {similarity:.2f} and a different (or no) sentence", **details)

    def _as_text(self, expert: tuple[str, dict[str, Any] | None], name: str, args: Mapping[str, Any]) -> Verdict:
        details: dict[str, Any] = {"mode": "text", "threshold": self.text_threshold}
        if name != expert[0]:
            return Verdict.reject(f"not replayable: expected {expert[0]} as the expert, got {name}", **details)
        want, got = normalize_answer(_arg(name, expert[1] or {})), normalize_answer(_arg(name, args))
        score = fuzz.token_set_ratio(want, got) / 100.0
        details["similarity"] = round(score, 4)
        if score >= self.text_threshold:
            return Verdict.accept(f"not replayable: argument similarity {score:.2f}", **details)
        return Verdict.reject(f"not replayable: argument similarity {score:.2f}", **details)


@hookimpl
def register_verifiers(register: Callable[..., None]) -> None:
    """Register `retrieval_match`."""
    register("retrieval_match", RetrievalMatch)
