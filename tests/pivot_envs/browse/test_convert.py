"""ReAct, FireAct and ReAct-prompt converters: round trips, replay facts, CLI, bad lines."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from pivot_cli import app
from pivot_core.browse import bundled_corpus
from pivot_core.convert.fireact import from_fireact, to_fireact
from pivot_core.convert.react import from_react, parse_action, to_react
from pivot_envs import DataFileError, detect_format, load_pivots

STEP_KEYS = ("thought", "action", "observation")


def records(path):
    return [json.loads(line) for line in path.open(encoding="utf-8")]


def test_react_round_trip_keeps_every_step(shared_data):
    for rec in records(shared_data / "browse" / "react_wikipedia_trajectories.jsonl"):
        traj = from_react(rec)
        back = to_react(traj)
        assert from_react(back) == traj
        assert [{k: s.get(k) for k in STEP_KEYS} for s in back["steps"]] == [
            {k: s.get(k) for k in STEP_KEYS} for s in rec["steps"]
        ]


def test_react_actions_map_to_browse_tools():
    assert parse_action("Search[Jonny Craig]") == ("search", "Jonny Craig")
    assert parse_action("Lookup[named after]") == ("lookup", "named after")
    assert parse_action("Finish[yes]") == ("finish", "yes")
    assert parse_action("Think about it") is None
    traj = from_react(
        {
            "id": "t",
            "question": "Q?",
            "success": True,
            "gold_answer": "A",
            "steps": [
                {"thought": "T1", "action": "Search[X]", "observation": "O1"},
                {"thought": "T2", "action": "Lookup[k]", "observation": "O2"},
                {"thought": "T3", "action": "Finish[A]", "observation": "done"},
            ],
        }
    )
    calls = [(m.tool_calls[0].name, json.loads(m.tool_calls[0].arguments)) for m in traj.messages if m.tool_calls]
    assert calls == [("open", {"title": "X"}), ("find", {"keyword": "k"}), ("answer", {"answer": "A"})]
    assert [m.tool_call_id for m in traj.messages if m.role == "tool"] == ["call_1", "call_2", "call_3"]


def test_fireact_round_trip_and_every_pivot_not_replayable(shared_data):
    path = shared_data / "browse" / "fireact_gpt4_react_hotpotqa.jsonl"
    for rec in records(path)[:100]:
        traj = from_fireact(rec)
        back = to_fireact(traj)
        assert from_fireact(back) == traj
        assert back["messages"] == rec["messages"] and back["messages_original"] == rec["messages_original"]
    assert detect_format(path).name == "fireact"
    pivots = load_pivots(path)
    assert pivots and all(p.context["replayable"] is False for p in pivots)


def test_react_file_is_detected_and_replayed_on_the_sibling_corpus(shared_data):
    path = shared_data / "browse" / "react_wikipedia_trajectories.jsonl"
    assert detect_format(path).name == "react"
    pivots = load_pivots(path)
    assert {p.context["corpus"] for p in pivots} == {str((shared_data / "browse" / "corpus.jsonl").resolve())}
    opens = [p for p in pivots if p.expert.tool_calls and p.expert.tool_calls[0].name == "open"]
    assert len(opens) == 245  # every ReAct Search[...] (SOURCES.md counts 245)
    replayable = [p for p in opens if p.context["replayable"]]
    assert 0 < len(replayable) < len(opens)
    assert all(p.context["target_doc_id"] for p in replayable)
    assert all(p.context["gold_doc_ids"] for p in pivots)  # from the sibling questions.jsonl


def test_react_prompts_convert_with_answers_as_gold(shared_data):
    path = shared_data / "browse" / "raw" / "react_webthink_fewshot_prompts.json"
    pivots = load_pivots(path, format="react-prompts")
    answers = [p for p in pivots if p.expert.tool_calls and p.expert.tool_calls[0].name == "answer"]
    assert len(answers) >= 6 and all(p.context["gold_answer"] for p in answers)
    milhouse = next(p for p in answers if "Milhouse" in p.history[0].text)
    assert milhouse.context["gold_answer"] == "Richard Nixon"
    assert [m.tool_calls[0].name for m in milhouse.history if m.tool_calls] == ["open", "find"]


def test_cli_convert_from_react(tmp_path, shared_data):
    out = tmp_path / "react_pivots.jsonl"
    src = shared_data / "browse" / "react_wikipedia_trajectories.jsonl"
    result = CliRunner().invoke(app, ["convert", "--from", "react", str(src), str(out), "--successful-only", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["pivots"] == len(load_pivots(out)) > 80


def test_cli_browse_index_and_search(tmp_path, monkeypatch):
    monkeypatch.setenv("PIVOT_CACHE_DIR", str(tmp_path))
    runner = CliRunner()
    first = json.loads(runner.invoke(app, ["browse", "index", "--json"]).stdout)
    again = json.loads(runner.invoke(app, ["browse", "index", "--json"]).stdout)
    assert first["built"] and not again["built"] and first["index_bytes"] > 0
    assert first["documents"] == sum(1 for _ in bundled_corpus().open())
    title = json.loads(bundled_corpus().open().readline())["title"]
    hits = json.loads(runner.invoke(app, ["browse", "search", title, "--k", "3", "--json"]).stdout)["hits"]
    assert hits[0]["title"] == title and len(hits) <= 3


def test_bad_react_line_names_file_and_line(tmp_path, shared_data):
    src = shared_data / "browse" / "react_wikipedia_trajectories.jsonl"
    lines = src.read_text(encoding="utf-8").splitlines()[:3]
    bad = tmp_path / "react.jsonl"
    bad.write_text("\n".join([lines[0], lines[1][:50], lines[2]]) + "\n", encoding="utf-8")
    with pytest.raises(DataFileError, match=r"react.jsonl:2: invalid JSON"):
        load_pivots(bad, format="react", corpus=str(bundled_corpus()))
    broken = json.loads(lines[0])
    broken["steps"][0]["action"] = 7
    bad.write_text(json.dumps(broken) + "\n", encoding="utf-8")
    with pytest.raises(DataFileError, match=r"react.jsonl:1: .*steps\[0\].action"):
        load_pivots(bad, format="react", corpus=str(bundled_corpus()))


def test_synthesize_names_the_question_line_whose_gold_document_is_missing(tmp_path):
    questions = tmp_path / "q.jsonl"
    rec = json.loads((bundled_corpus().parent / "browse_questions.jsonl").open().readline())
    rec["gold_doc_ids"] = ["dmissing00000"]
    questions.write_text("\n" + json.dumps(rec) + "\n", encoding="utf-8")
    result = CliRunner().invoke(
        app,
        [
            "synthesize",
            "browse",
            "--questions",
            str(questions),
            "--corpus",
            str(bundled_corpus()),
            "--out",
            str(tmp_path / "o.jsonl"),
        ],
    )
    assert result.exit_code == 1
    assert "q.jsonl:2" in result.stderr and "dmissing00000" in result.stderr
