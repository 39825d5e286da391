"""`pivot serve`: a pivot env over HTTP (FastAPI), with bounded concurrency and backpressure.

Endpoints (JSON in and out, all under `/v1`):

- `GET /health`: status, env id, pivot count, and the admission counters.
- `POST /sessions`: a new episode stream (its own RNG and current pivot); `DELETE /sessions/{id}`.
- `POST /sessions/{id}/reset` `{seed, options}` -> `{observation, info}`.
- `POST /sessions/{id}/step` `{action}` -> `{observation, reward, terminated, truncated, info}`.
- `POST /verify-batch` `{pivot_id, completions}` -> `{pivot_id, results: [ChainResult.to_json()]}`.

Safety (the server runs model-written commands in sandboxes, so it is remote code execution by
design; see `_server_guard`): off loopback every request needs `Authorization: Bearer <token>`;
bodies over `max_body_bytes` get 413 before they are read; a completion over the env's
`max_completion_chars` gets 413 in step and verify-batch alike; bodies are decoded with
`decode_json` and validated strictly, so wrong types, negative seeds, huge integers, deep nesting
and lone surrogates get a 4xx with a message, never a 500; a completion is never echoed back
(`info["action"]` is a summary); sessions are owned by one client under quotas (`_server_sessions`).

Verification is CPU- or sandbox-bound, so it runs on at most `concurrency` worker threads. At most
`max_queue` more requests wait; beyond that the server answers `503` with a `Retry-After` header
(and a finer `retry_after_s` hint in the body) instead of queueing without bound, and clients
retry (`pivot_envs.remote`). A session is a shallow copy of one loaded env: it shares the pivots
and the verifier chain and owns only its RNG and current pivot.
"""

from __future__ import annotations

import inspect
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from pivot_cli._server_guard import TokenAuth, request_timeout_protocol, resolve_tokens
from pivot_cli._server_requests import (
    BadRequest,
    ResetRequest,
    StepRequest,
    VerifyBatchRequest,
    action_summary,
    check_completions,
    client_of,
    read_body,
)
from pivot_cli._server_sessions import Sessions
from pivot_cli.errors import Busy, SessionNotFound, SessionRefused
from pivot_core.errors import UnknownPivot
from pivot_envs import PivotEnv

API = "/v1"


