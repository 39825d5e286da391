import json
import threading

import gymnasium as gym
import pytest
from typer.testing import CliRunner

import pivot_envs  # noqa: F401
from pivot_cli import app
from pivot_core._render import render_completion
from verifiers_plugins import CachedChain, RewardCache, RewardCacheError, Verdict, VerifierChain, hookimpl


def _env(cache, **kw):
    return gym.make("pivot/tool-use-v0", reward_cache=cache, **kw).unwrapped


def test_cached_results_equal_fresh_ones_and_count_hits(tmp_path):
    cache = RewardCache(tmp_path / "r.sqlite")
    env = _env(cache)
    fresh = _env(None)
    pivot = env.pivots[3]
    completions = [render_completion(pivot.expert, pivot.domain), "nonsense", "", "nonsense"]
    first = env.score(pivot, completions)
    assert cache.misses == 4 and cache.hits == 0
    second = env.score(pivot, completions)
    assert cache.hits == 4
    want = fresh.score(pivot, completions)
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
    a.score(pivot, [text])
    strict = _env(cache, verifier_config={"string_similarity": {"threshold": 0.99}})
    [r] = strict.score(pivot, [text])
    assert cache.misses == 2 and not r.accepted  # another config: no stale verdict

    class V2:
        role, cost, deterministic, version = "acceptor", "cheap", True, "v2-of-the-test"

        def verify(self, pivot, action):
            from verifiers_plugins import Verdict

            return Verdict.accept("v2")

    chain_v2 = VerifierChain([("string_similarity", V2())])
    chain_v1 = VerifierChain.from_names(["string_similarity"])
    assert chain_v1.config_hash() != chain_v2.config_hash()
    CachedChain(chain_v2, cache).verify_batch(pivot, [a.parse(text)])
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
    env.score(env.pivots[0], ["x"])
    assert flagged.stats()["nondeterministic_entries"] == 1
    skipping = RewardCache(tmp_path / "b.sqlite", nondeterministic=False)
    env = _env(skipping, verifiers=["coin"])
    env.score(env.pivots[0], ["x"])
    env.score(env.pivots[0], ["x"])
    assert skipping.stats()["entries"] == 0 and skipping.hits == 0


def test_threads_share_one_cache(tmp_path):
    cache = RewardCache(tmp_path / "r.sqlite")
    env = _env(cache)
    errors = []

    def work(i):
        try:
            for p in env.pivots[:6]:
                env.score(p, [f"completion {i % 3}", "same"])
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
    env.score(env.pivots[0], ["a", "b"])
    runner = CliRunner()
    res = runner.invoke(app, ["cache", "stats", "--cache", str(path), "--json"])
    assert res.exit_code == 0, res.output
    stats = json.loads(res.stdout)
    assert stats["entries"] == 2 and stats["nondeterministic_entries"] == 0 and stats["pivots"] == 1
    res = runner.invoke(app, ["cache", "clear", "--cache", str(path), "--json"])
    assert json.loads(res.stdout)["deleted"] == 2
    assert RewardCache(path).stats()["entries"] == 0


class Flaky:
    """An acceptor whose backend is down until `up` is set (a Docker daemon that was unreachable)."""

    role, cost, deterministic, version = "acceptor", "cheap", True, "1"
    up = False

    def verify(self, pivot, action):
        if not Flaky.up:
            raise ConnectionError("daemon unreachable")
        return Verdict.accept("daemon back")


@pytest.fixture
def flaky(fresh_host):
    class Plugin:
        @hookimpl
        def register_verifiers(self, register):
            register("flaky", Flaky)

    Flaky.up = False
    fresh_host.register_plugin(Plugin(), name="flaky")
    return Flaky


def test_an_error_is_never_cached_so_a_rerun_with_the_backend_back_scores(tmp_path, flaky):
    path = tmp_path / "r.sqlite"
    env = _env(RewardCache(path), verifiers=["flaky"])
    [down] = env.score(env.pivots[0], ["x"])
    assert down.error and "daemon unreachable" in down.error
    assert RewardCache(path).stats()["entries"] == 0
    flaky.up = True
    [back] = _env(RewardCache(path), verifiers=["flaky"]).score(env.pivots[0], ["x"])
    assert back.accepted and back.error is None


def test_a_cache_that_cannot_be_written_degrades_to_uncached_with_one_warning(tmp_path, flaky):
    flaky.up = True
    cache = RewardCache(tmp_path / "r.sqlite")
    pages = cache._db.execute("PRAGMA page_count").fetchone()[0]
    cache._db.execute(f"PRAGMA max_page_count = {pages}")  # SQLite's own "database or disk is full"
    env = _env(cache, verifiers=["flaky"])
    with pytest.warns(RuntimeWarning, match="cannot write") as caught:
        results = [env.score(p, [f"x{i}" * 200, "y"]) for i, p in enumerate(env.pivots[:40])]
    assert len([w for w in caught if "cannot write" in str(w.message)]) == 1
    assert all(r.accepted for group in results for r in group) and not cache.writable


def test_a_corrupt_row_is_a_miss_and_a_corrupt_file_names_its_path(tmp_path, flaky):
    flaky.up = True
    path = tmp_path / "r.sqlite"
    cache = RewardCache(path)
    env = _env(cache, verifiers=["flaky"])
    env.score(env.pivots[0], ["x", "y"])
    rows = cache._db.execute("SELECT completion_hash FROM verdicts").fetchall()
    bad = json.dumps({"reward": 7.0, "accepted": True, "decided_by": "flaky", "verdicts": {}})
    cache._db.execute("UPDATE verdicts SET result=? WHERE completion_hash=?", (bad, rows[0][0]))
    cache._db.execute("UPDATE verdicts SET result='{not json' WHERE completion_hash=?", (rows[1][0],))
    cache._db.commit()
    with pytest.warns(RuntimeWarning, match="unreadable row"):
        again = env.score(env.pivots[0], ["x", "y"])
    assert [r.reward for r in again] == [1.0, 1.0] and cache.hits == 0
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not a database" * 100)
    with pytest.raises(RewardCacheError, match="garbage.sqlite"):
        RewardCache(garbage)


def test_the_cached_chain_parses_once_and_has_the_chains_interface(tmp_path, monkeypatch):
    env = _env(RewardCache(tmp_path / "r.sqlite"))
    assert isinstance(env.chain, CachedChain)
    assert env.chain.names == env.chain.chain.names and env.chain.config_hash() == env.chain.chain.config_hash()
    calls = []
    parse = env.parse
    monkeypatch.setattr(env, "parse", lambda text: calls.append(text) or parse(text))
    pivot = env.pivots[3]
    env.reset(options={"pivot_id": pivot.id})
    env.step(render_completion(pivot.expert, pivot.domain))
    env.score(pivot, ["a", "b"])
    assert len(calls) == 3  # one parse per completion, in step and in score alike
