"""The transformers backend: batched sampling from a local causal LM (CPU or GPU)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainers.backends._base import Generation, Prompt, SamplingParams
from trainers.backends._chat import render_prompt


@dataclass(frozen=True)
class TransformersConfig:
    """How to load and prompt a local model.

    Attributes:
        model: a folder with `config.json`, weights and a tokenizer that has a chat template.
        device: "cpu", "cuda", "cuda:1", ...
        dtype: "float32" (right for tiny CPU models), "bfloat16" or "float16".
        max_history_messages: keep a leading system message and the last N history messages
            (None keeps all); small models cannot read long histories.
        max_prompt_tokens: keep only the last N prompt tokens (None keeps all).
        batch_size: prompts per forward pass (each expands to `n` sequences).
        share_prefill: run each prompt through the model once and copy its key/value cache to the
            `n` samples, instead of `generate(num_return_sequences=n)`, which expands the prompt
            before the forward pass and pays it `n` times. Measured on SmolLM2-135M, one 4,439-token
            tool-use prompt, K=8 x 32 new tokens on 2 cores: 164 s before, 35 s after (the prompt
            pass alone is 15 s). The samples are drawn from the same distribution.
    """

    model: str
    device: str = "cpu"
    dtype: str = "float32"
    max_history_messages: int | None = None
    max_prompt_tokens: int | None = None
    batch_size: int = 8
    share_prefill: bool = True

    def __post_init__(self) -> None:
        if self.dtype not in ("float32", "bfloat16", "float16"):
            raise ValueError(f"TransformersConfig.dtype: expected float32, bfloat16 or float16, got {self.dtype!r}")
        if self.batch_size < 1:
            raise ValueError(f"TransformersConfig.batch_size: expected >= 1, got {self.batch_size}")


def weights_digest(folder: str | Path) -> str:
    """Short SHA-256 of a model folder's weight files: part of the policy id."""
    h = hashlib.sha256()
    for f in sorted(Path(folder).glob("*.safetensors")) + sorted(Path(folder).glob("*.bin")):
        with f.open("rb") as fh:
            for chunk in iter(lambda fh=fh: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()[:12]


class TransformersBackend:
    """Samples with `model.generate`, left-padded batches, one template render per prompt.

    Args:
        config: what to load and how to prompt it.
        model: an already loaded model (e.g. the policy being trained); loaded from
            `config.model` when None.
        tokenizer: its tokenizer; loaded from `config.model` when None.
    """

    def __init__(self, config: TransformersConfig, model: Any = None, tokenizer: Any = None) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.config = config
        self.tokenizer = tokenizer or AutoTokenizer.from_pretrained(config.model)
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        dtype = getattr(torch, config.dtype)
        self.model = model or AutoModelForCausalLM.from_pretrained(config.model, dtype=dtype).to(config.device)
        self.model.eval()
        digest = weights_digest(config.model) if model is None and Path(config.model).is_dir() else "live"
        self.policy_id = f"{config.model}@{digest}"

    def encode(self, prompt: Prompt) -> list[int]:
        """Prompt token ids after rendering and truncation."""
        text = render_prompt(self.tokenizer, prompt, self.config.max_history_messages)
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        if self.config.max_prompt_tokens is not None and len(ids) > self.config.max_prompt_tokens:
            ids = ids[-self.config.max_prompt_tokens :]  # keep the recent turns and the generation prompt
        return ids

    def generate(self, prompts: Sequence[Prompt], n: int, params: SamplingParams) -> list[list[Generation]]:
        """Sample `n` completions per prompt (see `GenerationBackend.generate`)."""
        import torch

        if n < 1:
            raise ValueError(f"generate: expected n >= 1, got {n}")
        if params.seed is not None:
            torch.manual_seed(params.seed)
        encoded = [self.encode(p) for p in prompts]
        out: list[list[Generation]] = []
        for start in range(0, len(encoded), self.config.batch_size):
            out.extend(self._generate_batch(encoded[start : start + self.config.batch_size], n, params))
        return out

    def _generate_batch(self, batch: list[list[int]], n: int, params: SamplingParams) -> list[list[Generation]]:
        import torch

        pad = self.tokenizer.pad_token_id
        width = max(len(ids) for ids in batch)
        input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for ids in batch], device=self.model.device)
        attention = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in batch], device=self.model.device)
        sample = params.temperature > 0
        shared: dict[str, Any] = {}
        if self.config.share_prefill and n > 1 and width > 1:
            shared = {self._cache_keyword(): self._prefill(input_ids[:, :-1], attention[:, :-1], n)}
            input_ids, attention = input_ids.repeat_interleave(n, 0), attention.repeat_interleave(n, 0)
        with torch.no_grad():
            result = self.model.generate(
                input_ids=input_ids,
                attention_mask=attention,
                do_sample=sample,
                temperature=params.temperature if sample else None,
                top_p=params.top_p if sample else None,
                top_k=None,
                max_new_tokens=params.max_new_tokens,
                num_return_sequences=1 if shared else n,
                output_logits=True,
                return_dict_in_generate=True,
                pad_token_id=pad,
                eos_token_id=self.model.generation_config.eos_token_id or self.tokenizer.eos_token_id,
                **shared,
            )
        new = result.sequences[:, width:]
        logits = torch.stack(result.logits, dim=1).float()  # (rows, steps, vocab), raw: before the temperature
        if sample and params.temperature != 1.0:
            logits = logits / params.temperature  # the distribution the tokens were sampled from
        logps = torch.log_softmax(logits, dim=-1).gather(-1, new.unsqueeze(-1)).squeeze(-1)
        groups: list[list[Generation]] = []
        for i, ids in enumerate(batch):
            groups.append([self._one(new[row], logps[row], len(ids), params) for row in range(i * n, (i + 1) * n)])
        return groups

    def _cache_keyword(self) -> str:
        """`cache` where the model takes it (transformers 5.2x renamed `past_key_values`), else the old name."""
        import inspect

        model = self.model.get_base_model() if hasattr(self.model, "get_base_model") else self.model  # peft
        return "cache" if "cache" in inspect.signature(type(model).forward).parameters else "past_key_values"

    def _prefill(self, input_ids: Any, attention: Any, n: int) -> Any:
        """The key/value cache of every prompt token but the last, each row repeated `n` times.

        `generate` then feeds only the last prompt token, so the prompt is read once per prompt,
        not once per sample. Position ids follow the left padding the way `generate` derives them
        from the attention mask, so the cached keys are the ones it would have computed.
        """
        import torch

        positions = attention.long().cumsum(-1) - 1
        positions.masked_fill_(attention == 0, 1)
        with torch.no_grad():
            out = self.model(input_ids=input_ids, attention_mask=attention, position_ids=positions, use_cache=True)
        cache = out.past_key_values
        cache.batch_repeat_interleave(n)
        return cache

    def _one(self, tokens: Any, logps: Any, prompt_tokens: int, params: SamplingParams) -> Generation:
        eos = self.model.generation_config.eos_token_id or self.tokenizer.eos_token_id
        eos_ids = set(eos) if isinstance(eos, (list, tuple)) else {eos}
        ids: list[int] = []
        finish = "length"
        for t in tokens.tolist():
            ids.append(t)
            if t in eos_ids:
                finish = "stop"
                break
        text = self.decode(ids, eos_ids)
        hits = [s for s in params.stop if s in text]
        if hits:
            # the sampler would have stopped at the token that completed the first stop string:
            # the tokens after it were never part of the completion, so they are not trained on
            stop = min(hits, key=text.index)
            ids = ids[: next(n for n in range(1, len(ids) + 1) if stop in self.decode(ids[:n], eos_ids))]
            text, finish = text[: text.index(stop)], "stop"
        return Generation(text, tuple(ids), tuple(logps[: len(ids)].tolist()), finish, prompt_tokens)

    def decode(self, ids: Sequence[int], eos_ids: set[int]) -> str:
        """Completion text of sampled ids (end-of-turn tokens dropped)."""
        return self.tokenizer.decode([t for t in ids if t not in eos_ids], skip_special_tokens=True)
