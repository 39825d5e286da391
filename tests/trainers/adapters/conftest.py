"""What the adapter tests share: TRL run settings, a scripted `generate`, the tool-use episode env, its tokenizer."""

from collections.abc import Callable

import gymnasium as gym
import pytest

import pivot_envs  # noqa: F401

EPISODE_ENV = "pivot/tool-use-episode-v0"


@pytest.fixture
def scripted_generate() -> Callable[..., Callable]:
    """`make(tokenizer, turn)`: a `model.generate` for TRL that appends `turn(prompt text)`'s tokens to each row.

    TRL's GRPOTrainer calls `model.generate(input_ids, attention_mask, ...)`; a tiny model rarely
    writes a valid call, so tests script the completions while TRL parses and runs them.
    """

    def make(tokenizer, turn: Callable[[str], str]) -> Callable:
        def generate(input_ids, attention_mask=None, **kw):
            import torch

            rows = []
            for ids, mask in zip(input_ids.tolist(), attention_mask.tolist(), strict=True):
                prompt = tokenizer.decode([i for i, m in zip(ids, mask, strict=True) if m], skip_special_tokens=False)
                rows.append(tokenizer(text=turn(prompt), add_special_tokens=False)["input_ids"])
            width = max(map(len, rows))
            out = [r + [tokenizer.pad_token_id] * (width - len(r)) for r in rows]
            return torch.cat([input_ids, torch.tensor(out, dtype=input_ids.dtype)], dim=1)

        return generate

    return make


@pytest.fixture(scope="module")
def episode_env():
    """The tool-use episode env on its bundled data."""
    return gym.make(EPISODE_ENV).unwrapped


@pytest.fixture(scope="module")
def episode_tokenizer(episode_env):
    """A tiny BPE trained on the episode env's pivots (the template the adapters render with)."""
    from pivot_demo.tiny_model import _bootstrap_tokenizer, build_tokenizer, corpus_texts

    return build_tokenizer(corpus_texts(episode_env.pivots, _bootstrap_tokenizer()), 1024)


@pytest.fixture
def trl_args() -> Callable[..., object]:
    """`GRPOConfig(**fields)` for a CPU test run: one log per step, no saving, no reporting, seed 0, lr 1e-4."""

    def make(**fields):
        from trl import GRPOConfig

        defaults = {"use_cpu": True, "learning_rate": 1e-4, "logging_steps": 1, "report_to": "none"}
        return GRPOConfig(**(defaults | {"save_strategy": "no", "bf16": False, "seed": 0} | fields))

    return make
