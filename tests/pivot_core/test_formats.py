import json

import pytest

from pivot_core._jsonl import iter_jsonl
from pivot_envs import DataFileError, UnknownFormat, load_pivots, write_pivots

NEMO_FILES = [
    "single_step_tool_use_with_argument_comparison.example.jsonl",
    "single_step_tool_use_with_argument_comparison.parallel_example.jsonl",
    "single_step_tool_use_with_argument_comparison.example_rollouts.jsonl",
    "swe_pivot.example.jsonl",
    "swe_pivot.example_rollouts.jsonl",
    "terminal_multi_harness.example.jsonl",
    "terminal_multi_harness.example_rollouts.jsonl",
    "terminus_judge.example.jsonl",
    "terminus_judge.example_rollouts.jsonl",
]


@pytest.mark.parametrize("name", NEMO_FILES)
def test_nemo_rows_round_trip_field_by_field(tmp_path, shared_data, name):
    src = shared_data / "nemo_gym_pivot_rows" / name
    pivots = load_pivots(src)
    out = tmp_path / "rows.jsonl"
    write_pivots(pivots, out, format="nemo-gym")
    original = [row for _, row in iter_jsonl(src)]
    written = [row for _, row in iter_jsonl(out)]
    assert len(written) == len(original)
    for a, b in zip(original, written, strict=True):
        assert set(a) == set(b)
        for key in a:
            assert a[key] == b[key], key
    assert load_pivots(out) == pivots


def test_nemo_parallel_batch_becomes_parallel_tool_calls(shared_data):
    pivots = load_pivots(
        shared_data / "nemo_gym_pivot_rows" / "single_step_tool_use_with_argument_comparison.parallel_example.jsonl"
    )
    batch = [p for p in pivots if len(p.expert.tool_calls) > 1]
    assert batch and all(c.name for c in batch[0].expert.tool_calls)


def test_nemo_function_call_items_become_tool_turns(shared_data):
    pivots = load_pivots(
        shared_data / "nemo_gym_pivot_rows" / "single_step_tool_use_with_argument_comparison.example.jsonl"
    )
    roles = {m.role for p in pivots for m in p.history}
    calls = [m for p in pivots for m in p.history if m.tool_calls]
    answers = [m for p in pivots for m in p.history if m.role == "tool"]
    assert "tool" in roles and calls and answers
    ids = {c.id for m in calls for c in m.tool_calls}
    assert {m.tool_call_id for m in answers} <= ids


def test_modified_pivot_writes_fresh_items(tmp_path, shared_data):
    from dataclasses import replace

    from pivot_envs import Message

    pivots = load_pivots(shared_data / "nemo_gym_pivot_rows" / "swe_pivot.example.jsonl")
    changed = replace(pivots[0], history=pivots[0].history + (Message("user", "one more thing"),))
    out = tmp_path / "rows.jsonl"
    write_pivots([changed], out, format="nemo-gym")
    again = load_pivots(out)[0]
    assert again.history[-1].content == "one more thing" and again.expert == changed.expert


def test_tau_bench_reads_converted_and_original_releases(shared_data):
    converted = load_pivots(shared_data / "tool_use" / "tau_bench_airline_gpt4o.jsonl", successful_only=True)
    original = load_pivots(shared_data / "tool_use" / "raw" / "gpt-4o-airline.sample8.json")
    assert converted and original
    assert all(p.domain == "tool-use" and p.tools for p in converted)
    assert all(p.context["trajectory_reward"] == 1.0 for p in converted)


def test_pivot_jsonl_round_trip(tmp_path):
    import gymnasium as gym

    pivots = gym.make("pivot/tool-use-v0").unwrapped.pivots
    out = tmp_path / "p.jsonl"
    assert write_pivots(pivots, out) == len(pivots)
    assert load_pivots(out) == pivots


def test_corrupt_jsonl_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    good = json.dumps({"id": "a", "messages": [{"role": "user", "content": "x"}]})
    bad.write_text(good + "\n\n" + '{"id": "b", "messages": [\n')
    with pytest.raises(DataFileError) as e:
        load_pivots(bad)
    assert e.value.path == str(bad) and e.value.line == 3
    assert f"{bad}:3" in str(e.value)


def test_invalid_record_names_file_line_and_field(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "a", "messages": [{"role": "robot", "content": "x"}]}) + "\n")
    with pytest.raises(DataFileError, match=r"bad.jsonl:1: .*messages\[0\].*Message.role"):
        load_pivots(bad)


def test_unknown_format_lists_choices(tmp_path):
    f = tmp_path / "x.jsonl"
    f.write_text('{"what": 1}\n')
    with pytest.raises(UnknownFormat, match="pass format="):
        load_pivots(f)
    with pytest.raises(UnknownFormat, match="Did you mean 'nemo-gym'"):
        load_pivots(f, format="nemo_gym")


def test_empty_file_reads_as_no_pivots(tmp_path):
    out = tmp_path / "none.jsonl"
    assert write_pivots([], out) == 0
    assert load_pivots(out) == []
