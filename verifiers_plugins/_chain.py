"""VerifierChain: gates, then acceptors, cheapest first, short-circuiting."""

from __future__ import annotations

import hashlib
import json
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from verifiers_plugins._async import await_all, await_result, call_bounded, is_async_verifier, verify_timeout
from verifiers_plugins._host import get_verifier
from verifiers_plugins._verdict import COST_ORDER, Verdict, verifier_meta
from verifiers_plugins.builtin.exact_match import normalized_action
from verifiers_plugins.errors import VerifierTimeout

if TYPE_CHECKING:
    from pivot_envs._model import Message, Pivot


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
        return replace(value, verifier=name)
    if isinstance(value, VerifierTimeout):
        return replace(Verdict.failed(f"{name} {value}"), verifier=name)
    if isinstance(value, Exception):
        tb = traceback.format_exception_only(type(value), value)[-1].strip()
        return replace(Verdict.failed(f"{name} raised {tb}"), verifier=name)
    if isinstance(value, BaseException):
        raise value  # KeyboardInterrupt, SystemExit, CancelledError: not the verifier's fault
    return replace(Verdict.failed(f"verifier returned {type(value).__name__}, expected Verdict"), verifier=name)


def batch_timeout(verifier: object, n: int) -> float:
    """A group call's time limit: the verifier's per-call timeout for each of the `n` actions."""
    return verify_timeout(verifier) * max(1, n)


def safe_verify(name: str, verifier: Any, pivot: Pivot, action: Message) -> Verdict:
    """Run one verifier on one action within its timeout; any failure becomes an error verdict."""
    return safe_verify_batch(name, verifier, pivot, [action])[0]


def safe_verify_batch(name: str, verifier: Any, pivot: Pivot, actions: Sequence[Message]) -> list[Verdict]:
    """Score a group with one verifier, every call bounded by its timeout.

    A verifier with `verify_batch` gets one call for the group (its time limit is the per-call
    timeout times the group size); a batch that raises or returns the wrong shape falls back to
    per-action calls, so one bad candidate cannot fail the whole group. Coroutine verifiers run
    concurrently over the group on the host's event loop; synchronous ones run on an abandonable
    worker thread, so a call that never returns becomes an error verdict and the caller goes on.
    """
    if not actions:
        return []
    batch = getattr(verifier, "verify_batch", None)
    if callable(batch):
        try:
            value = _bounded_call(verifier, lambda: batch(pivot, actions), batch_timeout(verifier, len(actions)))
        except VerifierTimeout as e:
            return [as_verdict(name, e) for _ in actions]
        except Exception:
            value = None
        if isinstance(value, Sequence) and len(value) == len(actions) and all(isinstance(v, Verdict) for v in value):
            return [as_verdict(name, v) for v in value]
    return _verify_each(name, verifier, pivot, actions)


def _bounded_call(verifier: object, fn: Any, timeout: float) -> Any:
    """`fn()` within `timeout`: coroutines are awaited on the event loop, sync calls run on a worker thread."""
    if is_async_verifier(verifier):
        return await_result(fn(), timeout)
    return call_bounded(fn, timeout)


