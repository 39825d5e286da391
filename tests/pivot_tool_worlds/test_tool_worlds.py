"""Tool worlds: copy-on-write state, the airline tools, replay fidelity, the bundled subset, the CLI."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from pivot_tool_worlds import WorldState, locate_db, replay_trajectories, tau_airline
from pivot_tool_worlds import _tau_airline as airline_module
from pivot_tool_worlds._tau_airline import SUBSET_FILE, _bundled
from pivot_tool_worlds.errors import WorldDataError
from verifiers_plugins import get_host

AIRLINE = "tool_use/tau_bench_airline_gpt4o.jsonl"
EXEC_SAMPLE = _bundled("tool_use_tau_airline_exec.jsonl")


def _recorded_pairs(path):
    """(trajectory id, name, arguments, recorded output) straight from the JSONL, paired by position."""
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        messages = record["messages"]
        calls = []
        for i, m in enumerate(messages):
            for j, tc in enumerate(m.get("tool_calls") or []):
                result = messages[i + 1 + j]
                assert result["role"] == "tool"
                calls.append((tc["function"]["name"], tc["function"]["arguments"], result["content"]))
        yield record["id"], calls


def _same(recorded, replayed):
    try:
        return json.loads(recorded) == json.loads(replayed)
    except ValueError:
        return recorded.strip() == replayed.strip()


def test_every_recorded_airline_call_replays_exactly(shared_data):
    world = tau_airline(shared_data / "tool_use" / "tau_bench_airline_db")
    calls = matched = trajectories = 0
    for _, recorded in _recorded_pairs(shared_data / AIRLINE):
        trajectories += 1
        state = world.initial_state()
        for name, arguments, output in recorded:
            outcome, state = world.step(state, name, arguments)
            calls += 1
            matched += _same(output, outcome.output)
    assert trajectories == 192 and calls == 1141
    assert matched == calls


def test_replay_report_and_cli_agree_with_the_independent_count(shared_data):
    from pivot_cli import app
    from pivot_core._formats import get_format

    path = shared_data / AIRLINE
    report = replay_trajectories(tau_airline(), get_format("tau-bench").read_trajectories(path, {}))
    assert (report.calls, report.matched, report.mismatches) == (1141, 1141, ())
    result = CliRunner().invoke(app, ["tools", "replay", "--world", "tau-airline", str(path), "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["calls"] == 1141 and payload["matched"] == 1141 and payload["mismatches"] == []


def test_replay_never_mutates_the_initial_tables(shared_data):
    world = tau_airline(shared_data / "tool_use" / "tau_bench_airline_db")
    before = json.dumps(world.tables, sort_keys=True)
    for _, recorded in _recorded_pairs(shared_data / AIRLINE):
        state = world.initial_state()
        for name, arguments, _ in recorded:
            _, state = world.step(state, name, arguments)
    assert json.dumps(world.tables, sort_keys=True) == before


def test_bundled_subset_reproduces_the_bundled_trajectories(monkeypatch):
    monkeypatch.setattr(airline_module, "_shared_db", lambda: None)
    monkeypatch.delenv("PIVOT_TAU_AIRLINE_DB", raising=False)
    path, kind = locate_db()
    assert kind == "subset" and path.name == SUBSET_FILE
    world = tau_airline()
    calls = matched = 0
    for _, recorded in _recorded_pairs(EXEC_SAMPLE):
        state = world.initial_state()
        for name, arguments, output in recorded:
            outcome, state = world.step(state, name, arguments)
            calls += 1
            matched += _same(output, outcome.output)
    assert calls == 34 and matched == calls
    assert set(get_host().registry("tool_worlds")) >= {"tau-airline"}


def test_db_location_env_var_and_clear_errors(monkeypatch, tmp_path):
    monkeypatch.setenv("PIVOT_TAU_AIRLINE_DB", str(_bundled(SUBSET_FILE)))
    assert locate_db() == (_bundled(SUBSET_FILE), "subset")
    monkeypatch.setenv("PIVOT_TAU_AIRLINE_DB", str(tmp_path / "missing"))
    with pytest.raises(WorldDataError, match="PIVOT_TAU_AIRLINE_DB"):
        locate_db()
    bad = tmp_path / "db.json"
    bad.write_text('{"flights": {}}')
    with pytest.raises(WorldDataError, match="missing"):
        tau_airline(bad)


def test_copy_on_write_forks_share_records_until_edited():
    base = {"users": {"u1": {"amount": 10, "tags": ["a"]}, "u2": {"amount": 5, "tags": []}}}
    root = WorldState(base)
    a, b = root.fork(), root.fork()
    a.edit("users", "u1")["amount"] = 3
    b.put("users", "u3", {"amount": 1, "tags": []})
    b.delete("users", "u2")
    assert base["users"]["u1"]["amount"] == 10 and root.get("users", "u1")["amount"] == 10
    assert a.changes_since(root) == {"users/u1": {"amount": 3, "tags": ["a"]}}
    assert b.changes_since(root) == {"users/u3": {"amount": 1, "tags": []}, "users/u2": None}
    assert [k for k, _ in b.items("users")] == ["u1", "u3"]
    c = a.fork()
    assert c.get("users", "u1") is a.get("users", "u1")  # shared until c edits it
    c.edit("users", "u1")["tags"].append("b")
    assert a.get("users", "u1")["tags"] == ["a"] and c.changes_since(a) == {
        "users/u1": {"amount": 3, "tags": ["a", "b"]}
    }


def test_bad_calls_become_error_outputs_and_change_nothing():
    world = tau_airline(_bundled(SUBSET_FILE))
    state = world.initial_state()
    cases = {
        ("no_such_tool", "{}"): "Error: unknown tool 'no_such_tool'",
        ("calculate", "{not json"): "Error: arguments are not valid JSON",
        ("calculate", '{"expression": "__import__(\'os\')"}'): "Error: invalid characters in expression",
        ("calculate", '{"expression": "1/0"}'): "Error: division by zero",
        ("calculate", '{"expression": "2 +"}'): "Error: invalid syntax",
        ("get_user_details", "{}"): "Error: get_user_details() invalid argument: 'user_id' is a required",
        ("get_user_details", '{"user_id": "x", "extra": 1}'): "Error: get_user_details() got unexpected",
        ("cancel_reservation", '{"reservation_id": "NOPE00"}'): "Error: reservation not found",
        (
            "book_reservation",
            json.dumps(
                {
                    "user_id": "nobody",
                    "origin": "JFK",
                    "destination": "SEA",
                    "flight_type": "one_way",
                    "cabin": "economy",
                    "flights": [],
                    "passengers": [],
                    "payment_methods": [],
                    "total_baggages": 0,
                    "nonfree_baggages": 0,
                    "insurance": "no",
                }
            ),
        ): "Error: user not found",
    }
    for (name, arguments), prefix in cases.items():
        outcome, after = world.step(state, name, arguments)
        assert outcome.error and outcome.output.startswith(prefix), (name, outcome.output)
        assert after is state and not outcome.changes
    outcome, _ = world.step(state, "calculate", '{"expression": "(152 + 103) * 1.5 / 2"}')
    assert outcome.output == "191.25" and not outcome.error


def test_convert_attaches_the_world_and_tools_list(tmp_path):
    from pivot_cli import app
    from pivot_envs import load_pivots

    out = tmp_path / "pivots.jsonl"
    runner = CliRunner()
    result = runner.invoke(app, ["convert", str(EXEC_SAMPLE), str(out), "--from", "tau-bench", "--json"])
    assert result.exit_code == 0, result.output
    pivots = load_pivots(out)
    assert pivots and all(p.context["world"] == "tau-airline" for p in pivots)
    listed = runner.invoke(app, ["tools", "list", "--json"])
    assert listed.exit_code == 0 and "tau-airline" in [w["name"] for w in json.loads(listed.output)["worlds"]]
    missing = runner.invoke(app, ["tools", "replay", "--world", "tau-airlin", str(EXEC_SAMPLE)])
    assert missing.exit_code == 1 and "tau-airline" in missing.output
