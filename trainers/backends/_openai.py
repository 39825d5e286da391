"""The OpenAI-compatible backend: any `/v1/chat/completions` server (`vllm serve`, TGI, hosted APIs).

The server renders the chat with the policy's own template. Requests run concurrently on one
`httpx.AsyncClient` under a semaphore; timeouts, transport errors, 429 and 5xx are retried with
exponential back-off; other 4xx fail at once. A reply whose message carries parsed `tool_calls`
(a server started with a tool parser) is turned back into Hermes `<tool_call>` text, the form the
env's parser reads, so the same verifiers score both kinds of server.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pivot_core import Message, render_completion
from trainers.backends._base import Generation, Prompt, SamplingParams, as_chat, template_messages
from trainers.errors import BackendError


@dataclass(frozen=True)
class OpenAIConfig:
    """Where the server is and how to talk to it.

    Attributes:
        base_url: the API root, e.g. "http://127.0.0.1:8000/v1".
        model: the served model name.
        api_key: bearer token; `$OPENAI_API_KEY` when None ("EMPTY" when that is unset too).
        max_concurrency: requests in flight at once.
        timeout_s: per-request timeout.
        retries: extra attempts after a retryable failure.
        backoff_s: first back-off; doubles per attempt.
        logprobs: ask for per-token log-probs.
        token_ids: ask for token ids as well (vLLM's `return_tokens_as_token_ids` extension; turn
            it off for servers that reject unknown fields).
    """

    base_url: str
    model: str = "default"
    api_key: str | None = None
    max_concurrency: int = 8
    timeout_s: float = 120.0
    retries: int = 3
    backoff_s: float = 0.5
    logprobs: bool = True
    token_ids: bool = True

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"OpenAIConfig.base_url: expected an http(s) URL, got {self.base_url!r}")
        if self.max_concurrency < 1 or self.retries < 0 or self.timeout_s <= 0:
            raise ValueError("OpenAIConfig: expected max_concurrency >= 1, retries >= 0 and timeout_s > 0")


def _token_id(token: str) -> int | None:
    if token.startswith("token_id:"):
        try:
            return int(token.removeprefix("token_id:"))
        except ValueError:
            return None
    return None


def choice_to_generation(choice: dict[str, Any], prompt_tokens: int = 0) -> Generation:
    """One `choices[i]` of a chat completion as a Generation (tool calls rendered as Hermes text)."""
    message = choice.get("message") or {}
    if message.get("tool_calls"):
        text = render_completion(Message.from_json({**message, "role": "assistant"}), "tool-use")
    else:
        text = message.get("content") or ""
    items = ((choice.get("logprobs") or {}).get("content")) or []
    logprobs = tuple(float(i.get("logprob", 0.0)) for i in items)
    ids = tuple(_token_id(str(i.get("token", ""))) for i in items)
    token_ids = () if any(t is None for t in ids) else ids
    finish = "length" if choice.get("finish_reason") == "length" else "stop"
    return Generation(text, token_ids, logprobs, finish, prompt_tokens)


class OpenAIBackend:
    """Samples from an OpenAI-compatible chat-completions server.

    Args:
        config: the server and the client's limits.
    """

    def __init__(self, config: OpenAIConfig) -> None:
        self.config = config
        self.policy_id = f"openai:{config.base_url.rstrip('/')}#{config.model}"
        self._key = config.api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"

    def generate(self, prompts: Sequence[Prompt], n: int, params: SamplingParams) -> list[list[Generation]]:
        """Sample `n` completions per prompt (see `GenerationBackend.generate`); blocks until done."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.agenerate(prompts, n, params))
        # Called from inside an event loop (a notebook, an async trainer): run on a private one.
        box: dict[str, Any] = {}
        thread = threading.Thread(target=lambda: box.update(r=asyncio.run(self.agenerate(prompts, n, params))))
        thread.start()
        thread.join()
        return box["r"]

    async def agenerate(self, prompts: Sequence[Prompt], n: int, params: SamplingParams) -> list[list[Generation]]:
        """Async `generate`: one request per prompt (`n` choices each), bounded concurrency."""
        import httpx

        if n < 1:
            raise ValueError(f"generate: expected n >= 1, got {n}")
        limits = httpx.Limits(max_connections=self.config.max_concurrency)
        gate = asyncio.Semaphore(self.config.max_concurrency)
        headers = {"Authorization": f"Bearer {self._key}"}
        async with httpx.AsyncClient(
            base_url=self.config.base_url.rstrip("/"), headers=headers, limits=limits, timeout=self.config.timeout_s
        ) as client:

            async def one(i: int, prompt: Prompt) -> list[Generation]:
                async with gate:
                    return await self._complete(client, self.request_body(prompt, n, params, i), n)

            return list(await asyncio.gather(*(one(i, p) for i, p in enumerate(prompts))))

    def request_body(self, prompt: Prompt, n: int, params: SamplingParams, index: int = 0) -> dict[str, Any]:
        """The JSON body of one chat-completions request."""
        chat = as_chat(prompt)
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": template_messages(chat["messages"]),
            "n": n,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_new_tokens,
        }
        for m in body["messages"]:  # the wire format keeps arguments as JSON strings
            for c in m.get("tool_calls", []):
                c["function"] = {**c["function"], "arguments": _as_json_text(c["function"]["arguments"])}
        if chat["tools"]:
            body["tools"] = chat["tools"]
        if params.seed is not None:
            body["seed"] = params.seed + index  # distinct prompts, distinct streams
        if params.stop:
            body["stop"] = list(params.stop)
        if self.config.logprobs:
            body["logprobs"] = True
            if self.config.token_ids:
                body["return_tokens_as_token_ids"] = True
        return body

    async def _complete(self, client: Any, body: dict[str, Any], n: int) -> list[Generation]:
        import httpx

        delay = self.config.backoff_s
        last = ""
        for attempt in range(self.config.retries + 1):
            try:
                r = await client.post("/chat/completions", json=body)
                if r.status_code == 429 or r.status_code >= 500:
                    last = f"HTTP {r.status_code}: {r.text[:200]}"
                elif r.status_code >= 400:
                    raise BackendError(f"{self.policy_id}: HTTP {r.status_code}: {r.text[:500]}")
                else:
                    return self._parse(r.json(), n)
            except (httpx.TimeoutException, httpx.TransportError) as e:
                last = f"{type(e).__name__}: {e}"
            if attempt < self.config.retries:
                await asyncio.sleep(delay)
                delay *= 2
        raise BackendError(f"{self.policy_id}: failed after {self.config.retries + 1} attempts; last error: {last}")

    def _parse(self, payload: Any, n: int) -> list[Generation]:
        try:
            choices = sorted(payload["choices"], key=lambda c: c.get("index", 0))
            prompt_tokens = int((payload.get("usage") or {}).get("prompt_tokens") or 0)
            gens = [choice_to_generation(c, prompt_tokens) for c in choices]
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise BackendError(f"{self.policy_id}: unreadable reply ({type(e).__name__}: {e})") from e
        if len(gens) != n:
            raise BackendError(f"{self.policy_id}: expected {n} choices, got {len(gens)}")
        return gens


def _as_json_text(args: Any) -> str:
    import json

    return args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
