"""Issue 30 item 11: a search query is bounded (length, distinct words) and a running one is stopped in SQLite.

The over-long queries run in a subprocess with a timeout: before the fix a 32 KB query of common
words held SQLite for about 100 s, and a thread cannot interrupt that C call.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from pivot_core.browse import (
    MAX_QUERY_CHARS,
    MAX_QUERY_TERMS,
    BrowseSession,
    FtsBackend,
    QueryRejected,
    SearchTimeout,
    bundled_corpus,
    fts_query,
    query_terms,
)
from pivot_envs import Message, Pivot, ToolCall
from verifiers_plugins import get_verifier

COMMON = "the of and in a "


def run_bounded(code: str, timeout: float = 60.0) -> dict:
    """Run `code` in a fresh interpreter that must finish within `timeout` s; its last stdout line is JSON."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running after {timeout:g} s: the search is not bounded")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_repeated_words_count_once_and_the_bounds_are_checked():
    assert query_terms("The cat the CAT sat") == ["The", "cat", "sat"]
    assert fts_query("a a a b", "AND") == '"a" AND "b"'
    assert len(query_terms(COMMON * 20)) == 5  # 100 words, 5 distinct: within the bounds
    with pytest.raises(QueryRejected, match=f"at most {MAX_QUERY_CHARS}"):
        query_terms("x" * (MAX_QUERY_CHARS + 1))
    with pytest.raises(QueryRejected, match=f"at most {MAX_QUERY_TERMS}"):
        query_terms(" ".join(f"w{i}" for i in range(MAX_QUERY_TERMS + 1)))


def test_a_32kb_query_of_common_words_is_refused_at_once_by_the_backend_and_the_env(shared_data):
    """The reported case, on the full corpus: the backend refuses it, and `env.step` scores it 0 with the reason."""
    result = run_bounded(
        f"""
        import json
        import gymnasium as gym
        import pivot_envs
        from pivot_core.browse import QueryRejected, open_backend
        from pivot_envs import Message, ToolCall, render_completion

        query = {COMMON!r} * 2000  # 32,000 characters
        backend = open_backend({str(shared_data / "browse" / "corpus.jsonl")!r})
        try:
            backend.search(query, 5)
            refused = None
        except QueryRejected as e:
            refused = str(e)
        repeated = len(backend.search({COMMON!r} * 30, 5))  # 480 characters, 5 distinct words
        env = gym.make("pivot/browse-v0").unwrapped
        pivot = next(p for p in env.pivots if p.expert.tool_calls and p.expert.tool_calls[0].name == "search"
                     and p.context.get("replayable"))
        env.reset(options={{"pivot_id": pivot.id}})
        action = Message("assistant", None, (ToolCall("search", json.dumps({{"query": query}})),))
        _, reward, _, _, info = env.step(render_completion(action, "browse"))
        reasons = [v["reason"] for v in info["verdicts"].values()]
        print(json.dumps({{"refused": refused, "repeated": repeated, "reward": reward, "reasons": reasons}}))
        """
    )
    assert result["refused"] and "characters" in result["refused"]
    assert result["repeated"] == 5
    assert result["reward"] == 0.0
    assert any("search refused" in r for r in result["reasons"]), result["reasons"]


def test_a_query_past_the_time_limit_is_stopped_inside_sqlite(tmp_path):
    """The time limit is SQLite's progress handler, so it stops the C call itself."""
    backend = FtsBackend(bundled_corpus(), index=tmp_path / "idx.sqlite", timeout_s=1e-9)
    with pytest.raises(SearchTimeout, match="stopped"):
        backend.search("the of and in a", 5)
    observation, hits = BrowseSession(backend).search("the of and in a")
    assert hits == [] and observation.startswith("Search failed: search stopped")
    with pytest.raises(ValueError, match="timeout_s"):
        FtsBackend(bundled_corpus(), index=tmp_path / "idx.sqlite", timeout_s=0)
    assert FtsBackend(bundled_corpus(), index=tmp_path / "idx.sqlite").search("the of and in a", 5)


def test_retrieval_match_rejects_a_refused_query_and_errs_on_a_stopped_one(tmp_path):
    doc = "bundled:browse_corpus.jsonl"
    expert = Message("assistant", None, (ToolCall("search", json.dumps({"query": "Nixon"})),))
    pivot = Pivot("p#1", "browse", (Message("user", "Q?"),), expert, (), {"replayable": True, "corpus": doc})
    long_query = Message("assistant", None, (ToolCall("search", json.dumps({"query": COMMON * 2000})),))
    verifier = get_verifier("retrieval_match")
    verdict = verifier.verify(pivot, long_query)
    assert not verdict.accepted and verdict.error is None and "search refused" in verdict.reason
    verifier._backends[doc] = FtsBackend(bundled_corpus(), index=tmp_path / "idx.sqlite", timeout_s=1e-9)
    short = Message("assistant", None, (ToolCall("search", json.dumps({"query": "the of and in a"})),))
    stopped = verifier.verify(pivot, short)
    assert not stopped.accepted and stopped.error and "stopped" in stopped.error


def test_pivot_serve_answers_a_batch_of_32kb_queries_at_once():
    """The denial-of-service path: verify-batch over HTTP with eight 32 KB queries (before: ~100 s each)."""
    result = run_bounded(
        f"""
        import json
        import gymnasium as gym
        import pivot_envs
        from starlette.testclient import TestClient
        from pivot_cli._server import create_app
        from pivot_envs import Message, ToolCall, render_completion

        env = gym.make("pivot/browse-v0").unwrapped
        pivot = next(p for p in env.pivots if p.expert.tool_calls and p.expert.tool_calls[0].name == "search"
                     and p.context.get("replayable"))
        def search(query):
            return Message("assistant", None, (ToolCall("search", json.dumps({{"query": query}})),))

        completions = [render_completion(search({COMMON!r} * 2000 + str(i)), "browse") for i in range(8)]
        with TestClient(create_app(env, "pivot/browse-v0")) as client:
            answer = client.post("/v1/verify-batch", json={{"pivot_id": pivot.id, "completions": completions}})
        results = answer.json()["results"]
        print(json.dumps({{"status": answer.status_code, "rewards": [r["reward"] for r in results],
                           "reasons": [r["verdicts"]["retrieval_match"]["reason"] for r in results]}}))
        """
    )
    assert result["status"] == 200 and result["rewards"] == [0.0] * 8
    assert all(r.startswith("search refused") for r in result["reasons"]), result["reasons"]
