"""Colocated vLLM for the GRPO trainer: push the policy's weights into the engine after each update.

Status: written against the in-process engine layout TRL's colocate mode uses (vLLM 0.22-0.31 with
`VLLM_ENABLE_V1_MULTIPROCESSING=0`, so the engine's model lives in this process) and **verified
nowhere**: vLLM from PyPI is a CUDA build and no GPU was available to this project's sessions. The
trainer side of the contract (`update_weights(model)` called after every optimizer step) is tested
on CPU with the transformers backend.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from trainers.backends._base import Generation, Prompt, SamplingParams

if TYPE_CHECKING:  # vLLM is the GPU extra's: never imported to type a parameter
    from trainers.backends._vllm import VLLMBackend


def policy_weights(model: Any) -> Iterator[tuple[str, Any]]:
    """`(name, tensor)` pairs in the base model's naming; LoRA adapters are merged into a copy first."""
    if hasattr(model, "merge_and_unload"):  # peft: the engine holds plain weights
        import copy

        model = copy.deepcopy(model).merge_and_unload()
    for name, tensor in model.state_dict().items():
        yield name, tensor.detach()


class ColocatedVLLM:
    """Wraps a `trainers.backends._vllm.VLLMBackend` and adds `update_weights`.

    Args:
        backend: the vLLM backend, started in this process on the training GPU.
    """

    def __init__(self, backend: VLLMBackend) -> None:
        self.backend = backend
        self.policy_id = backend.policy_id

    def generate(self, prompts: Sequence[Prompt], n: int, params: SamplingParams) -> list[list[Generation]]:
        """Sample with the engine (see `GenerationBackend.generate`)."""
        return self.backend.generate(prompts, n, params)

    def update_weights(self, model: Any) -> None:
        """Load the policy's current weights into the engine's model, then drop stale prefix-cache blocks."""
        llm = self.backend.llm
        engine_model = llm.llm_engine.model_executor.driver_worker.worker.model_runner.model
        engine_model.load_weights(policy_weights(model))
        llm.reset_prefix_cache()  # cached KV blocks were computed with the old weights
