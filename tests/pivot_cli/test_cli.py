import json
import subprocess
import sys

import gymnasium as gym
from typer.testing import CliRunner

from pivot_cli import app
from pivot_envs import load_pivots, render_completion

runner = CliRunner()


def run(*args, input=None):
    result = runner.invoke(app, list(args), input=input)
    return result.exit_code, result.stdout, result.stderr


def test_envs_json_lists_four_ids_with_counts_and_chains():
    code, out, _ = run("envs", "--json")
    assert code == 0
    envs = {e["id"]: e for e in json.loads(out)["envs"]}
    assert set(envs) == {"pivot/tool-use-v0", "pivot/swe-v0", "pivot/terminal-v0", "pivot/browse-v0"}
    assert all(e["pivots"] > 0 and e["chain"] for e in envs.values())


def test_plugins_json_lists_builtins_with_distribution():
    code, out, _ = run("plugins", "--json")
    rows = json.loads(out)["plugins"]
    assert code == 0
    assert {"verifier", "parser"} <= {r["kind"] for r in rows}
    assert all(r["distribution"] == "pivot-gym" for r in rows if r["name"] == "tool_args")


def test_convert_then_verify_round_trip(tmp_path, shared_data):
    out = tmp_path / "pivots.jsonl"
    code, stdout, _ = run(
        "convert",
        str(shared_data / "tool_use" / "tau_bench_airline_gpt4o.jsonl"),
        str(out),
        "--from",
        "tau-bench",
        "--successful-only",
        "--json",
    )
    assert code == 0
    summary = json.loads(stdout)
    pivots = load_pivots(out)
    assert summary["pivots"] == len(pivots) > 100
    pivot = next(p for p in pivots if p.expert.tool_calls)
    completion = tmp_path / "c.txt"
    completion.write_text(render_completion(pivot.expert, pivot.domain))
    code, stdout, _ = run(
        "verify",
        "--env",
        "pivot/tool-use-v0",
        "--dataset",
        str(out),
        "--pivot",
        pivot.id,
        "--completion",
        str(completion),
        "--json",
    )
    assert code == 0 and json.loads(stdout)["reward"] == 1.0
    code, stdout, _ = run(
        "verify",
        "--env",
        "pivot/tool-use-v0",
        "--dataset",
        str(out),
        "--pivot",
        pivot.id,
        "--completion",
        "-",
        "--json",
        input="I cannot help with that.",
    )
    verdict = json.loads(stdout)
    assert code == 0 and verdict["reward"] == 0.0 and verdict["decided_by"] == "turn_kind"


def test_convert_to_nemo_gym(tmp_path):
    src = tmp_path / "p.jsonl"
    from pivot_envs import write_pivots

    write_pivots(gym.make("pivot/swe-v0").unwrapped.pivots, src)
    code, _, _ = run("convert", str(src), str(tmp_path / "rows.jsonl"), "--to", "nemo-gym")
    assert code == 0
    assert load_pivots(tmp_path / "rows.jsonl", format="nemo-gym")


def test_select_reports_kept_and_dropped(tmp_path):
    from dataclasses import replace

    from pivot_envs import Profile, write_pivots

    pivots = gym.make("pivot/swe-v0").unwrapped.pivots[:3]
    profiled = [replace(p, profile=Profile(2, r)) for p, r in zip(pivots, [(0, 0), (1, 0), (1, 1)], strict=True)]
    write_pivots(profiled, tmp_path / "prof.jsonl")
    code, out, _ = run("select", str(tmp_path / "prof.jsonl"), str(tmp_path / "adv.jsonl"), "--lam", "0.9", "--json")
    summary = json.loads(out)
    assert code == 0 and summary["kept"] == 1
    assert summary["zero_variance_all_fail"] == 1 and summary["zero_variance_all_pass"] == 1
    assert [p.id for p in load_pivots(tmp_path / "adv.jsonl")] == [pivots[1].id]


def test_errors_exit_nonzero_with_file_and_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "messages": []}\nnot json\n')
    code, _, err = run("convert", str(bad), str(tmp_path / "o.jsonl"))
    assert code == 1 and f"{bad}:2" in err
    code, _, err = run("verify", "--env", "pivot/swe-v0", "--pivot", "nope", "--completion", "-", input="x")
    assert code == 1 and "expected a pivot id" in err


def test_module_entry_point_runs():
    proc = subprocess.run(
        [sys.executable, "-m", "pivot_cli", "envs", "--json"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)["envs"]) == 4


def test_tables_in_a_pipe_print_every_name_whole():
    import os
    import subprocess
    import sys

    from verifiers_plugins import get_host

    # a real pipe, 40 columns asked for: rich alone would cut names to "bars_always_…"
    out = subprocess.run(
        [sys.executable, "-m", "pivot_cli", "plugins"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "40"},
        check=True,
    ).stdout
    assert "…" not in out
    for name in get_host().registry("verifiers"):
        assert name in out.split(), name
    assert "sandbox" in out.split()


def test_importing_the_cli_builds_no_app():
    import subprocess
    import sys

    code = "import pivot_cli as c, sys; print('pivot_cli._train' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"
