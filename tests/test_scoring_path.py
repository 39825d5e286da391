"""Every way a completion becomes a reward goes through the env's one scoring path (`PivotEnv._scored`:
each completion parsed once, then the env's chain, the reward cache's `CachedChain` when configured)."""

import json

import gymnasium as gym
import pytest

import pivot_envs  # noqa: F401  (registers the env ids)
from pivot_core._render import render_completion
from pivot_envs._env import PivotEnv
from verifiers_plugins import CachedChain, RewardCache


@pytest.fixture
def spy(monkeypatch):
    """Counts what passes through the scoring path: calls, completions, parses, and cached-chain groups."""
    seen = {"calls": 0, "completions": 0, "parses": 0, "cached_groups": 0}
    scored, cached = PivotEnv._scored, CachedChain.verify_batch

    def counting_scored(self, pivot, completions):
        seen["calls"] += 1
        seen["completions"] += len(completions)
        parse = self.parse

        def counted(text):
            seen["parses"] += 1
            return parse(text)

        self.parse = counted
        try:
            return scored(self, pivot, completions)
        finally:
            self.parse = parse

    def counting_cached(self, pivot, actions):
        seen["cached_groups"] += 1
        return cached(self, pivot, actions)

    monkeypatch.setattr(PivotEnv, "_scored", counting_scored)
    monkeypatch.setattr(CachedChain, "verify_batch", counting_cached)
    return seen


@pytest.fixture
def pivot():
    env = gym.make("pivot/tool-use-v0").unwrapped
    return next(p for p in env.pivots if p.expert.tool_calls)


def _expert(pivot):
    return render_completion(pivot.expert, pivot.domain)


def test_step_and_score_parse_once_through_the_cached_chain(spy, pivot, tmp_path):
    env = gym.make("pivot/tool-use-v0", reward_cache=RewardCache(tmp_path / "r.sqlite")).unwrapped
    env.reset(options={"pivot_id": pivot.id})
    _, reward, *_ = env.step(_expert(pivot))
    rewards = [r.reward for r in env.score(pivot, [_expert(pivot), "no"])]
    assert reward == 1.0 and rewards == [1.0, 0.0]
    assert spy == {"calls": 2, "completions": 3, "parses": 3, "cached_groups": 2}


def test_the_profiler_scores_through_the_env(spy, tmp_path):
    from trainers.backends import Generation
    from trainers.profiling import ProfileConfig, profile_pivots

    class Replays:
        """A backend that answers each pivot with its expert action and a wrong one."""

        policy_id = "replays"

        def generate(self, prompts, n, params):
            return [[Generation(_expert(p))] * (n // 2) + [Generation("no")] * (n - n // 2) for p in prompts]

    env = gym.make("pivot/tool-use-v0", reward_cache=RewardCache(tmp_path / "r.sqlite"))
    summary = profile_pivots(env, Replays(), tmp_path / "p.jsonl", ProfileConfig(k=4, limit=3))
    assert summary.profiled == 3 and spy["calls"] == 3 and spy["parses"] == spy["completions"] == 12
    assert spy["cached_groups"] == 3


def test_the_in_process_executor_scores_through_the_env(spy, pivot):
    from trainers.executors import EnvSpec, InProcessExecutor, VerifyTask

    (results,) = InProcessExecutor(EnvSpec("pivot/tool-use-v0")).verify([VerifyTask(pivot, (_expert(pivot), "no"))])
    assert [r.reward for r in results] == [1.0, 0.0] and spy["calls"] == 1 and spy["parses"] == 2


def test_every_adapter_scores_through_the_env(spy, pivot, tmp_path):
    from trainers.adapters import openrlhf, skyrl, verl
    from trainers.adapters.trl import pivot_reward_func

    expert = _expert(pivot)
    calls = 0

    (row,) = verl.verl_rows([pivot])
    assert verl.compute_score(row["data_source"], expert, expert, row["extra_info"])["score"] == 1.0
    calls += 1
    assert spy["calls"] == calls

    path = tmp_path / "prompts.jsonl"
    openrlhf.write_openrlhf_jsonl([pivot], path)
    label = json.loads(path.read_text().splitlines()[0])["label"]
    prompt = "<|im_start|>assistant\n"
    assert openrlhf.reward_func([prompt + expert], [prompt], [label])["rewards"].tolist() == [1.0]
    assert spy["calls"] > calls
    calls = spy["calls"]

    (srow,) = skyrl.skyrl_rows([pivot])
    assert skyrl.PivotTextEnv({}, srow).step(expert)["reward"] == 1.0
    calls += 1
    assert spy["calls"] == calls

    fn = pivot_reward_func("pivot/tool-use-v0")
    assert fn(prompts=[None], completions=[expert], completion_ids=[[1]], pivot_id=[pivot.id]) == [1.0]
    calls += 1
    assert spy["calls"] == calls
    assert spy["parses"] == spy["completions"]


def test_the_server_scores_through_the_env(spy, pivot):
    from fastapi.testclient import TestClient

    from pivot_cli._server import create_app

    env = gym.make("pivot/tool-use-v0").unwrapped
    client = TestClient(create_app(env, "pivot/tool-use-v0"))
    answer = client.post("/v1/verify-batch", json={"pivot_id": pivot.id, "completions": [_expert(pivot), "no"]})
    assert answer.status_code == 200, answer.text
    assert [r["reward"] for r in answer.json()["results"]] == [1.0, 0.0]
    assert spy["calls"] == 1 and spy["parses"] == 2
