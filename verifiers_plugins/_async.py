"""Coroutine verifiers: the host awaits them on one background event loop, with a per-call timeout.

pluggy has no async hooks, so a plugin registers an ordinary factory whose object has
`async def verify(...)` (and optionally `async def verify_batch(...)`). The chain calls `verify`,
gets a coroutine, and hands it here. All coroutines run on one long-lived loop in a daemon
thread, so an `httpx.AsyncClient` or connection pool a verifier creates keeps working across
calls, and a GRPO group's coroutines run concurrently. A coroutine that misses its timeout is
cancelled and becomes `VerifierTimeout`; one that blocks the loop itself (a synchronous sleep
inside `async def`) is abandoned with its loop, and a fresh loop serves later calls.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading
from collections.abc import Awaitable, Sequence
from typing import Any

from verifiers_plugins.errors import VerifierTimeout

DEFAULT_TIMEOUT_S = 30.0
# Extra wall time the caller waits beyond the coroutine's own timeout before it concludes the
# loop itself is blocked (the in-loop `wait_for` normally fires first and cancels cleanly).
_LOOP_GRACE_S = 1.0


def verify_timeout(verifier: object) -> float:
    """The verifier's per-call timeout in seconds: its `timeout` attribute, else `DEFAULT_TIMEOUT_S`."""
    timeout = getattr(verifier, "timeout", None)
    if timeout is None:
        return DEFAULT_TIMEOUT_S
    if not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ValueError(f"verifier timeout: expected a positive number of seconds, got {timeout!r}")
    return float(timeout)


def is_async_verifier(verifier: object) -> bool:
    """True when `verify` (or `verify_batch`) is a coroutine function."""
    return any(inspect.iscoroutinefunction(getattr(verifier, m, None)) for m in ("verify", "verify_batch"))


class _LoopThread:
    """One event loop running forever in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="pivot-async-verifiers", daemon=True)
        self.thread.start()

    def submit(self, coro: Any) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)


_RUNNER: _LoopThread | None = None
_RUNNER_LOCK = threading.Lock()


def _runner() -> _LoopThread:
    global _RUNNER
    with _RUNNER_LOCK:
        if _RUNNER is None:
            _RUNNER = _LoopThread()
        return _RUNNER


def _abandon(runner: _LoopThread) -> None:
    """Drop a loop that a blocking coroutine holds; the next call starts a fresh one."""
    global _RUNNER
    with _RUNNER_LOCK:
        if _RUNNER is runner:
            _RUNNER = None
    runner.loop.call_soon_threadsafe(runner.loop.stop)


async def _bounded(awaitable: Awaitable[Any], timeout: float) -> Any:
    try:
        return await asyncio.wait_for(awaitable, timeout)
    except TimeoutError as e:
        raise VerifierTimeout(f"timed out after {timeout:g}s") from e


def _run(coro: Any, timeout: float) -> Any:
    runner = _runner()
    future = runner.submit(coro)
    try:
        return future.result(timeout + _LOOP_GRACE_S)
    except VerifierTimeout:
        raise  # the in-loop timeout fired and cancelled the coroutine: the loop is healthy
    except concurrent.futures.TimeoutError as e:
        future.cancel()
        _abandon(runner)
        raise VerifierTimeout(f"timed out after {timeout:g}s (the coroutine blocked the event loop)") from e


def await_result(value: Any, timeout: float) -> Any:
    """`value` itself, or, when it is awaitable, its result within `timeout` seconds.

    Raises:
        VerifierTimeout: the awaitable did not finish in time (it is cancelled).
    """
    if not inspect.isawaitable(value):
        return value
    return _run(_bounded(value, timeout), timeout)


def await_all(values: Sequence[Any], timeout: float) -> list[Any]:
    """Resolve every awaitable in `values` concurrently, each with its own `timeout`.

    Returns:
        The values in order; an awaitable that raised or timed out is replaced by its exception.
    """
    pending = [i for i, v in enumerate(values) if inspect.isawaitable(v)]
    if not pending:
        return list(values)

    async def gather() -> list[Any]:
        return await asyncio.gather(*(_bounded(values[i], timeout) for i in pending), return_exceptions=True)

    out = list(values)
    try:
        results = _run(gather(), timeout)
    except VerifierTimeout as e:
        results = [e] * len(pending)
    for i, r in zip(pending, results, strict=True):
        out[i] = r
    return out
