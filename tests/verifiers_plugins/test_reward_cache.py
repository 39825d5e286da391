import json
import threading

import gymnasium as gym
import pytest
from typer.testing import CliRunner

import pivot_envs  # noqa: F401
from pivot_cli import app
from pivot_core._render import render_completion
from verifiers_plugins import CachedChain, RewardCache, RewardCacheError, Verdict, VerifierChain, hookimpl
from verifiers_plugins._cache import action_hash


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


def test_nondeterministic_verdicts_are_skipped_unless_opted_in_and_then_flagged(tmp_path, fresh_host):
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
    skipping = RewardCache(tmp_path / "b.sqlite")  # the default: a second run need not agree with the first
    env = _env(skipping, verifiers=["coin"])
    env.score(env.pivots[0], ["x"])
    env.score(env.pivots[0], ["x"])
    assert skipping.stats()["entries"] == 0 and skipping.hits == 0
    flagged = RewardCache(tmp_path / "a.sqlite", nondeterministic=True)
    env = _env(flagged, verifiers=["coin"])
    env.score(env.pivots[0], ["x"])
    assert flagged.stats()["nondeterministic_entries"] == 1
    # the opted-in rows are served only to a cache that opts in too
    assert (
        _env(RewardCache(tmp_path / "a.sqlite"), verifiers=["coin"]).chain.verify_batch(env.pivots[0], [env.parse("x")])
        and RewardCache(tmp_path / "a.sqlite").get(
            env.pivots[0].content_hash(), env.chain.config_hash(), {action_hash(env.parse("x"))}
        )
        == {}
    )


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


# -- issue 30 item 10: everything a verdict depends on is in its key ---------------------------


def _airline_tables():
    from pivot_tool_worlds._tau_airline import SUBSET_FILE, _bundled

    return json.loads(_bundled(SUBSET_FILE).read_text(encoding="utf-8"))


def _two_available_days(tables):
    """A route and two days on which its first flight is bookable with different seats or prices."""
    for flight in tables["flights"].values():
        days = [d for d, v in flight["dates"].items() if v.get("status") == "available"]
        for d1, d2 in zip(days, days[1:], strict=False):
            if flight["dates"][d1] != flight["dates"][d2]:
                return flight["origin"], flight["destination"], d1, d2
    raise AssertionError("the bundled subset has no flight bookable on two different days")


def _search(origin, destination, day):
    from pivot_core import Message, ToolCall

    args = json.dumps({"origin": origin, "destination": destination, "date": day})
    return Message("assistant", None, (ToolCall("search_direct_flight", args, "c1"),))


def test_a_changed_airline_database_never_serves_a_stale_verdict(tmp_path, monkeypatch):
    """The reported case: same pivot, same candidate, PIVOT_TAU_AIRLINE_DB pointing at other data.

    On the "same days" database the candidate's day offers exactly what the expert's day offers
    (truth: 1); on the bundled subset it does not (truth: 0). Before the fix the cache served the 1.
    """
    from pivot_core import Message, Pivot

    tables = _airline_tables()
    origin, destination, d1, d2 = _two_available_days(tables)
    for flight in tables["flights"].values():
        if d1 in flight["dates"]:
            flight["dates"][d2] = flight["dates"][d1]
    same_days = tmp_path / "same_days.json"
    same_days.write_text(json.dumps(tables), encoding="utf-8")
    pivot = Pivot(
        "hand#1",
        "tool-use",
        (Message("user", "a flight"),),
        _search(origin, destination, d1),
        (),
        {"world": "tau-airline"},
    )
    candidate = _search(origin, destination, d2)
    cache_path = tmp_path / "r.sqlite"

    def score(db):
        monkeypatch.setenv("PIVOT_TAU_AIRLINE_DB", str(db))
        chain = CachedChain(VerifierChain.from_names(["tool_exec"]), RewardCache(cache_path))
        return chain.verify_batch(pivot, [candidate])[0], chain.cache

    first, _ = score(same_days)
    assert first.accepted, first.verdicts["tool_exec"].reason
    from pivot_tool_worlds._tau_airline import SUBSET_FILE, _bundled

    second, cache = score(_bundled(SUBSET_FILE))
    assert not second.accepted and cache.hits == 0  # the truth on this database, not a stale 1
    third, cache = score(same_days)
    assert third.accepted and cache.hits == 1  # the same content again: served from the cache


