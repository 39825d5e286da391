from dataclasses import replace

import gymnasium as gym
import pytest

import pivot_envs  # noqa: F401
from trainers.backends import Generation, GenerationBackend, SamplingParams, TransformersBackend


@pytest.fixture(scope="module")
def backend(tiny_policy):
    return TransformersBackend(tiny_policy.backend_config(batch_size=4))


@pytest.fixture(scope="module")
def pivots():
    return gym.make("pivot/tool-use-v0").unwrapped.pivots[:5]


def test_generate_returns_n_generations_per_prompt_with_token_logprobs(backend, pivots):
    assert isinstance(backend, GenerationBackend)
    groups = backend.generate(pivots, 3, SamplingParams(max_new_tokens=24, seed=1))
    assert len(groups) == len(pivots) and all(len(g) == 3 for g in groups)
    for g in (x for group in groups for x in group):
        assert isinstance(g, Generation)
        assert 0 < len(g.token_ids) <= 24 and len(g.logprobs) == len(g.token_ids)
        assert all(lp <= 0.0 for lp in g.logprobs)
        assert g.finish_reason in ("stop", "length") and g.prompt_tokens <= 96
        assert "<|im_end|>" not in g.text


def test_same_seed_same_samples_and_chats_work_like_pivots(backend, pivots):
    params = SamplingParams(max_new_tokens=16, seed=7)
    a = backend.generate(pivots[:2], 2, params)
    b = backend.generate(pivots[:2], 2, params)
    assert [[g.token_ids for g in grp] for grp in a] == [[g.token_ids for g in grp] for grp in b]
    env = gym.make("pivot/tool-use-v0").unwrapped
    obs, _ = env.reset(options={"pivot_id": pivots[0].id})
    assert backend.encode(obs) == backend.encode(pivots[0])  # the observation renders like the pivot
    assert [g.token_ids for g in backend.generate([obs], 2, params)[0]] == [
        g.token_ids for g in backend.generate([pivots[0]], 2, params)[0]
    ]


def test_greedy_decoding_reproduces_the_expert_on_a_memorised_tool_call(backend):
    env = gym.make("pivot/tool-use-v0").unwrapped
    calls = [p for p in env.pivots if p.expert.is_tool_call]
    groups = backend.generate(calls, 1, SamplingParams(max_new_tokens=48, temperature=0.0))
    rewards = [env.score(p, [g[0].text])[0].reward for p, g in zip(calls, groups, strict=True)]
    # The SFT'd policy has learned at least some of its tool calls well enough to emit them greedily.
    assert sum(rewards) >= 1


def test_a_stop_string_ends_the_tokens_too(backend, pivots):
    # a stop string cuts the text; the tokens (what GRPO trains on) and their log-probs must end
    # at the token that completed it, not at the end of the sampled sequence
    params = SamplingParams(max_new_tokens=24, seed=1)
    full = [g for group in backend.generate(pivots[:3], 2, params) for g in group]
    stop = next(g.text for g in full if len(g.text) >= 6)[3:6]  # the tiny policy writes tool calls
    cut = [g for group in backend.generate(pivots[:3], 2, replace(params, stop=(stop,))) for g in group]
    decode = lambda ids: backend.tokenizer.decode(ids, skip_special_tokens=True)  # noqa: E731
    assert any(stop in a.text for a in full)
    for a, b in zip(full, cut, strict=True):
        assert a.token_ids[: len(b.token_ids)] == b.token_ids and len(b.logprobs) == len(b.token_ids)
        if stop in a.text:
            assert b.text == a.text[: a.text.index(stop)] and b.finish_reason == "stop"
            assert stop in decode(b.token_ids) and stop not in decode(b.token_ids[:-1])
        else:
            assert b == a


def test_shared_prefill_samples_score_as_the_model_scores_them_unpadded(tiny_policy, pivots):
    # prompts of different lengths are left-padded in one batch and read once for all their samples:
    # each sample's reported log-probs must be what the model gives the same tokens after its own
    # prompt alone, which fails if the cached positions or the padding were off
    import torch

    backend = TransformersBackend(tiny_policy.backend_config(batch_size=4, max_prompt_tokens=None))
    assert backend.config.share_prefill
    groups = backend.generate(pivots[:3], 3, SamplingParams(max_new_tokens=12, seed=3))
    assert len({backend.encode(p).__len__() for p in pivots[:3]}) > 1
    for pivot, group in zip(pivots[:3], groups, strict=True):
        prompt = backend.encode(pivot)
        for g in group:
            ids = torch.tensor([prompt + list(g.token_ids)])
            with torch.no_grad():
                logits = backend.model(input_ids=ids).logits[0, len(prompt) - 1 : -1]
            expected = torch.log_softmax(logits.float(), -1).gather(-1, ids[0, len(prompt) :, None]).squeeze(-1)
            assert torch.allclose(expected, torch.tensor(g.logprobs), atol=1e-4)
