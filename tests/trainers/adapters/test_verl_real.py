"""The verl adapter through verl's own entry points: RLHFDataset, get_custom_reward_fn, NaiveRewardManager.

The exported Parquet is read by verl's `RLHFDataset`; the reward file is loaded by
`get_custom_reward_fn` from the config keys docs/training.md gives; both reward managers (the
classic `workers.reward_manager` one and the reward-loop one) score a real `DataProto` built from
the dataset's prompts and tokenized responses, and agree with in-process scores.
"""

import gymnasium as gym
import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

# verl is a CI install (.ci/run): a missing one fails here, it is never skipped.
from verl import DataProto
from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager as LoopNaiveRewardManager
from verl.trainer.ppo.reward import get_custom_reward_fn
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl.workers.reward_manager.naive import NaiveRewardManager

import pivot_envs  # noqa: F401
from trainers.adapters import verl as verl_adapter
from trainers.adapters._common import expert_text


@pytest.fixture(scope="module")
def env():
    return gym.make("pivot/tool-use-v0").unwrapped


@pytest.fixture(scope="module")
def tokenizer(env):
    from pivot_demo.tiny_model import _bootstrap_tokenizer, build_tokenizer, corpus_texts

    return build_tokenizer(corpus_texts(env.pivots, _bootstrap_tokenizer()), 1024)


@pytest.fixture(scope="module")
def batch(env, tokenizer, tmp_path_factory):
    """A DataProto of 2 pivots x (expert, wrong) responses, prompts read through RLHFDataset."""
    folder = tmp_path_factory.mktemp("verl")
    pivots = [env.pivots[0], next(p for p in env.pivots if p.expert.tool_calls and p.context.get("world"))]
    path = folder / "train.parquet"
    verl_adapter.write_verl_parquet(pivots, path)
    config = OmegaConf.create({"max_prompt_length": 8192, "filter_overlong_prompts": False, "cache_dir": str(folder)})
    dataset = RLHFDataset(str(path), tokenizer, config)
    assert len(dataset) == len(pivots)
    rows, prompts, responses = [], [], []
    for i, pivot in enumerate(pivots):
        row = dataset[i]
        assert row["extra_info"]["pivot_id"] == pivot.id and row["data_source"] == "pivot/tool-use-v0"
        # what verl's agent loop does with raw_prompt: the chat template with the generation prompt
        ids = tokenizer.apply_chat_template(row["raw_prompt"], add_generation_prompt=True, tokenize=True)
        ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
        for text in (expert_text(pivot), "I cannot help with that."):
            rows.append(row)
            prompts.append(list(ids))
            responses.append(tokenizer(text=text, add_special_tokens=False)["input_ids"])
    p_len, r_len, pad = max(map(len, prompts)), max(map(len, responses)), tokenizer.pad_token_id
    prompt_t = torch.tensor([[pad] * (p_len - len(p)) + p for p in prompts])  # verl left-pads prompts
    response_t = torch.tensor([r + [pad] * (r_len - len(r)) for r in responses])  # and right-pads responses
    mask = torch.tensor([[0] * (p_len - len(p)) + [1] * len(p) + [1] * len(r) + [0] * (r_len - len(r))
                         for p, r in zip(prompts, responses, strict=True)])  # fmt: skip
    data = DataProto.from_dict(
        tensors={"prompts": prompt_t, "responses": response_t, "attention_mask": mask},
        non_tensors={k: np.array([r[k] for r in rows], dtype=object) for k in ("data_source", "reward_model")}
        | {"extra_info": np.array([dict(r["extra_info"]) for r in rows], dtype=object)},
    )
    texts = [tokenizer.decode(r, skip_special_tokens=True) for r in responses]
    return pivots, data, texts, [len(r) for r in responses]


def _reward_fn():
    config = OmegaConf.create(
        {"reward": {"custom_reward_function": {"path": verl_adapter.__file__, "name": "compute_score"}}}
    )
    return get_custom_reward_fn(config)


def _expected(env, pivots, texts):
    out = []
    for i, text in enumerate(texts):
        (r,) = env.score(pivots[i // 2], [text])
        out.append(r.reward)
    return out


def test_classic_naive_reward_manager(env, tokenizer, batch):
    pivots, data, texts, lengths = batch
    manager = NaiveRewardManager(tokenizer, num_examine=0, compute_score=_reward_fn())
    out = manager(data, return_dict=True)
    got = [out["reward_tensor"][i, lengths[i] - 1].item() for i in range(len(data))]
    assert got == _expected(env, pivots, texts)
    assert got[0::2] == [1.0, 1.0] and got[1::2] == [0.0, 0.0]  # expert 1, wrong 0
    assert out["reward_extra_info"]["verifier_error"] == [False] * len(data)


def test_reward_loop_naive_reward_manager(env, tokenizer, batch):
    pivots, data, texts, _ = batch
    manager = LoopNaiveRewardManager(OmegaConf.create({}), tokenizer, _reward_fn())
    got = [
        manager.loop.run_until_complete(manager.run_single(data[i : i + 1]))["reward_score"] for i in range(len(data))
    ]
    assert got == _expected(env, pivots, texts)
    assert got[0::2] == [1.0, 1.0] and got[1::2] == [0.0, 0.0]