def test_the_database_fingerprint_is_its_content_not_its_path(tmp_path):
    from pivot_tool_worlds import tau_airline

    tables = _airline_tables()
    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    a.write_text(json.dumps(tables), encoding="utf-8")
    b.write_bytes(a.read_bytes())
    tables["users"].popitem()
    c.write_text(json.dumps(tables), encoding="utf-8")
    assert tau_airline(a).fingerprint == tau_airline(b).fingerprint != tau_airline(c).fingerprint
    assert len(tau_airline(a).fingerprint) == 64


class _Probe:
    """A verifier that accepts everything and reports a fingerprint the test sets."""

    role, cost, deterministic, version = "acceptor", "cheap", True, "1"
    value: object = "db-1"
    stable: bool = True

    def fingerprint(self, pivot):
        if isinstance(self.value, Exception):
            raise self.value
        return self.value

    def verify(self, pivot, action):
        return Verdict.accept("ok", stable=self.stable) if not self.stable else Verdict.accept("ok")


def _probe_chain(tmp_path):
    probe = _Probe()
    env = _env(None)
    return probe, CachedChain(VerifierChain([("probe", probe)]), RewardCache(tmp_path / "r.sqlite")), env


def test_the_fingerprint_is_part_of_the_key_and_an_unknown_one_turns_caching_off(tmp_path):
    probe, chain, env = _probe_chain(tmp_path)
    pivot, action = env.pivots[0], env.parse("x")
    chain.verify_batch(pivot, [action])
    chain.verify_batch(pivot, [action])
    assert (chain.cache.misses, chain.cache.hits) == (1, 1)
    probe.value = "db-2"  # another database: a miss, not db-1's verdict
    chain.verify_batch(pivot, [action])
    assert (chain.cache.misses, chain.cache.hits) == (2, 1)
    for cannot_tell in (None, RuntimeError("engine down"), 42):
        probe.value = cannot_tell
        entries = chain.cache.stats()["entries"]
        assert chain.verify_batch(pivot, [action])[0].accepted  # scoring goes on
        assert chain.cache.stats()["entries"] == entries and chain.cache.hits == 1  # neither read nor written
    assert chain.fingerprint(pivot) is None


def test_a_verdict_marked_unstable_is_never_cached(tmp_path):
    probe, chain, env = _probe_chain(tmp_path)
    probe.stable = False  # details["stable"] is False: a race the verifier saw
    pivot, action = env.pivots[0], env.parse("x")
    for _ in range(2):
        [result] = chain.verify_batch(pivot, [action])
        assert result.accepted
    assert chain.cache.stats()["entries"] == 0 and chain.cache.hits == 0


def test_the_same_adversarial_candidate_twice_gets_a_stable_verdict_or_none_cached(tmp_path):
    """A verifier whose verdict flips between runs: each run's verdict is its own, never a cached one."""

    class Flipper:
        role, cost, deterministic, version = "acceptor", "cheap", True, "1"
        runs = 0

        def verify(self, pivot, action):
            Flipper.runs += 1
            if Flipper.runs % 2:
                return Verdict.accept("won the race", stable=False)
            return Verdict.reject("lost the race", stable=False)

    env = _env(None)
    chain = CachedChain(VerifierChain([("flipper", Flipper())]), RewardCache(tmp_path / "r.sqlite"))
    pivot, action = env.pivots[0], env.parse("(sleep 2; rm -rf /app/*) & disown")
    rewards = [chain.verify_batch(pivot, [action])[0].reward for _ in range(4)]
    assert rewards == [1.0, 0.0, 1.0, 0.0] and chain.cache.hits == 0


def test_docker_fingerprints_name_the_image_id_and_no_built_in_backend():
    """docker_shell and task_tests: the image id the engine reports for the pivot's tag (no built-in backend name)."""
    from pivot_core import Message, Pivot
    from pivot_sandbox import image_id
    from verifiers_plugins import get_verifier

    tag = "pivot-gym/busybox:1"
    engine_id = image_id(tag)
    assert engine_id and engine_id.startswith("sha256:")
    expert = Message("assistant", "ls")
    pivot = Pivot("p#1", "terminal", (Message("user", "go"),), expert, (), {"sandbox": {"image": tag}})
    shell = {name: get_verifier("docker_shell", backend=name).fingerprint(pivot) for name in ("docker", "namespace")}
    assert shell == {"docker": engine_id, "namespace": engine_id}  # the same verdicts: one key (issue 27)
    assert get_verifier("docker_shell").fingerprint(Pivot("q#1", "terminal", (), expert, (), {})) == ""
    missing = Pivot("p#1", "terminal", (), expert, (), {"sandbox": {"image": "pivot-gym/no-such-image:0"}})
    assert image_id("pivot-gym/no-such-image:0") is None
    assert get_verifier("docker_shell").fingerprint(missing) is None  # unknown image: do not cache


