"""Every verifier call gets its timeout: sync calls bounded in place or on abandonable threads, coroutines on a loop.

A synchronous `verify` that never returns (a plugin stuck in a socket read, an infinite loop) must
not hang `step`. A `Bounder` (held for a chain's whole group) has two ways to bound it:

- in place (`interruptible=True`, used for cheap verifiers on the main thread): a one-shot
  `ITIMER_REAL` timer raises `_Deadline` inside the call when it overruns. It costs two system
  calls, where a thread hand-off costs about as much as a cheap verifier itself (the chain's
  throughput depends on it). It is used only where nobody else owns `SIGALRM`, and only for cheap
  verifiers: they hold no containers or connections that an interrupt could leave half-made.
- on a worker thread (everything else): the call runs on one of a few daemon threads and the
  caller waits at most the timeout; a call that misses it is abandoned (its thread exits when the
  call finally returns, and is never handed new work). Python cannot kill a thread, so a verifier
  that spins forever keeps one daemon thread busy until the process ends; it never blocks another
  call or the interpreter's exit.

Either way the caller gets `VerifierTimeout`, which the chain turns into an error verdict.

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
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any, TypeVar

try:  # the C functions under `signal`: its wrappers convert to and from enums, a third of a cheap group's cost
    from _signal import getsignal as _getsignal
    from _signal import signal as _setsignal
except ImportError:  # another Python: the public wrappers do the same
    from signal import getsignal as _getsignal
    from signal import signal as _setsignal

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


def call_timeout(per_call: float, bound: Callable[[Any, Any], object] | None, pivot: Any, actions: Any) -> float:
    """Seconds one call on the candidates `actions` at `pivot` may take before it is an error verdict.

    `per_call` is the verifier's `verify_timeout`, `bound` its optional `timeout_for(pivot, actions)`.
    A verifier whose work has bounds of its own (a sandbox: each command killed at its limit) says
    with `timeout_for` how long they add up to at this pivot; the chain must not cut it short, or a
    slow but bounded check reads as "could not decide". Without it (or when it gives no positive
    number) every candidate gets the per-call timeout.
    """
    if bound is None:
        return per_call * len(actions)
    try:
        value = bound(pivot, actions)
    except Exception:  # noqa: BLE001 - the verifier's own call reports its errors; its bound falls back
        return per_call * len(actions)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        return per_call * len(actions)
    return float(value)


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


class _Deadline(BaseException):
    """Raised inside an in-place call whose timer fired (a BaseException, so `except Exception` lets it pass)."""


# An in-place timer is re-armed for a call only when this much time has passed since it was last
# armed, so each call has at least its timeout minus this (a group of cheap calls arms it once).
_REARM_AFTER_S = 0.001


class Bounder:
    """Runs calls, each within its timeout: in place under one timer signal where allowed, else on a worker thread.

    Hold one for a run of calls (a chain's whole group): the SIGALRM handler is installed once on
    entry and restored on exit, and the timer is armed only when the last arming may no longer
    cover a whole timeout. The in-place path is taken on the main thread when nobody else owns
    SIGALRM or the real-time timer; elsewhere (server threads, executors, a nested chain) every
    call runs on an abandonable worker thread.
    """

    def __init__(self) -> None:
        self.in_place = False
        self._previous: Any = None
        self._armed_at = 0.0
        self._armed_for = 0.0
        self._in_call = False

    def __enter__(self) -> Bounder:
        if _timer_free():
            self._previous = _setsignal(signal.SIGALRM, self._on_alarm)
            self.in_place = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self.in_place:
            self._disarm()
            _setsignal(signal.SIGALRM, self._previous)
            self.in_place = False

    def _on_alarm(self, signum: int, frame: object) -> None:
        if self._in_call:  # between calls (chain code) a late alarm is ignored: the next call re-arms
            raise _Deadline

    def _disarm(self) -> None:
        if self._armed_for:
            signal.setitimer(signal.ITIMER_REAL, 0)
            self._armed_for = 0.0

    def each(
        self, fn: Callable[..., Any], first: Any, items: Sequence[Any], timeout: float, interruptible: bool
    ) -> list[Any]:
        """`fn(first, item)` for every item (a pivot and its actions), each call within `timeout`.

        A call that raised or timed out gives its exception. Results are returned as they are: an
        awaitable is the caller's to await (`await_all`).
        """
        if not (interruptible and self.in_place):
            self._disarm()  # a thread hand-off waits in this thread: no alarm may land in the wait
            return [self._on_worker(partial(fn, first, item), timeout) for item in items]
        out: list[Any] = []
        append, monotonic = out.append, time.monotonic  # locals: this loop runs once per verifier per candidate
        for item in items:
            now = monotonic()
            if self._armed_for != timeout or now - self._armed_at > _REARM_AFTER_S:
                signal.setitimer(signal.ITIMER_REAL, timeout)
                self._armed_at, self._armed_for = now, timeout
            self._in_call = True
            try:
                append(fn(first, item))
            except _Deadline:
                self._armed_for = 0.0
                append(VerifierTimeout(f"timed out after {timeout:g}s (interrupted)"))
            except Exception as e:  # handed back as a value: the caller turns it into an error verdict
                append(e)
            finally:
                self._in_call = False
        return out

    @staticmethod
    def _on_worker(fn: Callable[[], Any], timeout: float) -> Any:
        try:
            return _call_on_worker(fn, timeout)
        except Exception as e:  # handed back as a value, as above
            return e


def _timer_free() -> bool:
    """True on the main thread when no one else uses SIGALRM or the real-time timer."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        return False
    return _getsignal(signal.SIGALRM) in (signal.SIG_DFL, None) and signal.getitimer(signal.ITIMER_REAL)[0] == 0


def _call_on_worker(fn: Callable[[], T], timeout: float) -> T:
    """`fn()` on a daemon worker thread, waited for at most `timeout` seconds (then abandoned)."""
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
    return value
