"""The browse corpus: one JSON document per line, read with file-and-line errors."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from pivot_core._files import open_regular
from pivot_core._jsonl import iter_jsonl
from pivot_core.errors import DataFileError

PathLike = str | os.PathLike[str]
BUNDLED_CORPUS = "browse_corpus.jsonl"
# A sentence ends at . ! or ? followed by whitespace and a capital, digit or quote.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


@dataclass(frozen=True)
class Document:
    """One corpus document.

    Attributes:
        doc_id: stable id (unique in the corpus).
        title: the page title (`open` resolves it exactly).
        text: the full text.
        sentences: the text split into sentences (`find` returns them); split on punctuation
            when the corpus line gives none.
    """

    doc_id: str
    title: str
    text: str
    sentences: tuple[str, ...]


def split_sentences(text: str) -> tuple[str, ...]:
    """Split text into sentences on end punctuation (used when the corpus gives no split)."""
    return tuple(s.strip() for s in _SENTENCE_END.split(text) if s.strip())


def _document(path: Path, lineno: int, rec: dict) -> Document:
    for key in ("doc_id", "title", "text"):
        if not isinstance(rec.get(key), str) or not rec[key]:
            raise DataFileError(str(path), lineno, f"expected a non-empty string field {key!r}, got {rec.get(key)!r}")
    sentences = rec.get("sentences")
    if isinstance(sentences, list) and sentences and all(isinstance(s, str) for s in sentences):
        split = tuple(s.strip() for s in sentences if s.strip())
    else:
        split = split_sentences(rec["text"])
    return Document(rec["doc_id"], rec["title"], rec["text"], split)


def iter_corpus(path: PathLike) -> Iterator[Document]:
    """Documents of a corpus JSONL in file order.

    Raises:
        DataFileError: a line is not valid JSON, lacks `doc_id`/`title`/`text`, or repeats a doc id
            (the message names the file and line).
    """
    p = Path(path)
    seen: dict[str, int] = {}
    for lineno, rec in iter_jsonl(p):
        doc = _document(p, lineno, rec)
        if doc.doc_id in seen:
            raise DataFileError(str(p), lineno, f"doc_id {doc.doc_id!r} already used on line {seen[doc.doc_id]}")
        seen[doc.doc_id] = lineno
        yield doc


def corpus_digest(path: PathLike) -> str:
    """SHA-256 of the corpus file's bytes: the key of its cached index."""
    h = hashlib.sha256()
    try:
        with open_regular(path) as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError as e:
        raise DataFileError(str(path), None, f"cannot open corpus: {e.strerror or e}") from e
    return h.hexdigest()


def bundled_corpus() -> Path:
    """Path of the corpus shipped with the package (the documents the bundled pivots use)."""
    return Path(str(resources.files("pivot_core") / "data" / BUNDLED_CORPUS))


def resolve_corpus(corpus: PathLike | None) -> Path:
    """The corpus path to use: `corpus` itself, or the bundled corpus when None or `"bundled"`.

    A string `"bundled:<name>"` names a file of the package data folder.
    """
    if corpus is None or str(corpus) == "bundled":
        return bundled_corpus()
    text = str(corpus)
    if text.startswith("bundled:"):
        return Path(str(resources.files("pivot_core") / "data" / text.removeprefix("bundled:")))
    return Path(corpus)