def test_a_third_party_sandbox_backend_stays_in_the_key(fresh_host):
    """Nothing says another backend's verdicts agree with the built-in ones: its name is part of the key."""
    from pivot_core import Message, Pivot
    from pivot_sandbox import Limits, SandboxError
    from verifiers_plugins import get_verifier

    class Elsewhere:  # a backend that keeps the contract's shape and runs nothing (only its image ids are read)
        name, limits, live_sessions, closed = "elsewhere", Limits(), False, False

        def image_id(self, tag):
            return "sha256:elsewhere"

        def run(self, spec, history, commands):
            raise SandboxError("not here")

        def run_group(self, spec, history, actions):
            raise SandboxError("not here")

        def snapshot_id(self, spec, history):
            return ""

        def backend_for(self, spec, history):
            return self, None

        def transcript(self, spec, commands, timeout=None, stop=None):
            raise SandboxError("not here")

        def drain(self):
            pass

        def close(self):
            pass

        def gc(self, everything=False):
            return {}

    class Plugin:
        @hookimpl
        def register_sandboxes(self, register):
            register("elsewhere", lambda **config: Elsewhere())

    fresh_host.register_plugin(Plugin(), name="elsewhere-sandbox")
    pivot = Pivot("p#1", "terminal", (), Message("assistant", "ls"), (), {"sandbox": {"image": "x:1"}})
    assert get_verifier("docker_shell", backend="elsewhere").fingerprint(pivot) == "elsewhere:sha256:elsewhere"


@pytest.mark.docker
def test_a_verdict_cached_under_one_sandbox_backend_serves_the_other(tmp_path, monkeypatch):
    """Both built-in backends give the same verdicts (issue 27): the key leaves the backend out, not the image."""
    from pivot_core import Message, Pivot
    from verifiers_plugins.builtin import docker_shell

    def terminus(command):
        keys = {"analysis": "a", "plan": "p", "commands": [{"keystrokes": command + "\n", "duration": 0.1}]}
        return Message("assistant", json.dumps(keys))

    context = {"sandbox": {"image": "pivot-gym/busybox:1", "setup": ["echo hi > hello.txt"]}}
    pivot = Pivot("cache-backends#1", "terminal", (Message("user", "list the files"),), terminus("ls"), (), context)
    cache = RewardCache(tmp_path / "r.sqlite")

    def chain(backend):
        config = {"docker_shell": {"backend": backend, "action_timeout": 6.0}}
        return CachedChain(VerifierChain.from_names(["docker_shell"], config), cache)

    docker, namespace = chain("docker"), chain("namespace")
    assert docker.config_hash() == namespace.config_hash() and docker.fingerprint(pivot) == namespace.fingerprint(pivot)
    [first] = docker.verify_batch(pivot, [terminus("ls -1")])  # run by Docker, then cached
    assert first.accepted and first.verdicts["docker_shell"].details["backend"] == "docker", first
    assert (cache.misses, cache.hits) == (1, 0)
    [again] = namespace.verify_batch(pivot, [terminus("ls -1")])
    assert (cache.misses, cache.hits) == (1, 1) and again.to_json() == first.to_json()
    # the image still counts: another id behind the tag is another key, on either backend
    before = docker.fingerprint(pivot)
    monkeypatch.setattr(docker_shell, "image_id", lambda tag, base_url=None: "sha256:rebuilt")
    assert docker.fingerprint(pivot) == namespace.fingerprint(pivot) != before
    [rebuilt] = docker.verify_batch(pivot, [terminus("ls -1")])
    assert rebuilt.accepted and (cache.misses, cache.hits) == (2, 1)


def test_the_judge_fingerprint_names_the_judge_even_when_the_environment_chose_it(tmp_path, monkeypatch):
    """An opted-in judge verdict is keyed by the URL `$PIVOT_JUDGE_URL` gave and the prompt file's text."""
    from verifiers_plugins.builtin.llm_judge import LLMJudge

    pivot = _env(None).pivots[0]
    monkeypatch.setenv("PIVOT_JUDGE_URL", "http://127.0.0.1:9/v1")
    first = LLMJudge().fingerprint(pivot)
    monkeypatch.setenv("PIVOT_JUDGE_URL", "http://127.0.0.1:10/v1")
    assert LLMJudge().fingerprint(pivot) != first
    prompt = tmp_path / "judge.txt"
    prompt.write_text("be strict")
    strict = LLMJudge(prompt_file=str(prompt)).fingerprint(pivot)
    prompt.write_text("be lenient")
    assert LLMJudge(prompt_file=str(prompt)).fingerprint(pivot) != strict
