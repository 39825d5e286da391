"""The SQLite FTS5 backend: index build and cache, ranking, open/find, bad corpus lines."""

from __future__ import annotations

import json
import shutil

import pytest

from pivot_core.browse import (
    BrowseSession,
    FtsBackend,
    SearchBackend,
    bundled_corpus,
    fts_query,
    iter_corpus,
    open_backend,
)
from pivot_core.browse._fts import index_path
from pivot_envs import DataFileError


@pytest.fixture
def corpus_copy(tmp_path):
    path = tmp_path / "corpus.jsonl"
    shutil.copy(bundled_corpus(), path)
    return path


def test_index_builds_from_the_shipped_corpus_and_gold_titles_rank_first(tmp_path):
    backend = FtsBackend(bundled_corpus(), index=tmp_path / "idx.sqlite")
    assert isinstance(backend, SearchBackend)
    docs = list(iter_corpus(bundled_corpus()))
    assert backend.built and len(backend) == len(docs) > 50
    questions = [json.loads(line) for line in (bundled_corpus().parent / "browse_questions.jsonl").open()]
    golds = [gid for q in questions for gid in q["gold_doc_ids"]]
    assert len(golds) == 2 * len(questions)
    for gid in golds:
        title = backend.get(gid).title
        assert backend.search(title, 5)[0].doc_id == gid, title


def test_every_gold_title_of_the_full_corpus_ranks_first(shared_data):
    backend = open_backend(shared_data / "browse" / "corpus.jsonl")
    questions = [json.loads(line) for line in (shared_data / "browse" / "questions.jsonl").open()]
    for q in questions:
        for gid in q["gold_doc_ids"]:
            assert backend.search(backend.get(gid).title, 5)[0].doc_id == gid


def test_index_is_cached_beside_the_corpus_and_rebuilt_when_it_changes(corpus_copy):
    first = FtsBackend(corpus_copy)
    assert first.built and first.index == corpus_copy.with_name("corpus.jsonl.fts5.sqlite")
    assert not FtsBackend(corpus_copy).built  # same content: the cached index is reused
    with corpus_copy.open("a", encoding="utf-8") as f:
        f.write(
            json.dumps(
                {
                    "doc_id": "dnew",
                    "title": "Zanzibar Quokka Festival",
                    "text": "The Zanzibar Quokka Festival is an invented event.",
                }
            )
            + "\n"
        )
    changed = FtsBackend(corpus_copy)
    assert changed.built and len(changed) == len(first) + 1
    assert changed.search("quokka festival", 1)[0].doc_id == "dnew"


def test_read_only_corpus_folder_indexes_into_the_cache_dir(corpus_copy, tmp_path, monkeypatch):
    monkeypatch.setenv("PIVOT_CACHE_DIR", str(tmp_path / "cache"))
    corpus_copy.parent.chmod(0o555)
    try:
        backend = FtsBackend(corpus_copy)
    finally:
        corpus_copy.parent.chmod(0o755)
    assert backend.index.parent == tmp_path / "cache" / "browse"
    assert not corpus_copy.with_name("corpus.jsonl.fts5.sqlite").exists()
    assert index_path(bundled_corpus(), "ab" * 32).parent == tmp_path / "cache" / "browse"


def test_corpus_line_that_is_not_json_fails_with_file_and_line(corpus_copy):
    lines = corpus_copy.read_text(encoding="utf-8").splitlines()
    lines[2] = lines[2][:40]  # truncated mid-record
    corpus_copy.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataFileError) as err:
        FtsBackend(corpus_copy)
    assert err.value.path == str(corpus_copy) and err.value.line == 3
    assert f"{corpus_copy}:3" in str(err.value)
    assert not list(corpus_copy.parent.glob("*.sqlite*"))  # no half-built index is left


def test_corpus_line_without_title_or_with_a_repeated_id_fails_with_its_line(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"doc_id": "a", "title": "A", "text": "x"}\n{"doc_id": "b", "text": "y"}\n')
    with pytest.raises(DataFileError, match=r"c.jsonl:2: .*'title'"):
        list(iter_corpus(path))
    path.write_text('{"doc_id": "a", "title": "A", "text": "x"}\n{"doc_id": "a", "title": "B", "text": "y"}\n')
    with pytest.raises(DataFileError, match=r"c.jsonl:2: doc_id 'a' already used on line 1"):
        list(iter_corpus(path))


def test_query_syntax_cannot_inject_fts_operators(tmp_path):
    backend = FtsBackend(bundled_corpus(), index=tmp_path / "idx.sqlite")
    assert fts_query('a"b OR NEAR(x') == '"a" OR "b" OR "OR" OR "NEAR" OR "x"'
    assert fts_query("a b", "AND") == '"a" AND "b"'
    assert backend.search('"unbalanced AND (', 3) is not None
    assert backend.search("", 3) == [] and backend.search("!!!", 3) == []


def test_session_open_find_and_similar_fallback(tmp_path):
    backend = FtsBackend(bundled_corpus(), index=tmp_path / "idx.sqlite")
    doc = next(d for d in iter_corpus(bundled_corpus()) if len(d.sentences) >= 3)
    session = BrowseSession(backend)
    assert session.find("x") == "No document is open: open one first."
    text, opened = session.open(doc.title.upper())  # case-insensitive title fallback
    assert opened is not None and opened.title == doc.title and text == opened.text
    assert session.open(doc.doc_id)[1].doc_id == doc.doc_id
    word = doc.sentences[1].split()[0]
    first = session.find(word)
    assert first.startswith("(Result 1 / ") and word.casefold() in first.casefold()
    miss, none = session.open("Qqqzx Nonexistent Page Title")
    assert none is None and miss.startswith("Could not find [Qqqzx Nonexistent Page Title]. Similar: [")
    assert session.open_doc.doc_id == doc.doc_id  # a failed open keeps the open document
