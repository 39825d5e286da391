"""`FtsBackend`: the embedded search backend, an SQLite FTS5 index with BM25 ranking.

The index is built once per corpus content and cached next to the corpus file
(`<corpus>.fts5.sqlite`), or under `$PIVOT_CACHE_DIR` / `~/.cache/pivot-gym/browse/` when that
folder is read-only. The index records the corpus SHA-256; a corpus whose content changed is
re-indexed on the next open. Building writes a temporary file and renames it, so a reader never
sees a half-built index.
"""

from __future__ import annotations

import json
import math
import os
import re
import sqlite3
import threading
import time
from pathlib import Path

from pivot_core._paths import cache_dir
from pivot_core.browse._backend import SearchHit
from pivot_core.browse._corpus import (
    Document,
    PathLike,
    bundled_corpus,
    corpus_digest,
    iter_corpus,
    resolve_corpus,
)
from pivot_core.errors import DataFileError, PivotGymError, QueryRejected, SearchTimeout

SCHEMA_VERSION = "1"
TITLE_WEIGHT = 10.0  # BM25 column weight: a title term counts ten body terms
# A document missing a query word must score at least this share of the weakest full match.
PARTIAL_SCORE = 0.5
_WORD = re.compile(r"\w+", re.UNICODE)
# Bounds of a query. FTS5's cost grows with the square of a query's terms (repeated common words:
# 400 of them took 2 s, 32 KB of them 100 s), and the longest recorded expert query (ReAct,
# FireAct) has 125 characters and 20 words: these leave room and cap the cost at milliseconds.
MAX_QUERY_CHARS = 512
MAX_QUERY_TERMS = 32
# A query still running after this many seconds is stopped inside SQLite (a thread timeout cannot
# interrupt the C call); with the bounds above no query comes near it.
SEARCH_TIMEOUT_S = 5.0
# SQLite virtual-machine steps between two looks at the clock: one step can be a long FTS5 row
# (10,000 steps overran a 0.2 s limit by 11 s on a 1,000-word query; 100 stop it on time).
_PROGRESS_STEPS = 100


def query_terms(text: str) -> list[str]:
    """The distinct words of a query, in order (case-insensitive; the first spelling is kept).

    A repeated word adds nothing to which documents match and only multiplies FTS5's work.

    Raises:
        QueryRejected: the query has more than `MAX_QUERY_CHARS` characters or `MAX_QUERY_TERMS` distinct words.
    """
    if len(text) > MAX_QUERY_CHARS:
        raise QueryRejected(f"search query of {len(text)} characters: expected at most {MAX_QUERY_CHARS}")
    terms: dict[str, str] = {}
    for word in _WORD.findall(text):
        terms.setdefault(word.casefold(), word)
    if len(terms) > MAX_QUERY_TERMS:
        raise QueryRejected(f"search query of {len(terms)} distinct words: expected at most {MAX_QUERY_TERMS}")
    return list(terms.values())


def fts_query(text: str, mode: str = "OR") -> str:
    """An FTS5 MATCH expression for free text: every distinct word quoted (no operator injection), AND-ed or OR-ed.

    Raises:
        QueryRejected: the text is past the query bounds (see `query_terms`).
    """
    return _expression(query_terms(text), mode)


def _expression(terms: list[str], mode: str) -> str:
    return f" {mode} ".join('"' + w.replace('"', '""') + '"' for w in terms)


def index_path(corpus: Path, digest: str) -> Path:
    """Where the index of this corpus lives: beside it when that folder is writable, else the cache dir.

    The bundled corpus is always indexed in the cache dir, so the package folder stays as shipped.
    """
    if corpus.resolve().parent == bundled_corpus().resolve().parent:
        return cache_dir("browse") / f"{corpus.stem}-{digest[:16]}.fts5.sqlite"
    beside = corpus.with_name(corpus.name + ".fts5.sqlite")
    # os.access says yes to root on a folder marked read-only: also honour the write bits.
    folder_writable = os.access(corpus.parent, os.W_OK) and corpus.parent.stat().st_mode & 0o222
    if folder_writable and (not beside.exists() or os.access(beside, os.W_OK)):
        return beside
    return cache_dir("browse") / f"{corpus.stem}-{digest[:16]}.fts5.sqlite"


def _stored_digest(path: Path) -> str | None:
    if not path.exists():
        return None
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
            rows = dict(con.execute("SELECT key, value FROM meta").fetchall())
    except sqlite3.Error:
        return None  # unreadable or foreign file: rebuild over it
    if rows.get("schema") != SCHEMA_VERSION:
        return None
    return rows.get("corpus_sha256")


