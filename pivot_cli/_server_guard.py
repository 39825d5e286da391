"""What stands between `pivot serve` and the network: the token and the request timeout.

`pivot serve` runs model-written commands in sandboxes: it is remote code execution by design.
So a server bound to anything but loopback needs a token (`resolve_tokens` refuses to start
without one; `TokenAuth` checks it before a byte of the body is read), and a client that sends
its request slowly is cut off (`request_timeout_protocol`: uvicorn itself only times out idle
keep-alive connections, not a request whose headers or body never finish). The body cap is
FastAPI's own `max_body_size`.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from pivot_core import ServeRefused, is_loopback

TOKEN_ENV = "PIVOT_SERVE_TOKEN"
MIN_TOKEN_CHARS = 16

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def resolve_tokens(host: str, token: str | None) -> tuple[str, ...]:
    """The tokens the server accepts: `token`, else `$PIVOT_SERVE_TOKEN`; none on loopback only.

    Either may hold several tokens separated by commas, one per client: session quotas are
    counted per token.

    Raises:
        ServeRefused: no token for a non-loopback bind, or a token too short to resist guessing.
    """
    raw = token if token is not None else os.environ.get(TOKEN_ENV, "")
    tokens = tuple(t for t in (part.strip() for part in raw.split(",")) if t)
    if not tokens:
        if is_loopback(host):
            return ()
        raise ServeRefused(
            f"refusing to serve on {host!r} without a token: the server runs model-written commands. "
            f"Pass --token or set {TOKEN_ENV} (e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))'), "
            "or bind 127.0.0.1 and reach it through an SSH tunnel"
        )
    short = [i for i, t in enumerate(tokens, start=1) if len(t) < MIN_TOKEN_CHARS]
    if short:
        raise ServeRefused(f"expected tokens of at least {MIN_TOKEN_CHARS} characters, token(s) {short} are shorter")
    return tokens


def matching_token(header: bytes | None, tokens: tuple[str, ...]) -> int | None:
    """The index of the token an `Authorization: Bearer <token>` header carries, None when none matches.

    Every token is compared, each in constant time, so the answer's timing does not say which one
    (or how much of one) matched.
    """
    if header is None or not header.startswith(b"Bearer "):
        return None
    given = header[len(b"Bearer ") :]
    found = None
    for i, token in enumerate(tokens):
        if hmac.compare_digest(given, token.encode("utf-8")):
            found = i
    return found


class TokenAuth:
    """ASGI middleware: every request must carry `Authorization: Bearer <token>` of one of `tokens` (401 otherwise).

    It runs before the body is read, so a client without the token cannot make the server buffer
    or parse anything.
    """

    def __init__(self, app: ASGIApp, tokens: tuple[str, ...]) -> None:
        self.app = app
        self.tokens = tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the token, note which client it names (`scope["state"]["client"]`), pass the request on."""
        if scope["type"] == "http":
            index = matching_token(dict(scope.get("headers") or ()).get(b"authorization"), self.tokens)
            if index is None:
                await _error(send, 401, "missing or wrong token: send Authorization: Bearer <token>")
                return
            scope.setdefault("state", {})["client"] = f"token-{index + 1}"
        await self.app(scope, receive, send)


async def _error(send: Send, status: int, message: str) -> None:
    body = ('{"error": "' + message.replace("\\", "\\\\").replace('"', '\\"') + '"}').encode("ascii", "replace")
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class _RequestTimeoutH11(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request (head and body) does not arrive in time."""

    request_timeout_s: float = 30.0

    def connection_made(self, transport: Any) -> None:  # noqa: D102  (asyncio.Protocol)
        super().connection_made(transport)
        self._request_timer: Any = self.loop.call_later(self.request_timeout_s, self._request_too_slow)

    def handle_events(self) -> None:  # noqa: D102
        super().handle_events()
        # h11 marks the client DONE once the whole request (head and body) has been parsed.
        if self.conn.their_state in (h11.DONE, h11.MUST_CLOSE, h11.CLOSED) and self._request_timer is not None:
            self._request_timer.cancel()
            self._request_timer = None

    def on_response_complete(self) -> None:  # noqa: D102
        super().on_response_complete()
        # The next request on a kept-alive connection gets the same bound.
        if self._request_timer is None and not self.transport.is_closing():
            self._request_timer = self.loop.call_later(self.request_timeout_s, self._request_too_slow)

    def connection_lost(self, exc: Exception | None) -> None:  # noqa: D102
        if self._request_timer is not None:
            self._request_timer.cancel()
            self._request_timer = None
        super().connection_lost(exc)

    def _request_too_slow(self) -> None:
        self._request_timer = None
        if self.conn.their_state in (h11.IDLE, h11.SEND_BODY) and not self.transport.is_closing():
            self.transport.close()


def request_timeout_protocol(timeout_s: float) -> type[H11Protocol]:
    """An h11 protocol class for `uvicorn.Config(http=...)`: a request must arrive within `timeout_s`.

    The clock starts when the connection opens (and again after each response on a kept-alive
    connection) and stops once the request's head and body have been received; scoring time
    does not count.
    """
    if timeout_s <= 0:
        raise ValueError(f"expected request_timeout_s > 0, got {timeout_s}")
    return type("RequestTimeoutH11", (_RequestTimeoutH11,), {"request_timeout_s": float(timeout_s)})


__all__ = [
    "MIN_TOKEN_CHARS",
    "TOKEN_ENV",
    "ServeRefused",
    "TokenAuth",
    "matching_token",
    "request_timeout_protocol",
    "resolve_tokens",
]
