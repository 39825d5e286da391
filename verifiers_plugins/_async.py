"""Every verifier call gets its timeout: sync calls on abandonable daemon threads, coroutines on one event loop.

A synchronous `verify` that never returns (a plugin stuck in a socket read, an infinite loop) must
not hang `step`: `call_bounded` runs it on one of a few daemon worker threads and waits at most the
verifier's timeout; a call that misses it is abandoned (its thread exits when the call finally
returns, and is never handed new work) and becomes `VerifierTimeout`. Python cannot kill a thread,
so a verifier that spins forever keeps one daemon thread busy until the process ends; it never
blocks another call or the interpreter's exit.

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
import queue
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from verifiers_plugins.errors import VerifierTimeout

T = TypeVar("T")

DEFAULT_TIMEOUT_S = 30.0
# Idle worker threads kept for sync verifier calls (more are started on demand and exit when idle).
_MAX_IDLE_WORKERS = 16
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


class _Worker:
    """One daemon thread that runs the calls put in its inbox, one at a time."""

    def __init__(self) -> None:
        self.inbox: queue.SimpleQueue[tuple[Callable[[], Any], concurrent.futures.Future[Any]] | None] = (
            queue.SimpleQueue()
        )
        threading.Thread(target=self._serve, name="pivot-verifier-call", daemon=True).start()

    def _serve(self) -> None:
        while (item := self.inbox.get()) is not None:
            fn, future = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as e:  # handed to the caller, who decides what is fatal
                future.set_exception(e)


_IDLE: list[_Worker] = []
_IDLE_LOCK = threading.Lock()


def _take_worker() -> _Worker:
    with _IDLE_LOCK:
        if _IDLE:
            return _IDLE.pop()
    return _Worker()


def _give_back(worker: _Worker) -> None:
    with _IDLE_LOCK:
        if len(_IDLE) < _MAX_IDLE_WORKERS:
            _IDLE.append(worker)
            return
    worker.inbox.put(None)


def call_bounded(fn: Callable[[], T], timeout: float) -> T:
    """`fn()`'s result within `timeout` seconds; an awaitable result is then awaited with the same timeout.

    Raises:
        VerifierTimeout: `fn` (or the awaitable it returned) did not finish in time; the call is
            abandoned on its daemon thread.
    """
    worker = _take_worker()
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    worker.inbox.put((fn, future))
    try:
        value = future.result(timeout)
    except concurrent.futures.TimeoutError as e:
        worker.inbox.put(None)  # the thread exits once the stuck call returns, if ever
        raise VerifierTimeout(f"timed out after {timeout:g}s (a synchronous call that did not return)") from e
    except BaseException:
        _give_back(worker)
        raise
    _give_back(worker)
    return await_result(value, timeout)
