"""Clients of `pivot serve`: `RemoteEnv` (a `gymnasium.Env`) and `AsyncVerifyClient`.

Both retry a `503` (the server's backpressure answer) after the delay it suggests, with jittered
exponential backoff, and retry connection failures that happened before the request was sent;
other HTTP errors raise `RemoteError` with the server's message. A server that needs a token
gets the `token` argument, else `$PIVOT_SERVE_TOKEN`, as `Authorization: Bearer <token>`.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium as gym
import httpx

from pivot_core.errors import UnknownPivot
from pivot_envs._spaces import ChatSpace, CompletionSpace
from pivot_envs.errors import RemoteError

API = "/v1"
# Failures before any byte reached the server: safe to retry for every endpoint.
RETRYABLE = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# A kept-alive connection the server closed as the request went out, or a reset under load, shows
# up as one of these. Only idempotent calls (verify-batch, health) retry on them: a lost `reset`
# answer re-sent could draw a second pivot.
IDEMPOTENT_RETRYABLE = (*RETRYABLE, httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)


def auth_headers(token: str | None) -> dict[str, str]:
    """`Authorization` for `token`, else for `$PIVOT_SERVE_TOKEN` (its first token), else none."""
    token = token or os.environ.get("PIVOT_SERVE_TOKEN", "").split(",")[0].strip() or None
    return {"Authorization": f"Bearer {token}"} if token else {}


@dataclass(frozen=True)
class RetryPolicy:
    """How clients wait out a busy server.

    Attributes:
        max_attempts: tries per request (the first included).
        base_delay_s: first backoff when the server gives no hint.
        max_delay_s: the longest single wait.
    """

    max_attempts: int = 50
    base_delay_s: float = 0.05
    max_delay_s: float = 2.0

    def delay(self, attempt: int, response: httpx.Response | None) -> float:
        """Seconds to wait before try `attempt + 1` (server hint first, else backoff), jittered."""
        hint = None
        if response is not None:
            try:
                hint = float(response.json().get("retry_after_s"))
            except (ValueError, TypeError, AttributeError):
                hint = float(response.headers.get("Retry-After", "0") or 0) or None
        base = hint if hint else self.base_delay_s * 2 ** min(attempt, 10)
        # Jitter spreads the retries of many clients turned away at the same moment.
        return min(self.max_delay_s, base) * (0.5 + random.random())


def _check(response: httpx.Response) -> dict[str, Any]:
    if response.status_code < 400:
        return response.json()
    try:
        message = response.json().get("error") or response.json().get("detail") or response.text
    except ValueError:
        message = response.text
    if response.status_code == 404 and "pivot id" in str(message):
        raise UnknownPivot(str(message))
    raise RemoteError(response.status_code, str(message))


def _as_ascii_json(kwargs: dict[str, Any]) -> dict[str, Any]:
    """`json=` sent as ASCII JSON, so every str can be sent.

    Text httpx cannot encode as UTF-8 (a lone surrogate) reaches the server as an escape, which
    answers it with a 422, instead of the client raising UnicodeEncodeError.
    """
    if "json" not in kwargs:
        return kwargs
    out = dict(kwargs)
    out["content"] = json.dumps(out.pop("json")).encode("ascii")
    out["headers"] = {**(out.get("headers") or {}), "Content-Type": "application/json"}
    return out


def request(client: httpx.Client, method: str, path: str, retry: RetryPolicy, **kwargs: Any) -> dict[str, Any]:
    """One request with retries on 503 and on connection failures."""
    kwargs = _as_ascii_json(kwargs)
    response: httpx.Response | None = None
    for attempt in range(retry.max_attempts):
        try:
            response = client.request(method, path, **kwargs)
        except RETRYABLE:
            response = None
        else:
            if response.status_code != 503:
                return _check(response)
        if attempt + 1 < retry.max_attempts:
            time.sleep(retry.delay(attempt, response))
    raise RemoteError(
        503 if response is not None else 0,
        f"{method} {path}: server still busy or unreachable after {retry.max_attempts} attempts",
    )


async def arequest(
    client: httpx.AsyncClient, method: str, path: str, retry: RetryPolicy, **kwargs: Any
) -> dict[str, Any]:
    """`request` for asyncio clients (verify-batch and health: idempotent, so read errors retry too)."""
    kwargs = _as_ascii_json(kwargs)
    response: httpx.Response | None = None
    for attempt in range(retry.max_attempts):
        try:
            response = await client.request(method, path, **kwargs)
        except IDEMPOTENT_RETRYABLE:
            response = None
        else:
            if response.status_code != 503:
                return _check(response)
        if attempt + 1 < retry.max_attempts:
            await asyncio.sleep(retry.delay(attempt, response))
    raise RemoteError(
        503 if response is not None else 0,
        f"{method} {path}: server still busy or unreachable after {retry.max_attempts} attempts",
    )


class RemoteEnv(gym.Env[dict, str]):
    """A pivot env served by `pivot serve`, as a local `gymnasium.Env`.

    Same contract as `PivotEnv` (observation, action, reward, `terminated`, `info` keys): the
    server runs the env, this object holds one server-side session. The local `np_random` is
    seeded like any env's; pivot draws happen on the server from the same seed, so seeded runs
    are reproducible across client and server.

    Args:
        url: the server's base URL, e.g. `http://gpu-box:8000`.
        timeout: seconds per HTTP request (sandbox verification can be slow).
        retry: how to wait out a busy server.
        token: the server's token (default `$PIVOT_SERVE_TOKEN`); loopback servers may need none.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(
        self, url: str, *, timeout: float = 120.0, retry: RetryPolicy | None = None, token: str | None = None
    ) -> None:
        self.url = url.rstrip("/")
        self.retry = retry or RetryPolicy()
        self._client = httpx.Client(base_url=self.url + API, timeout=timeout, headers=auth_headers(token))
        try:
            session = request(self._client, "POST", "/sessions", self.retry)
        except Exception:
            self._client.close()
            raise
        self.session_id: str = session["session_id"]
        self.env_id: str = session["env_id"]
        self.domain: str = session["domain"]
        self.num_pivots: int = session["num_pivots"]
        self.observation_space = ChatSpace()
        self.action_space = CompletionSpace(max_length=int(session["max_completion_chars"]))

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        """Reset the server-side session (same `seed` and `options` as `PivotEnv.reset`)."""
        super().reset(seed=seed)
        if seed is not None:
            self.action_space.seed(seed)
        out = request(
            self._client,
            "POST",
            f"/sessions/{self.session_id}/reset",
            self.retry,
            json={"seed": seed, "options": options},
        )
        return out["observation"], out["info"]

    def step(self, action: str) -> tuple[dict, float, bool, bool, dict]:
        """Score one completion at the session's current pivot.

        `info["action"]` is a summary of the parsed action (the server never echoes the completion).
        A completion over `max_completion_chars`, or holding a lone surrogate (not Unicode text),
        is refused by the server with a 4xx: `RemoteError`.
        """
        out = request(
            self._client,
            "POST",
            f"/sessions/{self.session_id}/step",
            self.retry,
            json={"action": action if isinstance(action, str) else str(action)},
        )
        return out["observation"], float(out["reward"]), out["terminated"], out["truncated"], out["info"]

    def verify_batch(self, pivot_id: str, completions: Sequence[str]) -> list[dict[str, Any]]:
        """Score a group of completions at one pivot (`ChainResult.to_json()` per completion)."""
        out = request(
            self._client,
            "POST",
            "/verify-batch",
            self.retry,
            json={"pivot_id": pivot_id, "completions": list(completions)},
        )
        return out["results"]

    def health(self) -> dict[str, Any]:
        """The server's /health answer."""
        return request(self._client, "GET", "/health", self.retry)

    def close(self) -> None:
        """Drop the server-side session and close the connection pool."""
        if self._client.is_closed:
            return
        try:
            self._client.delete(f"/sessions/{self.session_id}")
        except httpx.HTTPError:
            pass  # the server may already be gone; the session expires there anyway
        self._client.close()