def _require_fts5(con: sqlite3.Connection) -> None:
    try:
        con.execute("CREATE VIRTUAL TABLE temp.fts5_probe USING fts5(x)")
        con.execute("DROP TABLE temp.fts5_probe")
    except sqlite3.OperationalError as e:
        raise PivotGymError(
            f"expected an SQLite with the FTS5 extension (Python's sqlite3 links SQLite "
            f"{sqlite3.sqlite_version}), got: {e}"
        ) from e


def build_index(corpus: Path, out: Path, digest: str) -> int:
    """Index every document of `corpus` into a fresh SQLite file at `out`; returns the count."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"{out.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.unlink(missing_ok=True)
    con = sqlite3.connect(tmp)
    try:
        _require_fts5(con)
        con.executescript(
            """
            CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);
            CREATE TABLE docs(pos INTEGER PRIMARY KEY, doc_id TEXT UNIQUE, title TEXT, title_key TEXT,
                              text TEXT, sentences TEXT);
            CREATE INDEX docs_title ON docs(title);
            CREATE INDEX docs_title_key ON docs(title_key);
            CREATE VIRTUAL TABLE docs_fts USING fts5(title, text, content='docs', content_rowid='pos',
                                                     tokenize='unicode61 remove_diacritics 2');
            """
        )
        rows = (
            (i, d.doc_id, d.title, d.title.casefold(), d.text, json.dumps(d.sentences, ensure_ascii=False))
            for i, d in enumerate(iter_corpus(corpus))
        )
        con.executemany("INSERT INTO docs VALUES (?, ?, ?, ?, ?, ?)", rows)
        con.execute("INSERT INTO docs_fts(rowid, title, text) SELECT pos, title, text FROM docs")
        con.executemany(
            "INSERT INTO meta VALUES (?, ?)",
            [("schema", SCHEMA_VERSION), ("corpus_sha256", digest), ("corpus", str(corpus))],
        )
        con.commit()
        n = con.execute("SELECT count(*) FROM docs").fetchone()[0]
    except BaseException:
        con.close()
        tmp.unlink(missing_ok=True)
        raise
    con.close()
    os.replace(tmp, out)
    return int(n)


class FtsBackend:
    """SQLite FTS5 search over a corpus JSONL (see `SearchBackend` for the contract).

    Args:
        corpus: the corpus JSONL (the bundled corpus when None).
        index: where to keep the index; chosen by `index_path` when None.
        timeout_s: seconds one SQL statement of a lookup may run before SQLite stops it
            (`SearchTimeout`); checked by SQLite's progress handler, inside the C call.

    Raises:
        DataFileError: the corpus has a line that is not valid JSON or not a document.
    """

    def __init__(
        self, corpus: PathLike | None = None, index: PathLike | None = None, timeout_s: float = SEARCH_TIMEOUT_S
    ) -> None:
        if not timeout_s > 0:
            raise ValueError(f"FtsBackend timeout_s: expected > 0, got {timeout_s!r}")
        self.corpus = resolve_corpus(corpus)
        self.digest = corpus_digest(self.corpus)
        self.index = Path(index) if index is not None else index_path(self.corpus, self.digest)
        self.built = _stored_digest(self.index) != self.digest
        if self.built:
            build_index(self.corpus, self.index, self.digest)
        self._con = sqlite3.connect(f"file:{self.index}?mode=ro", uri=True, check_same_thread=False)
        self._lock = threading.Lock()
        self.timeout_s = float(timeout_s)
        self._deadline = math.inf  # set for each lookup, under the lock
        self._con.set_progress_handler(self._over_time, _PROGRESS_STEPS)
        self._size = self._con.execute("SELECT count(*) FROM docs").fetchone()[0]

    def _over_time(self) -> bool:
        """SQLite's progress handler: True stops the running statement ("interrupted")."""
        return time.monotonic() > self._deadline

    def _timed(self, sql: str, args: tuple, one: bool) -> list[tuple] | tuple | None:
        with self._lock:
            self._deadline = time.monotonic() + self.timeout_s
            try:
                cursor = self._con.execute(sql, args)
                return cursor.fetchone() if one else cursor.fetchall()
            except sqlite3.OperationalError as e:
                if "interrupted" not in str(e):
                    raise
                raise SearchTimeout(f"search stopped after {self.timeout_s:g} s (the backend's time limit)") from e
            finally:
                self._deadline = math.inf

    def _one(self, sql: str, args: tuple = ()) -> tuple | None:
        return self._timed(sql, args, one=True)  # type: ignore[return-value]

    def _all(self, sql: str, args: tuple = ()) -> list[tuple]:
        return self._timed(sql, args, one=False)  # type: ignore[return-value]

    def __len__(self) -> int:
        return int(self._size)

    def search(self, query: str, k: int = 5) -> list[SearchHit]:
        """Top `k` by BM25 (title weighted), exact-title matches first, ties in corpus order.

        Documents with every word of the query rank by BM25. When fewer than `k` have every
        word, documents missing some word fill in, but only those scoring at least
        `PARTIAL_SCORE` times the weakest full match (all of them when nothing has every word).
        So a stray common word ("100" in "100 Bullets") cannot pad a precise query's results,
        while a wordy query still finds a document whose title carries its key words.

        Raises:
            QueryRejected: the query is past `MAX_QUERY_CHARS` or `MAX_QUERY_TERMS`.
            SearchTimeout: a statement ran past `timeout_s`.
        """
        terms = query_terms(query or "")
        if not terms or k < 1:
            return []
        every = self._rows(_expression(terms, "AND"), k)
        rows = every if len(every) >= k else self._rows(_expression(terms, "OR"), k)
        if every and rows is not every:
            # bm25() is negative and lower-is-better: the weakest full match has the largest value.
            floor = PARTIAL_SCORE * max(r[5] for r in every)
            rows = every + [r for r in rows if r[5] <= floor and r[0] not in {e[0] for e in every}]
        key = " ".join(query.split()).casefold()
        # bm25() is lower-is-better; exact title matches come first, in corpus order (the
        # document `open` would pick first), then the rest by BM25.
        rows.sort(key=lambda r: (0, r[0], 0.0) if r[3] == key else (1, r[5], r[0]))
        top = rows[:k]
        snippets = self._snippets(_expression(terms, "OR"), [r[0] for r in top])
        return [SearchHit(r[1], r[2], snippets.get(r[0], ""), -float(r[5])) for r in top]

    def _rows(self, expr: str, k: int) -> list[tuple]:
        return self._all(
            "SELECT d.pos, d.doc_id, d.title, d.title_key, NULL, "
            f"bm25(docs_fts, {TITLE_WEIGHT}, 1.0) AS rank "
            "FROM docs_fts JOIN docs d ON d.pos = docs_fts.rowid WHERE docs_fts MATCH ? "
            "ORDER BY rank, d.pos LIMIT ?",
            (expr, k + 20),  # a margin so exact-title matches ranked below k by BM25 are seen
        )

    def _snippets(self, expr: str, positions: list[int]) -> dict[int, str]:
        """Snippets for the final hits only (snippet() is the costly part of a query)."""
        if not positions:
            return {}
        marks = ",".join("?" * len(positions))
        rows = self._all(
            f"SELECT rowid, snippet(docs_fts, 1, '', '', '…', 24) FROM docs_fts "
            f"WHERE docs_fts MATCH ? AND rowid IN ({marks})",
            (expr, *positions),
        )
        return dict(rows)

    def _doc(self, row: tuple | None) -> Document | None:
        if row is None:
            return None
        return Document(row[0], row[1], row[2], tuple(json.loads(row[3])))

    def get(self, doc_id: str) -> Document | None:
        """The document with this id."""
        return self._doc(self._one("SELECT doc_id, title, text, sentences FROM docs WHERE doc_id = ?", (doc_id,)))

    def by_title(self, title: str) -> Document | None:
        """Exact title, else case-insensitive title; the earliest corpus line wins."""
        cols = "SELECT doc_id, title, text, sentences FROM docs"
        row = self._one(f"{cols} WHERE title = ? ORDER BY pos LIMIT 1", (title,))
        if row is None:
            row = self._one(f"{cols} WHERE title_key = ? ORDER BY pos LIMIT 1", (" ".join(title.split()).casefold(),))
        return self._doc(row)

    def close(self) -> None:
        """Close the SQLite connection."""
        with self._lock:
            self._con.close()


_CACHE: dict[tuple[str, int, int], FtsBackend] = {}
_CACHE_LOCK = threading.Lock()


def open_backend(corpus: PathLike | None = None) -> FtsBackend:
    """A shared `FtsBackend` per corpus file version (keyed by path, size and mtime)."""
    path = resolve_corpus(corpus).resolve()
    try:
        st = path.stat()
    except OSError as e:
        raise DataFileError(str(path), None, f"cannot open corpus: {e.strerror or e}") from e
    key = (str(path), st.st_size, st.st_mtime_ns)
    with _CACHE_LOCK:
        if key not in _CACHE:
            _CACHE[key] = FtsBackend(path)
        return _CACHE[key]
