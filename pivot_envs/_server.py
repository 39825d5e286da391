"""`pivot serve`: a pivot env over HTTP (FastAPI), with bounded concurrency and backpressure.

Endpoints (JSON in and out, all under `/v1`):

- `GET /health`: status, env id, pivot count, and the admission counters.
- `POST /sessions`: a new episode stream (its own RNG and current pivot); `DELETE /sessions/{id}`.
- `POST /sessions/{id}/reset` `{seed, options}` -> `{observation, info}`.
- `POST /sessions/{id}/step` `{action}` -> `{observation, reward, terminated, truncated, info}`.
- `POST /verify-batch` `{pivot_id, completions}` -> `{pivot_id, results: [ChainResult.to_json()]}`.

Verification is CPU- or sandbox-bound, so it runs on at most `concurrency` worker threads. At most
`max_queue` more requests wait; beyond that the server answers `503` with a `Retry-After` header
(and a finer `retry_after_s` hint in the body) instead of queueing without bound, and clients
retry (`pivot_envs.remote`). A session is a shallow copy of one loaded env: it shares the pivots
and the verifier chain and owns only its RNG and current pivot.
"""

from __future__ import annotations

import copy
import json
import math
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from pivot_envs._env import PivotEnv
from pivot_envs.errors import UnknownPivot

API = "/v1"


@dataclass(frozen=True)
class ServerConfig:
    """How much work the server admits.

    Attributes:
        concurrency: worker threads that run resets, steps and verifications at once.
        max_queue: requests allowed to wait for a worker; one more gets 503 + Retry-After.
        max_sessions: live sessions kept; the least recently used is dropped beyond it.
        max_batch: the most completions one verify-batch request may carry.
    """

    concurrency: int = 8
    max_queue: int = 256
    max_sessions: int = 4096
    max_batch: int = 256

    def __post_init__(self) -> None:
        for name in ("concurrency", "max_sessions", "max_batch"):
            if getattr(self, name) < 1:
                raise ValueError(f"ServerConfig.{name}: expected >= 1, got {getattr(self, name)}")
        if self.max_queue < 0:
            raise ValueError(f"ServerConfig.max_queue: expected >= 0, got {self.max_queue}")


class Busy(Exception):
    """Raised by `Admission.run` when the queue is full (becomes a 503)."""

    def __init__(self, retry_after_s: float) -> None:
        super().__init__("server busy")
        self.retry_after_s = retry_after_s


