import json
import os
import subprocess
import sys
import time

import gymnasium as gym
import pytest
from typer.testing import CliRunner

import pivot_envs  # noqa: F401
from pivot_cli import app
from pivot_envs import load_pivots, select_pivots
from trainers.backends import TransformersBackend
from trainers.profiling import ProfileConfig, completed_ids, profile_pivots
from verifiers_plugins import RewardCache

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _profile_args(policy, out, cache, *extra):
    # The prompt cuts and completion budget the tiny policy was trained with.
    return [
        "profile",
        "--env",
        "pivot/tool-use-v0",
        "--model",
        str(policy.path),
        "--k",
        "4",
        "--out",
        str(out),
        "--max-history",
        str(policy.max_history_messages),
        "--max-prompt-tokens",
        str(policy.max_prompt_tokens),
        "--max-new-tokens",
        str(policy.max_new_tokens),
        "--temperature",
        str(policy.temperature),
        "--seed",
        "0",
        "--cache",
        str(cache),
        *extra,
    ]


@pytest.mark.slow
def test_profile_gives_mixed_outcomes_select_keeps_the_mixed_and_rerun_hits_the_cache(tiny_policy, tmp_path):
    runner = CliRunner()
    cache = tmp_path / "rewards.sqlite"
    res = runner.invoke(app, [*_profile_args(tiny_policy, tmp_path / "p1.jsonl", cache), "--json"])
    assert res.exit_code == 0, res.output
    first = json.loads(res.stdout)
    n = len(gym.make("pivot/tool-use-v0").unwrapped.pivots)
    assert first["pivots"] == first["profiled"] == n and first["resumed"] == 0
    assert first["guard_issues"] == [] and first["nondeterministic"] is False
    assert first["all_zero"] > 0 and first["all_one"] > 0 and first["mixed"] > 0, first
    assert first["cache_misses"] == 4 * n - first["cache_hits"] and first["cache_misses"] > 0
    profiled = load_pivots(tmp_path / "p1.jsonl")
    assert sorted(p.id for p in profiled) == sorted({p.id for p in profiled})
    assert all(p.profile.k == 4 and p.profile.verifier_hash == first["verifier_hash"] for p in profiled)
    assert all(p.profile.policy_id == first["policy_id"] for p in profiled)

    # select keeps exactly the mixed pivots under lambda (lam=1 keeps every mixed one).
    mixed = {p.id for p in profiled if p.profile.outcome == "mixed"}
    for lam in (1.0, 0.5):
        res = runner.invoke(
            app, ["select", "--lam", str(lam), str(tmp_path / "p1.jsonl"), str(tmp_path / "adv.jsonl"), "--json"]
        )
        assert res.exit_code == 0, res.output
        lines = (tmp_path / "adv.jsonl").read_text().splitlines()  # may be empty: load_pivots refuses that
        kept = {json.loads(line)["id"] for line in lines}
        assert json.loads(res.stdout)["kept"] == len(kept)
        assert kept == {p.id for p in profiled if p.id in mixed and p.profile.mean < lam}
    assert {p.id for p in select_pivots(profiled, 1.0).kept} == mixed

    # The same seed samples the same completions: every verdict of the rerun is a cache hit.
    res = runner.invoke(app, [*_profile_args(tiny_policy, tmp_path / "p2.jsonl", cache), "--json"])
    second = json.loads(res.stdout)
    assert second["cache_hits"] == 4 * n and second["cache_misses"] == 0
    assert [p.profile.rewards for p in load_pivots(tmp_path / "p2.jsonl")] == [p.profile.rewards for p in profiled]

    res = runner.invoke(app, ["report", str(tmp_path / "p1.jsonl"), "--plot", str(tmp_path / "h.png"), "--json"])
    rows = {r["domain"]: r for r in json.loads(res.stdout)["domains"]}
    assert rows["tool-use"]["pivots"] == n and rows["tool-use"]["mixed"] == len(mixed)
    assert rows["tool-use"]["all_zero"] == pytest.approx(first["all_zero"] / n)
    assert (tmp_path / "h.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_profiling_resumes_after_a_kill_and_writes_every_pivot_once(tiny_policy, tmp_path):
    out, cache = tmp_path / "p.jsonl", tmp_path / "c.sqlite"
    args = _profile_args(tiny_policy, out, cache, "--limit", "8", "--chunk-size", "1", "--json")
    env = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pivot_cli", *args],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 600
    while not (out.exists() and out.read_bytes().count(b"\n") >= 2):
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        assert time.monotonic() < deadline
        time.sleep(0.02)
    proc.kill()  # SIGKILL: no cleanup, possibly mid-write
    proc.wait()
    proc.stderr.close()
    at_kill = len(completed_ids(out))
    assert 2 <= at_kill < 8
    with out.open("a") as f:
        f.write('{"id": "torn')  # what a write cut by the kill looks like
    backend = TransformersBackend(tiny_policy.backend_config())
    e = gym.make("pivot/tool-use-v0", reward_cache=RewardCache(cache))
    config = ProfileConfig(
        k=4, max_new_tokens=tiny_policy.max_new_tokens, temperature=tiny_policy.temperature, chunk_size=1, limit=8
    )
    summary = profile_pivots(e, backend, out, config)
    assert summary.resumed == at_kill and summary.profiled == 8 - at_kill
    ids = [p.id for p in load_pivots(out)]
    assert len(ids) == 8 and len(set(ids)) == 8
    assert ids == [p.id for p in e.unwrapped.pivots[:8]]


def test_resuming_with_another_policy_or_k_is_refused(tiny_policy, tmp_path):
    out = tmp_path / "p.jsonl"
    e = gym.make("pivot/tool-use-v0")
    backend = TransformersBackend(tiny_policy.backend_config())
    profile_pivots(e, backend, out, ProfileConfig(k=1, max_new_tokens=8, limit=1))
    with pytest.raises(ValueError, match="cannot resume"):
        profile_pivots(e, backend, out, ProfileConfig(k=2, max_new_tokens=8, limit=2))
    assert len(completed_ids(out)) == 1


def test_profile_cli_names_a_missing_model_folder(tmp_path):
    res = CliRunner().invoke(
        app,
        [
            "profile",
            "--env",
            "pivot/tool-use-v0",
            "--model",
            str(tmp_path / "nope"),
            "--out",
            str(tmp_path / "p.jsonl"),
        ],
    )
    assert res.exit_code == 1 and "config.json" in res.output
