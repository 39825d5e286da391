"""browse_tool, retrieval_match and answer_match on hand-made pivots over the bundled corpus."""

from __future__ import annotations

import json

import pytest

from pivot_core.browse import BROWSE_TOOLS, bundled_corpus, exact_match, iter_corpus, normalize_answer, token_f1
from pivot_envs import Message, Pivot, ToolCall
from verifiers_plugins import VerifierChain, get_verifier

DOCS = list(iter_corpus(bundled_corpus()))


def call(name: str, **args) -> Message:
    return Message("assistant", None, (ToolCall(name, json.dumps(args)),))


def pivot(expert: Message, **context) -> Pivot:
    ctx = {"replayable": True, "corpus": "bundled:browse_corpus.jsonl", **context}
    return Pivot("p#1", "browse", (Message("user", "Q?"),), expert, BROWSE_TOOLS, ctx)


def test_hotpotqa_answer_normalisation():
    assert normalize_answer("The  Beatles!") == "beatles"
    assert exact_match('Jonny" Craig', "Jonny Craig")
    assert token_f1("yes", "no") == 0.0 and token_f1("no", "no") == 1.0
    assert token_f1("Richard Milhous Nixon", "Richard Nixon") == pytest.approx(0.8)


def test_answer_match_em_f1_and_expert_fallback():
    verifier = get_verifier("answer_match")
    p = pivot(call("answer", answer="Richard Nixon"), gold_answer="Richard Nixon")
    assert verifier.verify(p, call("answer", answer="richard nixon.")).accepted
    assert verifier.verify(p, call("answer", answer="Richard Milhous Nixon")).accepted  # F1 0.8
    assert not verifier.verify(p, call("answer", answer="Gerald Ford")).accepted
    assert not verifier.verify(p, call("search", query="Richard Nixon")).accepted
    no_gold = pivot(call("answer", answer="Badr Hari"))
    verdict = verifier.verify(no_gold, call("answer", answer="Badr Hari"))
    assert verdict.accepted and verdict.details["reference"] == "expert"
    assert not verifier.verify(pivot(call("open", title="x")), call("answer", answer="x")).applicable
    with pytest.raises(ValueError, match="threshold"):
        get_verifier("answer_match", threshold=0)


def test_browse_tool_gate_kinds_and_call_count():
    gate = get_verifier("browse_tool")
    p = pivot(call("open", title=DOCS[0].title))
    assert gate.verify(p, call("search", query="x")).accepted  # search and open are one kind
    assert not gate.verify(p, call("find", keyword="x")).accepted
    assert not gate.verify(p, call("answer", answer="x")).accepted
    two = Message("assistant", None, (ToolCall("open", "{}"), ToolCall("search", "{}")))
    assert "exactly one" in gate.verify(p, two).reason
    assert "unknown tool" in gate.verify(p, call("browse_web", q="x")).reason


def test_retrieval_match_accepts_wanted_documents_only():
    verifier = get_verifier("retrieval_match")
    target, gold, other = DOCS[0], DOCS[1], DOCS[-1]
    p = pivot(
        call("open", title=target.title), target_doc_id=target.doc_id, gold_doc_ids=[gold.doc_id], opened_doc_ids=[]
    )
    assert verifier.verify(p, call("open", title=target.doc_id)).accepted
    assert verifier.verify(p, call("open", title=gold.title)).accepted  # an unopened gold document
    assert verifier.verify(p, call("search", query=target.title)).accepted
    assert not verifier.verify(p, call("open", title=other.title)).accepted
    opened = pivot(
        call("open", title=target.title),
        target_doc_id=target.doc_id,
        gold_doc_ids=[gold.doc_id],
        opened_doc_ids=[gold.doc_id],
    )
    assert not verifier.verify(opened, call("open", title=gold.title)).accepted  # already opened
    assert not verifier.verify(p, call("open", title="")).accepted
    assert not verifier.verify(p, Message("assistant", None, (ToolCall("open", "not json"),))).accepted


def test_retrieval_match_find_by_similarity_or_same_sentence():
    verifier = get_verifier("retrieval_match")
    doc = next(d for d in DOCS if len(d.sentences) >= 2 and len(d.sentences[1].split()) > 6)
    words = [w.strip(".,;:()\"'") for w in doc.sentences[1].split()]
    keyword = max(words, key=len)
    p = pivot(call("find", keyword=keyword), target_doc_id=doc.doc_id, open_doc_id=doc.doc_id)
    assert verifier.verify(p, call("find", keyword=keyword.upper())).accepted
    assert not verifier.verify(p, call("find", keyword="zzqx unrelated")).accepted


def test_unreplayable_pivot_is_compared_as_text_and_a_missing_corpus_is_an_error():
    verifier = get_verifier("retrieval_match")
    p = pivot(call("search", query="best kick boxer controversies"), replayable=False)
    assert verifier.verify(p, call("search", query="controversies best kick boxer")).accepted
    assert not verifier.verify(p, call("search", query="tallest building in Paris")).accepted
    assert not verifier.verify(p, call("open", title="best kick boxer controversies")).accepted
    missing = pivot(call("open", title="x"), target_doc_id="d1", corpus="/nonexistent/corpus.jsonl")
    result = VerifierChain.from_names(["retrieval_match"])(missing, call("open", title="x"))
    assert result.reward == 0.0 and result.error and "corpus" in result.error
