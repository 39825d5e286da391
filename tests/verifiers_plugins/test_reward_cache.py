import json
import threading

import gymnasium as gym
from typer.testing import CliRunner

import pivot_envs  # noqa: F401
from pivot_envs._render import render_completion
from pivot_envs.cli import app
from verifiers_plugins import RewardCache, VerifierChain, hookimpl


def _env(cache, **kw):
    return gym.make("pivot/tool-use-v0", reward_cache=cache, **kw).unwrapped


def test_cached_results_equal_fresh_ones_and_count_hits(tmp_path):
    cache = RewardCache(tmp_path / "r.sqlite")
    env = _env(cache)
    fresh = _env(None)
    pivot = env.pivots[3]
    completions = [render_completion(pivot.expert, pivot.domain), "nonsense", "", "nonsense"]
    first = env.score(pivot.id, completions)
    assert cache.misses == 4 and cache.hits == 0
    second = env.score(pivot.id, completions)
    assert cache.hits == 4
    want = fresh.score(pivot.id, completions)
    assert [r.to_json() for r in first] == [r.to_json() for r in second] == [r.to_json() for r in want]
    assert cache.stats()["entries"] == 3  # the repeated completion is one entry
    env.reset(options={"pivot_id": pivot.id})
    _, reward, *_ = env.step(completions[0])
    assert reward == 1.0 and cache.hits == 5


def test_key_covers_verifier_config_version_and_pivot(tmp_path):
    cache = RewardCache(tmp_path / "r.sqlite")
    a = _env(cache)
    pivot = next(p for p in a.pivots if not p.expert.is_tool_call)
    text = pivot.expert.content[: len(pivot.expert.content) * 9 // 10]
    a.score(pivot.id, [text])
    strict = _env(cache, verifier_config={"string_similarity": {"threshold": 0.99}})
    [r] = strict.score(pivot.id, [text])
    assert cache.misses == 2 and not r.accepted  # another config: no stale verdict

    class V2:
        role, cost, deterministic, version = "acceptor", "cheap", True, "2"

        def verify(self, pivot, action):
            from verifiers_plugins import Verdict

            return Verdict.accept("v2")

    chain_v2 = VerifierChain([("string_similarity", V2())])
    chain_v1 = VerifierChain.from_names(["string_similarity"])
    assert chain_v1.config_hash() != chain_v2.config_hash()
    cache.score(chain_v2, pivot, [text], a.parse, a.parser_name)
    assert cache.misses == 3


def test_nondeterministic_chains_are_flagged_or_skipped(tmp_path, fresh_host):
    class Coin:
        role, cost, deterministic, version = "acceptor", "judge", False, "1"

        def verify(self, pivot, action):
            from verifiers_plugins import Verdict

            return Verdict.reject("tails")

    class Plugin:
        @hookimpl
        def register_verifiers(self, register):
            register("coin", Coin)

    fresh_host.register_plugin(Plugin(), name="coin")
    flagged = RewardCache(tmp_path / "a.sqlite")
    env = _env(flagged, verifiers=["coin"])
    env.score(env.pivots[0].id, ["x"])
    assert flagged.stats()["nondeterministic_entries"] == 1
    skipping = RewardCache(tmp_path / "b.sqlite", nondeterministic=False)
    env = _env(skipping, verifiers=["coin"])
    env.score(env.pivots[0].id, ["x"])
    env.score(env.pivots[0].id, ["x"])
    assert skipping.stats()["entries"] == 0 and skipping.hits == 0


def test_threads_share_one_cache(tmp_path):
    cache = RewardCache(tmp_path / "r.sqlite")
    env = _env(cache)
    errors = []

    def work(i):
        try:
            for p in env.pivots[:6]:
                env.score(p.id, [f"completion {i % 3}", "same"])
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert cache.hits + cache.misses == 6 * 6 * 2
    assert cache.stats()["entries"] == 6 * 4


def test_cache_cli_stats_and_clear(tmp_path):
    path = tmp_path / "r.sqlite"
    env = _env(RewardCache(path))
    env.score(env.pivots[0].id, ["a", "b"])
    runner = CliRunner()
    res = runner.invoke(app, ["cache", "stats", "--cache", str(path), "--json"])
    assert res.exit_code == 0, res.output
    stats = json.loads(res.stdout)
    assert stats["entries"] == 2 and stats["nondeterministic_entries"] == 0 and stats["pivots"] == 1
    res = runner.invoke(app, ["cache", "clear", "--cache", str(path), "--json"])
    assert json.loads(res.stdout)["deleted"] == 2
    assert RewardCache(path).stats()["entries"] == 0