def _verify_each(name: str, verifier: Any, pivot: Pivot, actions: Sequence[Message]) -> list[Verdict]:
    """`verify` per action, each call with its own timeout; coroutines are awaited together."""
    timeout = verify_timeout(verifier)
    if is_async_verifier(verifier):
        results: list[Any] = []
        for action in actions:
            try:
                results.append(verifier.verify(pivot, action))
            except Exception as e:  # the contract: a verifier that raises yields an error verdict
                results.append(e)
        return [as_verdict(name, v) for v in await_all(results, timeout)]
    out = []
    for action in actions:
        try:
            value = call_bounded(lambda a=action: verifier.verify(pivot, a), timeout)
        except Exception as e:  # the contract: a verifier that raises yields an error verdict
            value = e
        out.append(as_verdict(name, value))
    return out


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
        acceptors = [verifier_meta(v) for _, v in self.steps if verifier_meta(v)["role"] != "gate"]
        self._has_acceptor = bool(acceptors)
        # the most faithful acceptor's cost: cheaper acceptors only accept provisionally (see `_fold`)
        self._top_cost = max((COST_ORDER.get(m["cost"], len(COST_ORDER)) for m in acceptors), default=0)

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
        """Hash of names, versions and config: part of every cached reward's key."""
        desc = [(n, verifier_meta(v)["version"], self.config.get(n, {})) for n, v in self.steps]
        return hashlib.sha256(json.dumps(desc, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def __call__(self, pivot: Pivot, action: Message) -> ChainResult:
        """Score one action (a group of one)."""
        return self.verify_batch(pivot, [action])[0]

    def verify_batch(self, pivot: Pivot, actions: Sequence[Message]) -> list[ChainResult]:
        """Score a group of actions at one pivot, each verifier called once on the actions still undecided."""
        ran: list[dict[str, Verdict]] = [{} for _ in actions]
        identical: dict[int, bool] = {}
        for name, verifier in self.steps:
            live = [i for i, r in enumerate(ran) if self._fold(pivot, actions[i], r, identical, i) is None]
            if not live:
                break
            verdicts = safe_verify_batch(name, verifier, pivot, [actions[i] for i in live])
            for i, verdict in zip(live, verdicts, strict=True):
                ran[i][name] = verdict
        return [self._fold(pivot, actions[i], r, identical, i, final=True) for i, r in enumerate(ran)]

    def _fold(
        self,
        pivot: Pivot,
        action: Message,
        ran: Mapping[str, Verdict],
        identical: dict[int, bool],
        index: int,
        final: bool = False,
    ) -> ChainResult | None:
        """The decision the verdicts so far allow, or None while a verifier still has to run.

        The chain's one short-circuit rule: a gate that rejects decides; an acceptor that accepts
        decides, unless a more faithful (costlier) acceptor follows it in the chain. Then the
        acceptance is provisional: the faithful acceptor runs and its verdict decides whenever it
        applies to the pivot (a cheap string match may not accept `<expert>; rm -rf /app/*` ahead of
        the sandbox). Only an action identical to the expert's after normalisation is accepted by
        a cheap verifier outright. When nothing accepts, the result carries the best partial
        reward and the error of an acceptor that could not decide, so that "could not decide"
        never reads as a plain wrong answer.
        """
        verdicts: dict[str, Verdict] = {}
        best: Verdict | None = None
        provisional: Verdict | None = None
        provisional_cost = -1
        for name, verifier in self.steps:
            verdict = ran.get(name)
            if verdict is None:
                if final:
                    continue
                return None
            verdicts[name] = verdict
            if not verdict.applicable:
                continue
            meta = verifier_meta(verifier)
            if meta["role"] == "gate":
                if not verdict.accepted:
                    return ChainResult(0.0, False, name, verdicts, verdict.error)
                continue
            cost = COST_ORDER.get(meta["cost"], len(COST_ORDER))
            if provisional is not None and cost > provisional_cost:
                # a more faithful acceptor applies: it decides, the cheap acceptance does not count
                provisional = None
            if verdict.accepted:
                if cost < self._top_cost and not self._identical(pivot, action, identical, index):
                    if provisional is None:
                        provisional, provisional_cost = verdict, cost
                    continue
                return ChainResult(verdict.reward, True, name, verdicts)
            if best is None or verdict.reward > best.reward or (best.error is None and verdict.error):
                best = verdict
        if provisional is not None:  # no more faithful acceptor applied to this pivot
            return ChainResult(provisional.reward, True, provisional.verifier, verdicts)
        if best is None:
            applied = [n for n, v in verdicts.items() if v.applicable]
            if applied and not self._has_acceptor:  # a chain of gates only: passing every gate is acceptance
                return ChainResult(1.0, True, applied[-1], verdicts)
            if applied:  # gates alone never accept where the chain's acceptors all stand aside
                return ChainResult(0.0, False, "", verdicts, "no acceptor in the chain applies to this pivot")
            return ChainResult(0.0, False, "", verdicts, "no verifier in the chain applies to this pivot")
        return ChainResult(best.reward, False, best.verifier, verdicts, best.error)

    @staticmethod
    def _identical(pivot: Pivot, action: Message, memo: dict[int, bool], index: int) -> bool:
        """True when the action is the expert's own after normalisation (memoised per action of the group)."""
        if index not in memo:
            memo[index] = same_action(pivot.expert, action)
        return memo[index]


def same_action(expert: Message, action: Message) -> bool:
    """True when `action` is the expert's own turn after normalisation (and not an empty one)."""
    want, got = normalized_action(expert), normalized_action(action)
    if want[0] != got[0] or not any(want[1]):
        return False
    return sorted(want[1]) == sorted(got[1]) if want[0] == "calls" else want[1] == got[1]
