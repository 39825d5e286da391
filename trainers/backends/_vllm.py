"""The vLLM offline-engine backend (the `gpu` extra).

Status: written against vLLM's documented offline API (`LLM.chat`, `SamplingParams` with `n`,
`logprobs`, `seed`) but verified nowhere yet: vLLM from PyPI is a CUDA build and no test machine
of this project has a GPU. The tests exercise the same interface through the transformers
backend and the OpenAI backend (which is how `vllm serve` is reached).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trainers.backends._base import Generation, Prompt, SamplingParams, as_chat, template_messages, truncate_history


@dataclass(frozen=True)
class VLLMConfig:
    """How to start the engine.

    Attributes:
        model: a local folder or hub name vLLM can load.
        dtype: "auto", "bfloat16", "float16" or "float32".
        gpu_memory_utilization: share of GPU memory vLLM may take.
        tensor_parallel_size: GPUs per model replica.
        max_model_len: context length (None: the model's own).
        max_history_messages: history messages kept (None keeps all), as for the other backends.
    """

    model: str
    dtype: str = "auto"
    gpu_memory_utilization: float = 0.85
    tensor_parallel_size: int = 1
    max_model_len: int | None = None
    max_history_messages: int | None = None


class VLLMBackend:
    """Samples with `vllm.LLM.chat`, which renders with the model's own chat template.

    Args:
        config: what to load.
    """

    def __init__(self, config: VLLMConfig) -> None:
        from vllm import LLM  # the gpu extra; imported only here

        self.config = config
        self.llm = LLM(
            model=config.model,
            dtype=config.dtype,
            gpu_memory_utilization=config.gpu_memory_utilization,
            tensor_parallel_size=config.tensor_parallel_size,
            max_model_len=config.max_model_len,
        )
        self.policy_id = f"vllm:{config.model}"

    def generate(self, prompts: Sequence[Prompt], n: int, params: SamplingParams) -> list[list[Generation]]:
        """Sample `n` completions per prompt (see `GenerationBackend.generate`)."""
        from vllm import SamplingParams as VSamplingParams

        sp = VSamplingParams(
            n=n,
            temperature=params.temperature,
            top_p=params.top_p,
            max_tokens=params.max_new_tokens,
            seed=params.seed,
            stop=list(params.stop) or None,
            logprobs=0,
        )  # 0: the sampled token's own log-prob only
        chats = [as_chat(p) for p in prompts]
        conversations = [
            template_messages(truncate_history(c["messages"], self.config.max_history_messages)) for c in chats
        ]
        tools = chats[0]["tools"] if chats and all(c["tools"] == chats[0]["tools"] for c in chats) else None
        outputs = self.llm.chat(conversations, sp, tools=tools or None, use_tqdm=False)
        return [[self._one(o, len(out.prompt_token_ids or ())) for o in out.outputs] for out in outputs]

    @staticmethod
    def _one(o: Any, prompt_tokens: int) -> Generation:
        ids = tuple(o.token_ids)
        lps = tuple(next(iter(step.values())).logprob if step else 0.0 for step in (o.logprobs or ()))
        if len(lps) != len(ids):
            lps = ()
        return Generation(o.text, ids, lps, "length" if o.finish_reason == "length" else "stop", prompt_tokens)
