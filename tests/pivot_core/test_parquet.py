"""Parquet pivot files: round trip, lazy env datasets, a generated 1M-pivot file, bad files."""

from __future__ import annotations

import json
import subprocess
import sys

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from typer.testing import CliRunner

import pivot_envs
from pivot_cli import app
from pivot_core._parquet import ParquetPivots, ParquetPivotWriter
from pivot_core._pivotseq import PivotSequence
from pivot_envs import DataFileError, Message, Pivot, ToolCall, UnknownPivot, detect_format, load_pivots, write_pivots
from pivot_envs._env import bundled_paths

BUNDLED = [
    "tool_use_nemo.jsonl",
    "tool_use_tau_airline.jsonl",
    "swe_nemo.jsonl",
    "terminal_nemo.jsonl",
    "browse_react.jsonl",
    "swe_mini_swe_agent.jsonl",
]


@pytest.fixture(scope="module")
def bundled_pivots() -> list[Pivot]:
    return [p for path in bundled_paths(BUNDLED) for p in load_pivots(path)]


def test_round_trip_every_bundled_pivot(tmp_path, bundled_pivots):
    out = tmp_path / "all.parquet"
    # A tiny row group so the file has many of them and reads cross row-group boundaries.
    with ParquetPivotWriter(out, row_group_size=3) as writer:
        for p in bundled_pivots:
            writer.write(p)
    assert detect_format(out).name == "parquet"
    assert load_pivots(out) == bundled_pivots
    lazy = ParquetPivots(out)
    assert len(lazy) == len(bundled_pivots)
    assert [lazy[i] for i in range(len(lazy) - 1, -1, -1)] == bundled_pivots[::-1]
    assert lazy[-1] == bundled_pivots[-1] and lazy[2:5] == bundled_pivots[2:5]
    for i, p in enumerate(bundled_pivots):
        assert lazy.find(p.id) == i
    assert lazy.find("no such pivot") is None
    with pytest.raises(IndexError):
        lazy[len(lazy)]


def test_convert_to_parquet_then_env_holds_a_lazy_sequence(tmp_path):
    src = bundled_paths(["terminal_nemo.jsonl"])[0]
    out = tmp_path / "terminal.parquet"
    result = CliRunner().invoke(app, ["convert", str(src), str(out), "--to", "parquet", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["pivots"] == len(load_pivots(src))

    env = gym.make("pivot/terminal-v0", dataset=str(out))
    pivots = env.unwrapped.pivots
    assert isinstance(pivots, PivotSequence)
    expected = load_pivots(src)
    obs, info = env.reset(options={"pivot_id": expected[1].id})
    assert info["index"] == 1 and obs["pivot_id"] == expected[1].id
    # The expert's own completion scores the same as with the JSONL dataset.
    jsonl_env = gym.make("pivot/terminal-v0", dataset=str(src))
    jsonl_env.reset(options={"pivot_id": expected[1].id})
    completion = pivot_envs.render_completion(expected[1].expert, "terminal")
    assert env.step(completion)[1] == jsonl_env.step(completion)[1]
    check_env(env.unwrapped, skip_render_check=True)


def _tiny_pivot_json() -> str:
    template = Pivot(
        id="@ID@",
        domain="tool-use",
        history=(Message("system", "You are an airline agent."), Message("user", "Cancel @ID@.")),
        expert=Message("assistant", None, (ToolCall("cancel_reservation", '{"reservation_id": "@ID@"}', "c0"),)),
        tools=(
            {
                "type": "function",
                "function": {
                    "name": "cancel_reservation",
                    "parameters": {"type": "object", "properties": {"reservation_id": {"type": "string"}}},
                },
            },
        ),
    )
    return json.dumps(template.to_json())


@pytest.mark.slow
def test_one_million_pivot_file_resets(tmp_path):
    n = 1_000_000
    path = tmp_path / "million.parquet"
    text = _tiny_pivot_json()
    with ParquetPivotWriter(path) as writer:
        for start in range(0, n, 250_000):  # bounded chunks keep the generator's memory small
            ids = [f"gen/{i}#2" for i in range(start, start + 250_000)]
            writer.write_rows(ids, ["tool-use"] * len(ids), [text.replace("@ID@", i) for i in ids])
    assert writer.count == n

    env = gym.make("pivot/tool-use-v0", dataset=str(path))
    u = env.unwrapped
    assert len(u.pivots) == n
    _, info = env.reset(seed=7)
    assert info["num_pivots"] == n and u.current.id == f"gen/{info['index']}#2"
    obs, info = env.reset(options={"pivot_id": "gen/765432#2"})
    assert info["index"] == 765432 and "gen/765432" in obs["messages"][-1]["content"]
    _, reward, terminated, _, step_info = env.step(pivot_envs.render_completion(u.current.expert, "tool-use"))
    assert reward == 1.0 and terminated and step_info["accepted"]
    with pytest.raises(UnknownPivot, match="Did you mean 'gen/765432#2'"):
        env.reset(options={"pivot_id": "gen/765432#3"})
    # The lazy view never built a pivot per row nor an id dict.
    assert not isinstance(u._index, dict) and len(u.pivots._cache) <= u.pivots._cache_size


def test_bad_files_name_the_problem(tmp_path):
    fake = tmp_path / "fake.parquet"
    fake.write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(DataFileError, match="fake.parquet"):
        load_pivots(fake)
    bad_row = tmp_path / "bad_row.parquet"
    good = _tiny_pivot_json().replace("@ID@", "ok#1")
    with ParquetPivotWriter(bad_row) as writer:
        writer.write_rows(["ok#1", "bad#1"], ["tool-use"] * 2, [good, "{not json"])
    lazy = ParquetPivots(bad_row)
    assert lazy[0].id == "ok#1"
    with pytest.raises(DataFileError, match=r"bad_row.parquet: row 1: invalid JSON"):
        lazy[1]
    with pytest.raises(DataFileError, match="expected columns"):
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"x": [1]}), tmp_path / "other.parquet")
        ParquetPivots(tmp_path / "other.parquet")


def test_write_pivots_parquet_and_import_stays_light(tmp_path, bundled_pivots):
    assert write_pivots(bundled_pivots[:4], tmp_path / "four.parquet", format="parquet") == 4
    code = "import sys, pivot_envs; print('pyarrow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_dataset_mixing_jsonl_and_parquet_chains_them(tmp_path):
    jsonl = bundled_paths(["swe_nemo.jsonl"])[0]
    parquet = tmp_path / "mini.parquet"
    write_pivots(load_pivots(bundled_paths(["swe_mini_swe_agent.jsonl"])[0]), parquet, format="parquet")
    expected = load_pivots(jsonl) + load_pivots(parquet)
    env = gym.make("pivot/swe-v0", dataset=[str(jsonl), str(parquet)])
    pivots = env.unwrapped.pivots
    assert isinstance(pivots, PivotSequence) and list(pivots) == expected
    for i in (0, len(expected) - 1):
        _, info = env.reset(options={"pivot_id": expected[i].id})
        assert info["index"] == i
