"""A minimal OpenAI-compatible chat-completions server over any `GenerationBackend`.

It serves a local policy (e.g. the tiny model through `TransformersBackend`) to anything that
speaks the OpenAI API: the `openai` backend, an LLM judge client, other tools. Completions are
returned as text (Hermes `<tool_call>` blocks stay in `content`, like `vllm serve` without a
tool parser). Requests are served one at a time: a local model is one compute resource.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

from trainers.backends._base import GenerationBackend, SamplingParams


def build_app(backend: GenerationBackend, model_name: str = "default") -> Any:
    """A FastAPI app with `GET /v1/models` and `POST /v1/chat/completions`."""
    from fastapi import FastAPI, HTTPException

    app = FastAPI(title="pivot-gym policy server")
    lock = threading.Lock()

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": model_name, "object": "model", "owned_by": "pivot-gym"}]}

    @app.post("/v1/chat/completions")
    def chat_completions(body: dict[str, Any]) -> dict[str, Any]:
        try:
            params = SamplingParams(
                max_new_tokens=int(body.get("max_tokens") or body.get("max_completion_tokens") or 128),
                temperature=float(body.get("temperature", 1.0)),
                top_p=float(body.get("top_p", 1.0)),
                seed=body.get("seed"),
                stop=tuple([body["stop"]] if isinstance(body.get("stop"), str) else body.get("stop") or ()),
            )
            n = int(body.get("n", 1))
            prompt = {"messages": body["messages"], "tools": body.get("tools") or []}
        except (KeyError, TypeError, ValueError) as e:
            raise HTTPException(status_code=400, detail=f"bad request: {e}") from e
        with lock:
            gens = backend.generate([prompt], n, params)[0]
        as_ids = bool(body.get("return_tokens_as_token_ids"))
        choices = []
        for i, g in enumerate(gens):
            choice: dict[str, Any] = {
                "index": i,
                "message": {"role": "assistant", "content": g.text},
                "finish_reason": g.finish_reason,
            }
            if body.get("logprobs"):
                tokens = [f"token_id:{t}" if as_ids else str(t) for t in g.token_ids]
                choice["logprobs"] = {
                    "content": [{"token": t, "logprob": lp} for t, lp in zip(tokens, g.logprobs, strict=False)]
                }
            choices.append(choice)
        completion_tokens = sum(len(g.token_ids) for g in gens)
        prompt_tokens = gens[0].prompt_tokens if gens else 0
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model_name,
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    return app


class ServerThread:
    """Run an ASGI app with uvicorn on a loopback port in a daemon thread (tests, notebooks).

    Args:
        app: the ASGI app.
        host: the interface to bind.
        port: 0 picks a free port; read it back from `.port`.
    """

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0) -> None:
        import uvicorn

        self.server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.host = host
        self.port = port

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the server did not start")
            time.sleep(0.02)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        return self

    @property
    def url(self) -> str:
        """The `/v1` root URL."""
        return f"http://{self.host}:{self.port}/v1"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