@dataclass(frozen=True)
class ServerConfig:
    """How much work the server admits.

    Attributes:
        concurrency: worker threads that run resets, steps and verifications at once.
        max_queue: requests allowed to wait for a worker; one more gets 503 + Retry-After.
        max_sessions: live sessions held in all; a new one beyond it is refused (429) unless
            an expired one can be reclaimed.
        max_sessions_per_client: live sessions one client (token, else address) may hold.
        session_ttl_s: idle seconds after which a session expires.
        max_batch: the most completions one verify-batch request may carry.
        max_body_bytes: the largest request body read; a larger one gets 413 unread.
        request_timeout_s: seconds a client has to send a whole request (head and body).
        max_connections: open connections at most; uvicorn answers 503 beyond (clients retry), so
            many slow clients cannot exhaust file descriptors either.
        forwarded_allow_ips: peers (addresses or networks, uvicorn's syntax) whose
            `X-Forwarded-For`/`X-Forwarded-Proto` headers are believed: a reverse proxy in front
            of the server. Empty (the default) believes no such header from anyone, loopback
            included, since the client's address is whose quota and sessions a request uses.
    """

    # -- work admitted
    concurrency: int = 8
    max_queue: int = 256
    max_batch: int = 256
    # -- sessions
    max_sessions: int = 4096
    max_sessions_per_client: int = 1024
    session_ttl_s: float = 3600.0
    # -- what one request may cost
    max_body_bytes: int = 1024 * 1024
    request_timeout_s: float = 30.0
    max_connections: int = 1024
    # -- who the client is
    forwarded_allow_ips: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in (
            "concurrency",
            "max_sessions",
            "max_sessions_per_client",
            "max_batch",
            "max_body_bytes",
            "max_connections",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"ServerConfig.{name}: expected >= 1, got {getattr(self, name)}")
        if self.max_queue < 0:
            raise ValueError(f"ServerConfig.max_queue: expected >= 0, got {self.max_queue}")
        for name in ("session_ttl_s", "request_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"ServerConfig.{name}: expected > 0, got {getattr(self, name)}")
        ips = tuple(str(ip).strip() for ip in self.forwarded_allow_ips)
        if any(not ip for ip in ips):
            raise ValueError(f"ServerConfig.forwarded_allow_ips: expected addresses, got {self.forwarded_allow_ips!r}")
        object.__setattr__(self, "forwarded_allow_ips", ips)


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
        """Serialize; values JSON lacks (tuples aside) fall back to `str`.

        Text holding a lone surrogate (a verifier's reason may quote a candidate) cannot be
        UTF-8: such a payload is written with ASCII escapes instead of failing with a 500.
        """
        try:
            return json.dumps(content, ensure_ascii=False, default=str).encode("utf-8")
        except UnicodeEncodeError:
            return json.dumps(content, ensure_ascii=True, default=str).encode("ascii")


def create_app(
    env: PivotEnv,
    env_id: str,
    config: ServerConfig | None = None,
    executor: Any = None,
    tokens: tuple[str, ...] = (),
) -> FastAPI:
    """The FastAPI app serving one loaded env (`env` is the unwrapped `PivotEnv`).

    With an `executor` (`trainers.executors`, e.g. Ray workers on other hosts), verify-batch
    requests are scored there, routed by sandbox state; reset and step stay in this process.
    With `tokens`, every request must carry one of them (`Authorization: Bearer <token>`).
    """
    config = config or ServerConfig()
    if "max_body_size" not in inspect.signature(FastAPI).parameters:
        # An older FastAPI takes the keyword into `app.extra` and enforces nothing: refuse, never guess.
        raise RuntimeError("pivot serve needs FastAPI's max_body_size (fastapi>=0.165): pip install -U fastapi")
    admission = Admission(config)
    sessions = Sessions(env, config.max_sessions, config.max_sessions_per_client, config.session_ttl_s)
    app = FastAPI(title=f"pivot-gym {env_id}", default_response_class=FastJSON, max_body_size=config.max_body_bytes)
    app.state.admission = admission
    app.state.sessions = sessions
    if tokens:
        app.add_middleware(TokenAuth, tokens=tokens)
    _add_error_handlers(app)
    _add_session_routes(app, env, env_id, sessions, admission)
    _add_verify_route(app, env, config, admission, executor)
    return app


def _add_session_routes(app: FastAPI, env: PivotEnv, env_id: str, sessions: Sessions, admission: Admission) -> None:
    """`GET /health` and the session routes: create, drop, reset, step."""
    max_chars = env.action_space.max_length

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
    async def new_session(request: Request) -> FastJSON:
        return FastJSON(
            {
                "session_id": sessions.create(client_of(request)),
                "env_id": env_id,
                "domain": env.domain,
                "num_pivots": len(env.pivots),
                "max_completion_chars": max_chars,
            }
        )

    @app.delete(f"{API}/sessions/{{sid}}")
    async def drop_session(sid: str, request: Request) -> FastJSON:
        return FastJSON({"session_id": sid[:64], "dropped": sessions.drop(sid, client_of(request))})

    @app.post(f"{API}/sessions/{{sid}}/reset")
    async def reset(sid: str, request: Request) -> FastJSON:
        session = sessions.get(sid, client_of(request))
        body = await read_body(request, ResetRequest)
        options = {"pivot_id": body.options.pivot_id} if body.options and body.options.pivot_id is not None else None
        obs, info = await admission.run(lambda: session.reset(seed=body.seed, options=options))
        return FastJSON({"observation": obs, "info": info})

    @app.post(f"{API}/sessions/{{sid}}/step")
    async def step(sid: str, request: Request) -> FastJSON:
        session = sessions.get(sid, client_of(request))
        body = await read_body(request, StepRequest)
        check_completions([body.action], max_chars)
        if session.current is None:
            raise HTTPException(409, "call reset before step in this session")
        obs, reward, terminated, truncated, info = await admission.run(session.step, body.action)
        info = {**info, "action": action_summary(info["action"])}
        return FastJSON(
            {"observation": obs, "reward": reward, "terminated": terminated, "truncated": truncated, "info": info}
        )


def _add_verify_route(app: FastAPI, env: PivotEnv, config: ServerConfig, admission: Admission, executor: Any) -> None:
    """`POST /verify-batch`: score completions at one pivot, here or on the executor's workers."""
    max_chars = env.action_space.max_length

    @app.post(f"{API}/verify-batch")
    async def verify_batch(request: Request) -> FastJSON:
        body = await read_body(request, VerifyBatchRequest)
        if len(body.completions) > config.max_batch:
            raise HTTPException(413, f"expected at most {config.max_batch} completions, got {len(body.completions)}")
        check_completions(body.completions, max_chars)
        pivot = env.pivot(body.pivot_id)
        if executor is None:
            results = await admission.run(env.score, pivot, body.completions)
        else:
            results = await admission.run(_remote_score, executor, pivot, body.completions)
        return FastJSON({"pivot_id": body.pivot_id, "results": [r.to_json() for r in results]})


def _add_error_handlers(app: FastAPI) -> None:
    """Every refusal is JSON `{"error": message}` with a 4xx/503; an unexpected failure a bare 500."""

    def error(status: int, message: str, headers: dict[str, str] | None = None, **extra: Any) -> FastJSON:
        return FastJSON({"error": message, **extra}, status_code=status, headers=headers)

    @app.exception_handler(Busy)
    async def busy(_: Request, exc: Busy) -> FastJSON:
        return error(
            503,
            "server busy: queue full",
            {"Retry-After": str(max(1, math.ceil(exc.retry_after_s)))},
            retry_after_s=round(exc.retry_after_s, 3),
        )

    @app.exception_handler(UnknownPivot)
    async def unknown_pivot(_: Request, exc: UnknownPivot) -> FastJSON:
        return error(404, str(exc)[:1000])

    @app.exception_handler(SessionNotFound)
    async def unknown_session(_: Request, exc: SessionNotFound) -> FastJSON:
        return error(404, str(exc))

    @app.exception_handler(SessionRefused)
    async def refused_session(_: Request, exc: SessionRefused) -> FastJSON:
        return error(429, str(exc))

    @app.exception_handler(BadRequest)
    async def bad_request(_: Request, exc: BadRequest) -> FastJSON:
        return error(exc.status, str(exc)[:2000])

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> FastJSON:
        return error(exc.status_code, str(exc.detail)[:2000], exc.headers)

    @app.exception_handler(Exception)
    async def internal(_: Request, exc: Exception) -> FastJSON:
        # A bug, not bad input: say which kind without echoing anything the client sent.
        return error(500, f"internal error ({type(exc).__name__}); see the server log")


def _remote_score(executor: Any, pivot: Any, completions: list[str]) -> list[Any]:
    from trainers.executors import VerifyTask

    return executor.verify([VerifyTask(pivot, tuple(completions))])[0]


def uvicorn_config(app: Any, host: str, port: int, config: ServerConfig) -> Any:
    """The `uvicorn.Config` that `pivot serve` runs `app` with (tests start their servers from it too).

    uvicorn believes `X-Forwarded-For` from loopback peers unless told otherwise, so any local
    client could claim any address: another client's quota and sessions. Forwarding headers are
    believed only from `config.forwarded_allow_ips` (none by default; `$FORWARDED_ALLOW_IPS` is
    ignored too, so the environment cannot turn it back on).
    """
    import uvicorn

    trusted = list(config.forwarded_allow_ips)
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        # One process, one event loop: the admission counters assume a single worker.
        workers=1,
        http=request_timeout_protocol(config.request_timeout_s),
        limit_concurrency=config.max_connections,
        # Request heads past 64 KiB are refused by h11 before the app sees them.
        h11_max_incomplete_event_size=64 * 1024,
        proxy_headers=bool(trusted),
        forwarded_allow_ips=trusted or [],
    )


