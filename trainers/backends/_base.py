"""The generation-backend contract: prompts in, K sampled completions per prompt out.

Every backend (transformers, an OpenAI-compatible server, the vLLM offline engine) implements
`GenerationBackend.generate`. A prompt is a pivot or a chat (`{"messages", "tools"}`, the env's
observation); the backend renders it with the policy's own chat template. This module imports
no heavy dependency, so the profiler and the trainers can type against it cheaply.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from pivot_core import Pivot, chat_message, observation

Prompt = Pivot | Mapping[str, Any]


@dataclass(frozen=True)
class SamplingParams:
    """How to sample completions.

    Attributes:
        max_new_tokens: the most tokens one completion may have.
        temperature: softmax temperature; 0 means greedy.
        top_p: nucleus mass in (0, 1].
        seed: seeds the sampler so that a run can be repeated (None: unseeded).
        stop: extra strings that end a completion (the template's end-of-turn always does).
    """

    max_new_tokens: int = 128
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"SamplingParams.max_new_tokens: expected >= 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise ValueError(f"SamplingParams.temperature: expected >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"SamplingParams.top_p: expected a value in (0, 1], got {self.top_p}")
        object.__setattr__(self, "stop", tuple(self.stop))


@dataclass(frozen=True)
class Generation:
    """One sampled completion.

    Attributes:
        text: the completion text, end-of-turn token removed (what the env's parser reads).
        token_ids: the sampled token ids, end-of-turn token included when one was sampled; a
            stop string ends them at the token that completed it (the text ends before it).
        logprobs: per sampled token, its log-probability under the distribution it was sampled
            from (logits divided by the sampling temperature, no top-p truncation, for the
            transformers backend; as the server reports them for the OpenAI backend); the same
            length as `token_ids` when both are known. A server may report log-probs without
            token ids, or neither.
        finish_reason: "stop" (end of turn or a stop string) or "length" (hit max_new_tokens).
        prompt_tokens: how many tokens the rendered prompt had.
    """

    text: str
    token_ids: tuple[int, ...] = ()
    logprobs: tuple[float, ...] = ()
    finish_reason: str = "stop"
    prompt_tokens: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "token_ids", tuple(int(t) for t in self.token_ids))
        object.__setattr__(self, "logprobs", tuple(float(x) for x in self.logprobs))
        if self.logprobs and self.token_ids and len(self.logprobs) != len(self.token_ids):
            raise ValueError(
                f"Generation.logprobs: expected {len(self.token_ids)} values (one per token), got {len(self.logprobs)}"
            )

    @property
    def logprob(self) -> float:
        """Sum of the token log-probabilities (the completion's log-likelihood)."""
        return sum(self.logprobs)


@runtime_checkable
class GenerationBackend(Protocol):
    """Samples completions from a frozen or training policy.

    Attributes:
        policy_id: names the policy (model path or name + revision); profiles record it.
    """

    policy_id: str

    def generate(self, prompts: Sequence[Prompt], n: int, params: SamplingParams) -> list[list[Generation]]:
        """Sample `n` completions for each prompt.

        Args:
            prompts: pivots or chats (`{"messages": [...], "tools": [...]}` in OpenAI shape).
            n: completions per prompt (K when profiling, G for a GRPO group).
            params: sampling parameters.

        Returns:
            One list of `n` generations per prompt, in prompt order.
        """
        ...


@runtime_checkable
class EncodingBackend(GenerationBackend, Protocol):
    """A generation backend that also says which prompt token ids it sampled from (GRPO trains on exactly those)."""

    def encode(self, prompt: Prompt) -> list[int]:
        """The prompt's token ids as the backend renders and cuts it."""
        ...


def as_chat(prompt: Prompt) -> dict[str, Any]:
    """A prompt as `{"messages", "tools"}` in OpenAI chat shape."""
    if isinstance(prompt, Pivot):
        obs = observation(prompt)
        return {"messages": obs["messages"], "tools": obs["tools"]}
    if not isinstance(prompt, Mapping) or "messages" not in prompt:
        raise TypeError(f"expected a Pivot or a mapping with 'messages', got {type(prompt).__name__}")
    return {"messages": list(prompt["messages"]), "tools": list(prompt.get("tools") or [])}


def template_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Messages shaped for Jinja chat templates: tool-call arguments as objects, content never None.

    Qwen/Hermes-style templates render `arguments | tojson`; giving them the decoded object
    makes the rendered call byte-identical to `render_completion`, which the parser reads back.
    """
    out = []
    for m in messages:
        m = dict(m)
        m.pop("extra", None)
        if m.get("content") is None:
            m["content"] = ""
        calls = []
        for c in m.get("tool_calls") or []:
            fn = dict(c.get("function", c))
            args = fn.get("arguments", "{}")
            if isinstance(args, str):
                try:
                    args = json.loads(args) if args.strip() else {}
                except json.JSONDecodeError:
                    pass  # kept as the raw string, as render_completion does
            fn["arguments"] = args
            calls.append({"type": "function", "id": c.get("id", ""), "function": fn})
        if calls:
            m["tool_calls"] = calls
        else:
            m.pop("tool_calls", None)
        out.append(m)
    return out


def truncate_history(messages: Sequence[Mapping[str, Any]], max_messages: int | None) -> list[Mapping[str, Any]]:
    """Keep a leading system message and the last `max_messages` other messages (None keeps all).

    A small policy cannot read a long history; the system prompt is kept because it states the
    task. The cut never starts on a tool result, whose call would then be missing.
    """
    messages = list(messages)
    if max_messages is None or len(messages) <= max_messages:
        return messages
    head = [messages[0]] if messages and messages[0].get("role") == "system" else []
    tail = messages[len(head) :][-max_messages:] if max_messages > 0 else []
    while tail and tail[0].get("role") == "tool":
        tail = tail[1:]
    return head + tail


def expert_message(pivot: Pivot) -> dict[str, Any]:
    """The pivot's expert turn in OpenAI shape."""
    return chat_message(pivot.expert)
