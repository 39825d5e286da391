"""Generation backends behind one interface (`GenerationBackend.generate`).

- `TransformersBackend`: a local causal LM on CPU or GPU (tests use the tiny model).
- `OpenAIBackend`: any OpenAI-compatible server (`vllm serve`, TGI, a hosted API).
- `VLLMBackend`: vLLM's offline engine (the `gpu` extra).

Modules here import torch/transformers/vllm only inside the calls that need them.
"""

from trainers.backends._base import (
    EncodingBackend,
    Generation,
    GenerationBackend,
    Prompt,
    SamplingParams,
    as_chat,
    expert_message,
    template_messages,
)
from trainers.backends._chat import GuardIssue, render_example, render_prompt, rendering_guard
from trainers.backends._openai import OpenAIBackend, OpenAIConfig
from trainers.backends._server import ServerThread, build_app
from trainers.backends._transformers import TransformersBackend, TransformersConfig
from trainers.backends._vllm import VLLMBackend, VLLMConfig
from trainers.errors import BackendError

__all__ = [
    "BackendError",
    "OpenAIBackend",
    "OpenAIConfig",
    "EncodingBackend",
    "Generation",
    "GenerationBackend",
    "GuardIssue",
    "Prompt",
    "SamplingParams",
    "ServerThread",
    "TransformersBackend",
    "TransformersConfig",
    "VLLMBackend",
    "VLLMConfig",
    "as_chat",
    "build_app",
    "expert_message",
    "render_example",
    "render_prompt",
    "rendering_guard",
    "template_messages",
]