class Admission:
    """Admits at most `concurrency + max_queue` requests; runs them on `concurrency` threads.

    Counters are touched only on the event-loop thread, so they need no lock.
    """

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.limiter = anyio.CapacityLimiter(config.concurrency)
        self.pending = 0
        self.served = 0
        self.rejected = 0
        self._mean_s = 0.01  # running mean service time, for the retry hint

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run `fn(*args)` on a worker thread, or raise `Busy` when the queue is full."""
        if self.pending >= self.config.concurrency + self.config.max_queue:
            self.rejected += 1
            # Roughly when a slot frees up: the queue drains at `concurrency` requests per mean time.
            raise Busy(max(0.01, self._mean_s * self.pending / self.config.concurrency))
        self.pending += 1
        try:
            return await anyio.to_thread.run_sync(self._timed, fn, args, limiter=self.limiter)
        finally:
            self.pending -= 1
            self.served += 1

    def _timed(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        # Service time only (not the wait for a worker): the retry hint scales it by the queue length.
        start = time.perf_counter()
        try:
            return fn(*args)
        finally:
            self._mean_s = 0.9 * self._mean_s + 0.1 * (time.perf_counter() - start)

    def stats(self) -> dict[str, int]:
        """Counters for /health."""
        running = int(self.limiter.borrowed_tokens)
        return {
            "in_flight": running,
            "queued": max(0, self.pending - running),
            "served": self.served,
            "rejected": self.rejected,
            "concurrency": self.config.concurrency,
            "max_queue": self.config.max_queue,
        }


class FastJSON(JSONResponse):
    """Plain `json.dumps` of the already JSON-shaped payloads (skips FastAPI's generic encoder)."""

    def render(self, content: Any) -> bytes:
        """Serialize; values JSON lacks (tuples aside) fall back to `str`."""
        return json.dumps(content, ensure_ascii=False, default=str).encode("utf-8")


class ResetRequest(BaseModel):
    """Body of `reset`."""

    seed: int | None = None
    options: dict[str, Any] | None = None


class StepRequest(BaseModel):
    """Body of `step`."""

    action: str


class VerifyBatchRequest(BaseModel):
    """Body of `verify-batch`."""

    pivot_id: str
    completions: list[str] = Field(min_length=1)


class Sessions:
    """Live sessions, least recently used dropped first (a dropped id answers 404)."""

    def __init__(self, base: PivotEnv, limit: int) -> None:
        self.base = base
        self.limit = limit
        self._envs: OrderedDict[str, PivotEnv] = OrderedDict()

    def create(self) -> str:
        """A new session: a shallow copy of the loaded env with its own RNG and episode state."""
        env = copy.copy(self.base)
        env._np_random = None
        env._np_random_seed = None
        env.current = None
        env.action_space = copy.deepcopy(self.base.action_space)
        sid = uuid.uuid4().hex
        self._envs[sid] = env
        if len(self._envs) > self.limit:
            self._envs.popitem(last=False)
        return sid

    def get(self, sid: str) -> PivotEnv:
        """The session's env, or 404."""
        env = self._envs.get(sid)
        if env is None:
            raise HTTPException(404, f"unknown session {sid!r} (expired or never created): create a new one")
        self._envs.move_to_end(sid)
        return env

    def drop(self, sid: str) -> bool:
        """Forget a session; True when it existed."""
        return self._envs.pop(sid, None) is not None

    def __len__(self) -> int:
        return len(self._envs)


def create_app(env: PivotEnv, env_id: str, config: ServerConfig | None = None, executor: Any = None) -> FastAPI:
    """The FastAPI app serving one loaded env (`env` is the unwrapped `PivotEnv`).

    With an `executor` (`trainers.executors`, e.g. Ray workers on other hosts), verify-batch
    requests are scored there, routed by sandbox state; reset and step stay in this process.
    """
    config = config or ServerConfig()
    admission = Admission(config)
    sessions = Sessions(env, config.max_sessions)
    app = FastAPI(title=f"pivot-gym {env_id}", default_response_class=FastJSON)
    app.state.admission = admission

    @app.exception_handler(Busy)
    async def busy(_: Request, exc: Busy) -> JSONResponse:
        return JSONResponse(
            {"error": "server busy: queue full", "retry_after_s": round(exc.retry_after_s, 3)},
            status_code=503,
            headers={"Retry-After": str(max(1, math.ceil(exc.retry_after_s)))},
        )

    @app.exception_handler(UnknownPivot)
    async def unknown_pivot(_: Request, exc: UnknownPivot) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=404)

    @app.get(f"{API}/health")
    async def health() -> FastJSON:
        return FastJSON(
            {
                "status": "ok",
                "env_id": env_id,
                "domain": env.domain,
                "num_pivots": len(env.pivots),
                "sessions": len(sessions),
                "chain": env.chain.names,
                **admission.stats(),
            }
        )

    @app.post(f"{API}/sessions")
    async def new_session() -> dict[str, Any]:
        return {
            "session_id": sessions.create(),
            "env_id": env_id,
            "domain": env.domain,
            "num_pivots": len(env.pivots),
            "max_completion_chars": env.action_space.max_length,
        }

    @app.delete(f"{API}/sessions/{{sid}}")
    async def drop_session(sid: str) -> dict[str, Any]:
        return {"session_id": sid, "dropped": sessions.drop(sid)}

    @app.post(f"{API}/sessions/{{sid}}/reset")
    async def reset(sid: str, body: ResetRequest) -> FastJSON:
        session = sessions.get(sid)
        obs, info = await admission.run(lambda: session.reset(seed=body.seed, options=body.options))
        return FastJSON({"observation": obs, "info": info})

    @app.post(f"{API}/sessions/{{sid}}/step")
    async def step(sid: str, body: StepRequest) -> FastJSON:
        session = sessions.get(sid)
        if session.current is None:
            raise HTTPException(409, "call reset before step in this session")
        obs, reward, terminated, truncated, info = await admission.run(session.step, body.action)
        return FastJSON(
            {"observation": obs, "reward": reward, "terminated": terminated, "truncated": truncated, "info": info}
        )

    @app.post(f"{API}/verify-batch")
    async def verify_batch(body: VerifyBatchRequest) -> FastJSON:
        if len(body.completions) > config.max_batch:
            raise HTTPException(413, f"expected at most {config.max_batch} completions, got {len(body.completions)}")
        if executor is None:
            results = await admission.run(env.score, body.pivot_id, body.completions)
        else:
            results = await admission.run(_remote_score, executor, env.pivot(body.pivot_id), body.completions)
        return FastJSON({"pivot_id": body.pivot_id, "results": [r.to_json() for r in results]})

    return app


def _remote_score(executor: Any, pivot: Any, completions: list[str]) -> list[Any]:
    from trainers.executors import VerifyTask

    return executor.verify([VerifyTask(pivot, tuple(completions))])[0]


def serve(
    env_id: str,
    host: str = "127.0.0.1",
    port: int = 8000,
    config: ServerConfig | None = None,
    executor: str = "in-process",
    **env_kwargs: Any,
) -> None:
    """Load `env_id` (with `env_kwargs`) and serve it with uvicorn until interrupted.

    `executor="ray"` scores verify-batch requests on Ray workers (the `scale` extra).
    """
    import gymnasium as gym
    import uvicorn

    import pivot_envs  # noqa: F401  (registers the ids)

    env = gym.make(env_id, **env_kwargs).unwrapped
    pool = None
    if executor != "in-process":
        from trainers.executors import EnvSpec, make_executor

        pool = make_executor(executor, EnvSpec(env_id, env_kwargs))
    try:
        # One process, one event loop: the admission counters assume a single worker.
        uvicorn.run(create_app(env, env_id, config, pool), host=host, port=port, log_level="warning", workers=1)
    finally:
        if pool is not None:
            pool.close()


__all__ = ["Admission", "Busy", "ServerConfig", "create_app", "serve"]
