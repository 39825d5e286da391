"""`tau-airline-demo`: the airline world on one bundled slice of its database, the same on every install."""

from __future__ import annotations

import gzip
import json

import pytest

from pivot_tool_worlds import _tau_airline as airline_module
from pivot_tool_worlds import tau_airline, tau_airline_demo
from pivot_tool_worlds._tau_airline import DEMO_FILE, _bundled, load_tables
from pivot_tool_worlds.errors import WorldDataError
from verifiers_plugins import get_host


def test_the_demo_world_is_the_bundled_slice_whatever_else_is_installed(monkeypatch, tmp_path):
    world = tau_airline_demo()
    assert world.name == "tau-airline-demo" and world.description.startswith("demo:")
    assert {t: len(v) for t, v in world.tables.items()} == {"flights": 48, "reservations": 422, "users": 100}
    # every reservation a demo user holds is in the slice: a conversation never meets "not found"
    held = world.tables["reservations"]
    assert all(r in held for u in world.tables["users"].values() for r in u["reservations"])
    # neither the full database (../shared) nor PIVOT_TAU_AIRLINE_DB moves it; they move `tau-airline`
    monkeypatch.setattr(airline_module, "_shared_db", lambda: None)
    monkeypatch.setenv("PIVOT_TAU_AIRLINE_DB", str(_bundled("tau_airline_db_subset.json")))
    assert tau_airline_demo().fingerprint == world.fingerprint != tau_airline().fingerprint
    assert get_host().get("tool_worlds", "tau-airline-demo")().fingerprint == world.fingerprint


def test_a_gzipped_database_is_read_and_one_that_inflates_past_the_cap_is_an_error(monkeypatch, tmp_path):
    tables = {t: dict(v) for t, v in load_tables(str(_bundled(DEMO_FILE))).items()}
    packed = tmp_path / "db.json.gz"
    packed.write_bytes(gzip.compress(json.dumps(tables).encode()))
    assert tau_airline(packed).tables["users"] == tables["users"]
    # 40 KB on disk, megabytes inflated: the cap holds for what is inflated, not only what is read
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b'{"users": "' + b"a" * 5_000_000 + b'"}'))
    monkeypatch.setenv("PIVOT_MAX_DATA_BYTES", "1000000")
    with pytest.raises(WorldDataError, match="bomb.json.gz.*gunzipped file larger than 1,000,000 bytes"):
        tau_airline(bomb)
    broken = tmp_path / "broken.json.gz"
    broken.write_bytes(gzip.compress(b'{"users": {}}')[:-6])
    with pytest.raises(WorldDataError, match="broken.json.gz"):
        tau_airline(broken)


def test_the_demo_data_is_written_in_the_demo_world_and_its_experts_score_1(tmp_path):
    import gymnasium as gym

    import pivot_envs  # noqa: F401
    from pivot_core import render_completion
    from pivot_demo.config import synthetic_data
    from pivot_envs import load_pivots

    pivots = load_pivots(synthetic_data(12, tmp_path / "synthetic.jsonl"))
    calls = [p for p in pivots if p.expert.tool_calls]
    assert calls and {p.context["world"] for p in pivots} == {"tau-airline-demo"}
    env = gym.make("pivot/tool-use-v0", pivots=calls).unwrapped
    scored = [env.score(p, [render_completion(p.expert, p.domain)])[0] for p in calls]
    assert all(r.accepted and r.decided_by == "tool_exec" for r in scored), [r.verdicts for r in scored]
