"""The OpenRLHF reward file run by OpenRLHF's own PromptDataset and single-turn agent executor.

Only the vLLM engine is a stub: it "generates" a given completion's tokens. Everything else
(prompt rendering, left truncation to `max_length`, decoding the query, loading the reward file)
is OpenRLHF's code. Issue 19 item 8: with `max_len` 1024 the airline prompts are cut, and the
adapter used to score the whole query (expert mean 0.136).
"""

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace

import gymnasium as gym
import pytest

# OpenRLHF is a CI install (.ci/run): a missing one fails here, it is never skipped.
from openrlhf.datasets.prompts_dataset import PromptDataset
from openrlhf.utils.agent import SingleTurnAgentExecutor

import pivot_envs  # noqa: F401
from trainers.adapters import openrlhf
from trainers.adapters._common import expert_text

REWARD_FILE = str(Path(openrlhf.__file__))
MAX_LEN = 1024
MAX_NEW_TOKENS = 128


class StubEngine:
    """Where vLLM would generate: returns the tokens of one fixed completion."""

    def __init__(self, tokenizer, text: str) -> None:
        self.ids = tokenizer(text=text, add_special_tokens=False)["input_ids"]
        self.text = tokenizer.decode(self.ids, skip_special_tokens=False)

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        completion = SimpleNamespace(token_ids=list(self.ids), text=self.text, finish_reason="stop", logprobs=None)
        return SimpleNamespace(outputs=[completion])


@pytest.fixture(scope="module")
def env():
    return gym.make("pivot/tool-use-v0").unwrapped


@pytest.fixture(scope="module")
def tokenizer(env):
    from pivot_demo.tiny_model import _bootstrap_tokenizer, build_tokenizer, corpus_texts

    return build_tokenizer(corpus_texts(env.pivots, _bootstrap_tokenizer()), 1024)


@pytest.fixture(scope="module")
def dataset(env, tokenizer, tmp_path_factory):
    """OpenRLHF's PromptDataset over the exported airline pivots (`--data.apply_chat_template`)."""
    pivots = [p for p in env.pivots if p.id.startswith("tau_bench/airline")]
    path = tmp_path_factory.mktemp("openrlhf") / "prompts.jsonl"
    openrlhf.write_openrlhf_jsonl(pivots, path)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    data_args = SimpleNamespace(input_key="context_messages", label_key="label", apply_chat_template=True)
    strategy = SimpleNamespace(args=SimpleNamespace(data=data_args), is_rank_0=lambda: True)
    return pivots, PromptDataset(rows, tokenizer, strategy)


def _run(tokenizer, prompt, label, completion):
    executor = SingleTurnAgentExecutor(remote_rm_url=REWARD_FILE)
    params = SimpleNamespace(max_tokens=MAX_NEW_TOKENS, logprobs=None)
    engine = StubEngine(tokenizer, completion)
    return asyncio.run(executor.execute(prompt, label, params, MAX_LEN, tokenizer, engine)), engine.text


def test_truncated_airline_prompts_score_as_in_process(env, tokenizer, dataset):
    pivots, ds = dataset
    truncated = 0
    for i, pivot in enumerate(pivots):
        _, prompt, label, _ = ds[i]
        assert json.loads(label)["pivot_id"] == pivot.id
        truncated += len(tokenizer(text=prompt, add_special_tokens=False)["input_ids"]) > MAX_LEN - MAX_NEW_TOKENS
        for completion in (expert_text(pivot), "I cannot help with that."):
            out, generated = _run(tokenizer, prompt, label, completion)
            (expected,) = env.score(pivot, [generated])
            assert out["reward"].tolist() == [expected.reward], (pivot.id, completion[:60])
            assert out["extra_logs"]["pivot/errors"].item() == 0
        assert _run(tokenizer, prompt, label, expert_text(pivot))[0]["reward"].item() == 1.0, pivot.id
    assert truncated >= len(pivots) // 2  # the case of the issue: most airline prompts are cut


def test_ambiguous_cut_is_an_error_not_a_guess(env, tokenizer, dataset):
    """A prompt ending in a repeated block B B, cut to "B B" or to "B": the query B B + expert call
    reads as the expert call, or as B + the expert call. They score differently, so where the
    response starts would be a guess: error verdict (0, counted), not a reward."""
    pivots, ds = dataset
    pivot = pivots[0]
    _, real_prompt, label, _ = ds[0]
    block = real_prompt[-300:]
    prompt = real_prompt + block  # ends with block + block (and still with the generation header)
    query = block + block + expert_text(pivot)
    readings = openrlhf.locate_response(query, prompt).readings
    assert readings[:2] == (expert_text(pivot), block + expert_text(pivot))
    assert len({r.reward for r in env.score(pivot, list(readings))}) > 1
    result = openrlhf.score_query(query, prompt, label)
    assert result.error and "readings" in result.error and result.reward == 0.0
    # the same cut with a response that reads alike either way is scored
    assert openrlhf.score_query(block + block + "I cannot help.", prompt, label).error is None


def test_unlocatable_query_and_bad_label_are_error_verdicts(dataset):
    pivots, ds = dataset
    _, prompt, label, _ = ds[0]
    out = openrlhf.reward_func(["no prompt here " + expert_text(pivots[0])], [prompt], [label])
    assert out["rewards"].tolist() == [0.0] and out["extra_logs"]["pivot/errors"].item() == 1
    bad = openrlhf.score_query(prompt + expert_text(pivots[0]), prompt, "not json")
    assert bad.error and "label" in bad.error and bad.reward == 0.0
    unknown = openrlhf.score_query(prompt + "x", prompt, json.dumps({"pivot_id": "nope"}))
    assert unknown.error and "nope" in unknown.error


def test_locate_response_exact_cases():
    prompt = "A" * 10 + "".join(f"line {i}\n" for i in range(40)) + "<|im_start|>assistant\n"
    assert openrlhf.locate_response(prompt + "reply", prompt).readings == ("reply",)
    cut = prompt[-200:]
    located = openrlhf.locate_response(cut + "reply", prompt)
    assert located.truncated and located.readings == ("reply",)
    # a cut inside a multi-byte character decodes to replacement characters first
    assert openrlhf.locate_response("\ufffd" + cut + "reply", prompt).readings == ("reply",)
    assert openrlhf.locate_response(prompt[-20:] + "reply", prompt).problem


def test_rendered_prompt_column_keeps_the_tools(env, tokenizer, tmp_path):
    """`--data.input_key prompt` (no chat template): OpenRLHF reads the prompt rendered with the pivot's tools."""
    pivot = next(p for p in env.pivots if p.tools and p.id.startswith("tau_bench/airline"))
    path = tmp_path / "rendered.jsonl"
    openrlhf.write_openrlhf_jsonl([pivot], path, tokenizer=tokenizer)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    data_args = SimpleNamespace(input_key="prompt", label_key="label", apply_chat_template=False)
    ds = PromptDataset(rows, tokenizer, SimpleNamespace(args=SimpleNamespace(data=data_args), is_rank_0=lambda: True))
    _, prompt, label, _ = ds[0]
    assert all(f"{(t.get('function') or t)['name']}(" in prompt for t in pivot.tools)
    out, generated = _run(tokenizer, prompt, label, expert_text(pivot))
    assert out["reward"].item() == 1.0