def serve(
    env_id: str,
    host: str = "127.0.0.1",
    port: int = 8000,
    config: ServerConfig | None = None,
    executor: str = "in-process",
    token: str | None = None,
    **env_kwargs: Any,
) -> None:
    """Load `env_id` (with `env_kwargs`) and serve it with uvicorn until interrupted.

    `executor="ray"` scores verify-batch requests on Ray workers (the `scale` extra). `token`
    (else `$PIVOT_SERVE_TOKEN`; commas separate one token per client) is required for any bind
    but loopback.

    Raises:
        ServeRefused: a non-loopback `host` without a token, or a token that is too short.
    """
    import gymnasium as gym
    import uvicorn

    import pivot_envs  # noqa: F401  (registers the ids)

    config = config or ServerConfig()
    tokens = resolve_tokens(host, token)  # before loading anything: refuse fast
    env = gym.make(env_id, **env_kwargs).unwrapped
    pool = None
    if executor != "in-process":
        from trainers.executors import EnvSpec, make_executor

        pool = make_executor(executor, EnvSpec(env_id, env_kwargs))
    try:
        uvicorn.Server(uvicorn_config(create_app(env, env_id, config, pool, tokens), host, port, config)).run()
    finally:
        if pool is not None:
            pool.close()


__all__ = ["Admission", "Busy", "ServerConfig", "action_summary", "create_app", "serve", "uvicorn_config"]