class AsyncVerifyClient:
    """Many concurrent verify-batch calls from one asyncio program (a trainer's reward step).

    Args:
        url: the server's base URL.
        max_connections: open connections at most; more requests wait in the client pool.
        timeout: seconds per request.
        retry: how to wait out a busy server.
        token: the server's token (default `$PIVOT_SERVE_TOKEN`).
    """

    def __init__(
        self,
        url: str,
        *,
        max_connections: int = 64,
        timeout: float = 120.0,
        retry: RetryPolicy | None = None,
        token: str | None = None,
    ) -> None:
        self.retry = retry or RetryPolicy()
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self._client = httpx.AsyncClient(
            base_url=url.rstrip("/") + API, timeout=timeout, limits=limits, headers=auth_headers(token)
        )

    async def verify_batch(self, pivot_id: str, completions: Sequence[str]) -> list[dict[str, Any]]:
        """Score a group of completions at one pivot."""
        out = await arequest(
            self._client,
            "POST",
            "/verify-batch",
            self.retry,
            json={"pivot_id": pivot_id, "completions": list(completions)},
        )
        return out["results"]

    async def health(self) -> dict[str, Any]:
        """The server's /health answer."""
        return await arequest(self._client, "GET", "/health", self.retry)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()

    async def __aenter__(self) -> AsyncVerifyClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


__all__ = ["AsyncVerifyClient", "RemoteEnv", "RemoteError", "RetryPolicy"]
