import gymnasium as gym
import pytest

import pivot_envs  # noqa: F401
from trainers.backends import BackendError, OpenAIBackend, OpenAIConfig, SamplingParams, TransformersBackend
from trainers.backends._server import ServerThread, build_app


@pytest.fixture(scope="module")
def served(tiny_policy):
    backend = TransformersBackend(tiny_policy.backend_config())
    with ServerThread(build_app(backend, "tiny")) as server:
        yield backend, server


def test_openai_backend_over_loopback_matches_the_local_backend(served):
    local, server = served
    pivots = gym.make("pivot/tool-use-v0").unwrapped.pivots[:3]
    remote = OpenAIBackend(OpenAIConfig(server.url, model="tiny", max_concurrency=2))
    params = SamplingParams(max_new_tokens=24, seed=11)
    got = remote.generate(pivots, 2, params)
    assert len(got) == 3 and all(len(g) == 2 for g in got)
    for i, p in enumerate(pivots):
        # The client offsets the seed per prompt; the server seeds the local backend with it.
        want = local.generate([p], 2, SamplingParams(max_new_tokens=24, seed=11 + i))[0]
        assert [g.token_ids for g in got[i]] == [g.token_ids for g in want]
        assert [g.text for g in got[i]] == [g.text for g in want]
        for a, b in zip(got[i], want, strict=True):
            assert list(a.logprobs) == pytest.approx(list(b.logprobs), abs=1e-5)
    assert remote.policy_id == f"openai:{server.url}#tiny"


def test_retries_then_fails_with_a_clear_error():
    from fastapi import FastAPI, HTTPException

    calls = []
    app = FastAPI()

    @app.post("/v1/chat/completions")
    def flaky(body: dict):
        calls.append(1)
        if len(calls) <= 2:
            raise HTTPException(status_code=503, detail="busy")
        return {"choices": [{"index": i, "message": {"role": "assistant", "content": "hi"}} for i in range(body["n"])]}

    with ServerThread(app) as server:
        backend = OpenAIBackend(OpenAIConfig(server.url, retries=2, backoff_s=0.01, logprobs=False))
        [[a, b]] = backend.generate([{"messages": [{"role": "user", "content": "x"}]}], 2, SamplingParams())
        assert a.text == b.text == "hi" and len(calls) == 3
        calls.clear()
        with pytest.raises(BackendError, match="503"):
            OpenAIBackend(OpenAIConfig(server.url, retries=1, backoff_s=0.01)).generate(
                [{"messages": [{"role": "user", "content": "x"}]}], 1, SamplingParams()
            )


def test_tool_calls_in_the_reply_become_hermes_text():
    from trainers.backends._openai import choice_to_generation

    g = choice_to_generation(
        {
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
            "finish_reason": "tool_calls",
        }
    )
    assert g.text == '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


def test_pivot_profile_through_an_openai_compatible_server(served, tmp_path):
    import json

    from typer.testing import CliRunner

    from pivot_cli import app

    _, server = served
    res = CliRunner().invoke(
        app,
        [
            "profile",
            "--env",
            "pivot/tool-use-v0",
            "--openai-url",
            server.url,
            "--openai-model",
            "tiny",
            "--k",
            "2",
            "--limit",
            "3",
            "--max-new-tokens",
            "16",
            "--out",
            str(tmp_path / "p.jsonl"),
            "--no-cache",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["profiled"] == 3 and summary["policy_id"] == f"openai:{server.url}#tiny"
    assert summary["all_zero"] + summary["all_one"] + summary["mixed"] == 3
    assert summary["cache_hits"] == summary["cache_misses"] == 0
