"""VerifierChain: gates, then acceptors, cheapest first, short-circuiting."""

from __future__ import annotations

import hashlib
import json
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pivot_core import normalized_action
from verifiers_plugins._async import Bounder, await_all, call_timeout, is_async_verifier, verify_timeout
from verifiers_plugins._host import get_verifier
from verifiers_plugins._verdict import COST_ORDER, Verdict, verifier_fingerprint, verifier_meta
from verifiers_plugins.errors import VerifierTimeout

if TYPE_CHECKING:
    from pivot_core import Message, Pivot


@dataclass(frozen=True)
class ChainResult:
    """The chain's decision on one action.

    Attributes:
        reward: the deciding verdict's reward (the best partial reward when nothing accepted).
        accepted: True when every gate passed and one acceptor accepted.
        decided_by: name of the verifier whose verdict decided.
        verdicts: every verdict that ran, in run order, keyed by verifier name.
        error: set when the decision rests on a verifier that could not decide.
    """

    reward: float
    accepted: bool
    decided_by: str
    verdicts: Mapping[str, Verdict]
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (the env's `info` and the CLI use it)."""
        return {
            "reward": self.reward,
            "accepted": self.accepted,
            "decided_by": self.decided_by,
            "error": self.error,
            "verdicts": {k: v.to_json() for k, v in self.verdicts.items()},
        }


@runtime_checkable
class Scorer(Protocol):
    """What turns parsed actions at a pivot into chain results: a `VerifierChain` or a `CachedChain`."""

    @property
    def steps(self) -> list[tuple[str, Any]]:
        """The chain's (name, verifier) pairs in run order."""
        ...

    @property
    def names(self) -> list[str]:
        """Verifier names in run order."""
        ...

    @property
    def deterministic(self) -> bool:
        """True when every verifier is deterministic."""
        ...

    def config_hash(self) -> str:
        """Hash of the chain's names, versions and config."""
        ...

    def __call__(self, pivot: Pivot, action: Message) -> ChainResult:
        """Score one action."""
        ...

    def verify_batch(self, pivot: Pivot, actions: Sequence[Message]) -> list[ChainResult]:
        """Score a group of actions at one pivot."""
        ...


def as_verdict(name: str, value: object) -> Verdict:
    """What one verifier call gave, as a Verdict named after the verifier.

    The one place where a verifier's failure becomes an error verdict: an exception, a missed
    timeout, or a return value that is not a Verdict. Errors are never a silent 0.
    """
    if isinstance(value, Verdict):
        return value if value.verifier == name else value.named(name)
    if isinstance(value, VerifierTimeout):
        return Verdict.failed(f"{name} {value}").named(name)
    if isinstance(value, Exception):
        tb = traceback.format_exception_only(type(value), value)[-1].strip()
        return Verdict.failed(f"{name} raised {tb}").named(name)
    if isinstance(value, BaseException):
        raise value  # KeyboardInterrupt, SystemExit, CancelledError: not the verifier's fault
    return Verdict.failed(f"verifier returned {type(value).__name__}, expected Verdict").named(name)


@dataclass(frozen=True)
class _Step:
    """One verifier of a chain with what the chain needs to know about it, read once."""

    name: str
    verifier: Any
    gate: bool
    cost: int
    timeout: float
    bound: Any  # the verifier's `timeout_for(pivot, actions)`, None when it has none
    is_async: bool
    # cheap verifiers may be interrupted in place; sandbox and judge calls hold resources and run on a thread
    interruptible: bool
    verify: Any
    batch: Any  # the verifier's `verify_batch`, None when it has none

    @classmethod
    def of(cls, name: str, verifier: Any) -> _Step:
        meta = verifier_meta(verifier)
        batch = getattr(verifier, "verify_batch", None)
        bound = getattr(verifier, "timeout_for", None)
        return cls(
            name,
            verifier,
            meta["role"] == "gate",
            COST_ORDER.get(meta["cost"], len(COST_ORDER)),
            verify_timeout(verifier),
            bound if callable(bound) else None,
            is_async_verifier(verifier),
            meta["cost"] == "cheap",
            getattr(verifier, "verify", None),  # a verifier without one gets error verdicts, not a crash
            batch if callable(batch) else None,
        )

    def run(self, pivot: Pivot, actions: Sequence[Message], bounder: Bounder) -> list[Verdict]:
        """Verdicts for a group, every call bounded by the verifier's timeout; failures are error verdicts.

        A verifier with `verify_batch` gets one call for the group (its time limit is the per-call
        timeout times the group size, or the bound it gives with `timeout_for`: `call_timeout`); a
        batch that raises or returns the wrong shape falls back to per-action calls, so one bad
        candidate cannot fail the whole group. Coroutines run concurrently over the group on the
        host's event loop.
        """
        if not actions:
            return []
        name = self.name
        if self.batch is not None:
            timeout = call_timeout(self.timeout, self.bound, pivot, actions)
            if self.is_async:
                (value,) = await_all([_called(self.batch, pivot, actions)], timeout)
            else:
                (value,) = _awaited(bounder.each(self.batch, pivot, [actions], timeout, self.interruptible), timeout)
            if isinstance(value, VerifierTimeout):
                return [as_verdict(name, value) for _ in actions]
            if (
                isinstance(value, Sequence)
                and len(value) == len(actions)
                and all(isinstance(v, Verdict) for v in value)
            ):
                return [as_verdict(name, v) for v in value]
        timeout = self.timeout
        if self.bound is not None:  # each call gets the longest of the candidates' own bounds
            timeout = max(call_timeout(self.timeout, self.bound, pivot, [a]) for a in actions)
        if self.is_async:
            values = await_all([_called(self.verify, pivot, a) for a in actions], timeout)
            return [as_verdict(name, v) for v in values]
        values = bounder.each(self.verify, pivot, actions, timeout, self.interruptible)
        return [as_verdict(name, v) for v in values]


def _awaited(values: list[Any], timeout: float) -> list[Any]:
    """Values with any awaitable among them awaited (a sync-looking verifier may still return a coroutine)."""
    if all(type(v) is Verdict for v in values):  # the common case, without an isawaitable probe per value
        return values
    return await_all(values, timeout)


def _called(fn: Any, *args: Any) -> Any:
    """`fn(*args)`, or the exception it raised (a coroutine function raises only when awaited, mostly)."""
    try:
        return fn(*args)
    except Exception as e:  # handed on as a value: it becomes an error verdict
        return e


def safe_verify(name: str, verifier: Any, pivot: Pivot, action: Message) -> Verdict:
    """Run one verifier on one action within its timeout; any failure becomes an error verdict."""
    return safe_verify_batch(name, verifier, pivot, [action])[0]


def safe_verify_batch(name: str, verifier: Any, pivot: Pivot, actions: Sequence[Message]) -> list[Verdict]:
    """Score a group with one verifier, every call bounded by its timeout (see `_Step.run`)."""
    with Bounder() as bounder:
        return _Step.of(name, verifier).run(pivot, actions, bounder)


class _Decision:
    """The acceptors' decision on one action that passed every gate, built one verdict at a time in run order.

    The chain's one acceptor rule: an acceptor that accepts decides, unless a more faithful
    (costlier) acceptor follows it in the chain. Then the acceptance is provisional: the faithful
    acceptor runs and its verdict decides whenever it applies to the pivot (a cheap string match
    may not accept `<expert>; rm -rf /app/*` ahead of the sandbox). Only an action identical to
    the expert's after normalisation is accepted by a cheap verifier outright. When nothing
    accepts, the result carries the best partial reward and the error of an acceptor that could
    not decide, so that "could not decide" never reads as a plain wrong answer. (The gate rule,
    a gate that rejects decides, is `VerifierChain.verify_batch`'s.)
    """

    __slots__ = ("action", "best", "identical", "pivot", "provisional", "provisional_cost", "result", "verdicts")

    def __init__(self, pivot: Pivot, action: Message, verdicts: dict[str, Verdict]) -> None:
        self.pivot, self.action = pivot, action
        self.verdicts = verdicts  # the gates' verdicts so far; the acceptors' join them in run order
        self.best: Verdict | None = None
        self.provisional: Verdict | None = None
        self.provisional_cost = -1
        self.result: ChainResult | None = None
        self.identical: bool | None = None

    def expert_identical(self) -> bool:
        """`same_action(expert, action)`, asked at most once per action."""
        if self.identical is None:
            self.identical = same_action(self.pivot.expert, self.action)
        return self.identical

    def add(self, step: _Step, verdict: Verdict, top_cost: int) -> None:
        """Fold in the next acceptor's verdict; sets `result` once the chain has decided."""
        self.verdicts[step.name] = verdict
        if not verdict.applicable:
            return
        if self.provisional is not None and step.cost > self.provisional_cost:
            self.provisional = None  # a more faithful acceptor applies: it decides, the cheap acceptance does not
        if verdict.accepted:
            if step.cost < top_cost and not self.expert_identical():
                if self.provisional is None:
                    self.provisional, self.provisional_cost = verdict, step.cost
                return
            self.result = ChainResult(verdict.reward, True, step.name, self.verdicts)
            return
        best = self.best
        if best is None or verdict.reward > best.reward or (best.error is None and verdict.error):
            self.best = verdict

    def finish(self, has_acceptor: bool) -> ChainResult:
        """The decision once every verifier that had to run has run."""
        if self.result is not None:
            return self.result
        verdicts, best = self.verdicts, self.best
        if self.provisional is not None:  # no more faithful acceptor applied to this pivot
            return ChainResult(self.provisional.reward, True, self.provisional.verifier, verdicts)
        if best is None:
            applied = [n for n, v in verdicts.items() if v.applicable]
            if applied and not has_acceptor:  # a chain of gates only: passing every gate is acceptance
                return ChainResult(1.0, True, applied[-1], verdicts)
            if applied:  # gates alone never accept where the chain's acceptors all stand aside
                return ChainResult(0.0, False, "", verdicts, "no acceptor in the chain applies to this pivot")
            return ChainResult(0.0, False, "", verdicts, "no verifier in the chain applies to this pivot")
        return ChainResult(best.reward, False, best.verifier, verdicts, best.error)


def _keyed_config(verifier: object, config: Mapping[str, Any]) -> dict[str, Any]:
    """The config that counts in the cache key: without the verifier's `verdict_neutral_config` keys."""
    neutral = getattr(verifier, "verdict_neutral_config", ())
    return {k: v for k, v in dict(config).items() if k not in neutral}


class VerifierChain:
    """Gates (must all pass) then acceptors (first to accept decides), cheapest first.

    A verdict with `applicable=False` is skipped. When no acceptor accepts, the result carries
    the best partial reward among the acceptors that ran, and the error of an acceptor that
    could not decide, so that "could not decide" never reads as a plain wrong answer.
    """

    def __init__(self, verifiers: Sequence[tuple[str, Any]], config: Mapping[str, Any] | None = None) -> None:
        if not verifiers:
            raise ValueError("VerifierChain: expected at least one verifier, got none")
        indexed = list(enumerate(verifiers))

        def key(item: tuple[int, tuple[str, Any]]) -> tuple[int, int, int]:
            i, (_, v) = item
            meta = verifier_meta(v)
            return (0 if meta["role"] == "gate" else 1, COST_ORDER.get(meta["cost"], 9), i)

        self.steps: list[tuple[str, Any]] = [nv for _, nv in sorted(indexed, key=key)]
        self.config = dict(config or {})
        self._steps = [_Step.of(n, v) for n, v in self.steps]
        # sorted gates first, so a group meets every gate before any acceptor
        self._gates = [st for st in self._steps if st.gate]
        acceptors = self._acceptors = [st for st in self._steps if not st.gate]
        self._has_acceptor = bool(acceptors)
        # the most faithful acceptor's cost: cheaper acceptors only accept provisionally (see `_Decision`)
        self._top_cost = max((st.cost for st in acceptors), default=0)

    @classmethod
    def from_names(cls, names: Sequence[str], config: Mapping[str, Mapping[str, Any]] | None = None) -> VerifierChain:
        """Build each named verifier through the plugin host; `config[name]` goes to its factory."""
        config = dict(config or {})
        steps = [(n, get_verifier(n, **dict(config.get(n, {})))) for n in names]
        return cls(steps, config={n: dict(config.get(n, {})) for n in names})

    @property
    def names(self) -> list[str]:
        """Verifier names in run order."""
        return [n for n, _ in self.steps]

    @property
    def deterministic(self) -> bool:
        """True when every verifier in the chain is deterministic."""
        return all(verifier_meta(v)["deterministic"] for _, v in self.steps)

    def config_hash(self) -> str:
        """Hash of names, versions and config: part of every cached reward's key.

        A verifier's `verdict_neutral_config` keys are left out: options that change no verdict
        (`docker_shell`'s `backend`: both built-in backends give the same verdicts).
        """
        desc = [(n, verifier_meta(v)["version"], _keyed_config(v, self.config.get(n, {}))) for n, v in self.steps]
        return hashlib.sha256(json.dumps(desc, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def fingerprint(self, pivot: Pivot) -> str | None:
        """What the chain's verdicts at `pivot` depend on beyond pivot, action and `config_hash`.

        The verifiers' own `fingerprint(pivot)` (see `Verifier`), by name: "" when none has one,
        None when one cannot tell (then nothing at this pivot may be cached).
        """
        parts = []
        for name, verifier in self.steps:
            value = verifier_fingerprint(verifier, pivot)
            if value is None:
                return None
            if value:
                parts.append((name, value))
        if not parts:
            return ""
        return hashlib.sha256(json.dumps(parts).encode()).hexdigest()

    def deterministic_names(self) -> frozenset[str]:
        """Names of the chain's deterministic verifiers."""
        return frozenset(n for n, v in self.steps if verifier_meta(v)["deterministic"])

    def __call__(self, pivot: Pivot, action: Message) -> ChainResult:
        """Score one action (a group of one)."""
        return self.verify_batch(pivot, [action])[0]

    def verify_batch(self, pivot: Pivot, actions: Sequence[Message]) -> list[ChainResult]:
        """Score a group of actions at one pivot, each verifier called once on the actions still undecided.

        The gate rule lives here: a gate that rejects (an error verdict is a rejection) decides.
        Actions that pass every gate go to the acceptors (`_Decision`).
        """
        results: list[ChainResult | None] = [None] * len(actions)
        records: list[dict[str, Verdict]] = [{} for _ in actions]  # each action's verdicts, in run order
        live = list(range(len(actions)))
        with Bounder() as bounder:
            for step in self._gates:
                name, passed = step.name, []
                verdicts = step.run(pivot, [actions[i] for i in live], bounder)
                for i, verdict in zip(live, verdicts, strict=True):
                    records[i][name] = verdict
                    if verdict.accepted or not verdict.applicable:
                        passed.append(i)
                    else:
                        results[i] = ChainResult(0.0, False, name, records[i], verdict.error)
                live = passed
                if not live:
                    break
            decisions = [(i, _Decision(pivot, actions[i], records[i])) for i in live]
            undecided, top_cost = [d for _, d in decisions], self._top_cost
            for step in self._acceptors if undecided else ():
                verdicts = step.run(pivot, [d.action for d in undecided], bounder)
                for decision, verdict in zip(undecided, verdicts, strict=True):
                    decision.add(step, verdict, top_cost)
                undecided = [d for d in undecided if d.result is None]
                if not undecided:
                    break
        for i, decision in decisions:
            results[i] = decision.finish(self._has_acceptor)
        return results  # type: ignore[return-value]  # every entry is set: by a gate, else by its decision


def same_action(expert: Message, action: Message) -> bool:
    """True when `action` is the expert's own turn after normalisation (and not an empty one)."""
    want, got = normalized_action(expert), normalized_action(action)
    if want[0] != got[0] or not any(want[1]):
        return False
    return sorted(want[1]) == sorted(got[1]) if want[0] == "calls" else want[1] == got[1]
