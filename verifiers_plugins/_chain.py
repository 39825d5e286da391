"""VerifierChain: gates, then acceptors, cheapest first, short-circuiting."""

from __future__ import annotations

import hashlib
import json
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from verifiers_plugins._async import await_all, await_result, verify_timeout
from verifiers_plugins._host import get_verifier
from verifiers_plugins._verdict import COST_ORDER, Verdict, verifier_meta
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


def safe_verify(name: str, verifier: Any, pivot: Pivot, action: Message) -> Verdict:
    """Run one verifier; an exception or a missed async timeout becomes a Verdict with `error` set."""
    try:
        verdict = await_result(verifier.verify(pivot, action), verify_timeout(verifier))
        if not isinstance(verdict, Verdict):
            return replace(
                Verdict.failed(f"verifier returned {type(verdict).__name__}, expected Verdict"), verifier=name
            )
    except VerifierTimeout as e:
        return replace(Verdict.failed(f"{name} {e}"), verifier=name)
    except Exception as e:  # the contract: a verifier that raises yields an error verdict
        tb = traceback.format_exception_only(type(e), e)[-1].strip()
        return replace(Verdict.failed(f"{name} raised {tb}"), verifier=name)
    return replace(verdict, verifier=name)


def safe_verify_batch(name: str, verifier: Any, pivot: Pivot, actions: Sequence[Message]) -> list[Verdict]:
    """Batched `safe_verify`: a batch that raises falls back to per-action calls.

    Coroutine verifiers run concurrently over the group, each call with its own timeout; an
    `async def verify_batch` that misses its timeout gives every action an error verdict.
    """
    if callable(getattr(verifier, "verify", None)) and not callable(getattr(verifier, "verify_batch", None)):
        return _verify_each(name, verifier, pivot, actions)
    try:
        verdicts = list(await_result(verifier.verify_batch(pivot, actions), verify_timeout(verifier)))
        if len(verdicts) == len(actions) and all(isinstance(v, Verdict) for v in verdicts):
            return [replace(v, verifier=name) for v in verdicts]
    except VerifierTimeout as e:
        return [replace(Verdict.failed(f"{name} {e}"), verifier=name) for _ in actions]
    except Exception:  # fall back so one bad candidate cannot fail the whole group
        pass
    return [safe_verify(name, verifier, pivot, a) for a in actions]


def _verify_each(name: str, verifier: Any, pivot: Pivot, actions: Sequence[Message]) -> list[Verdict]:
    """`verify` per action; coroutines (async verifiers) are awaited together, each with its timeout."""
    results: list[Any] = []
    for action in actions:
        try:
            results.append(verifier.verify(pivot, action))
        except Exception as e:  # the contract: a verifier that raises yields an error verdict
            results.append(e)
    out = []
    for value in await_all(results, verify_timeout(verifier)):
        if isinstance(value, VerifierTimeout):
            out.append(replace(Verdict.failed(f"{name} {value}"), verifier=name))
        elif isinstance(value, Exception):
            tb = traceback.format_exception_only(type(value), value)[-1].strip()
            out.append(replace(Verdict.failed(f"{name} raised {tb}"), verifier=name))
        elif isinstance(value, BaseException):
            raise value  # KeyboardInterrupt, SystemExit, CancelledError: not the verifier's fault
        elif not isinstance(value, Verdict):
            out.append(
                replace(Verdict.failed(f"verifier returned {type(value).__name__}, expected Verdict"), verifier=name)
            )
        else:
            out.append(replace(value, verifier=name))
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
        """Score one action."""
        return self.decide([(n, lambda v=v, n=n: safe_verify(n, v, pivot, action)) for n, v in self.steps])

    def verify_batch(self, pivot: Pivot, actions: Sequence[Message]) -> list[ChainResult]:
        """Score a group of actions at one pivot, each verifier called once on the group."""
        pending = list(range(len(actions)))
        ran: list[dict[str, Verdict]] = [{} for _ in actions]
        for name, verifier in self.steps:
            live = [i for i in pending if not _settled(self.steps, ran[i])]
            if not live:
                break
            for i, verdict in zip(
                live, safe_verify_batch(name, verifier, pivot, [actions[i] for i in live]), strict=True
            ):
                ran[i][name] = verdict
        return [self.decide([(n, lambda v=r[n]: v) for n, _ in self.steps if n in r]) for r in ran]

    def decide(self, steps: Sequence[tuple[str, Any]]) -> ChainResult:
        """Fold verdicts (produced lazily by each thunk) into a decision, short-circuiting."""
        roles = {n: verifier_meta(v)["role"] for n, v in self.steps}
        verdicts: dict[str, Verdict] = {}
        best: Verdict | None = None
        for name, thunk in steps:
            verdict: Verdict = thunk()
            verdicts[name] = verdict
            if not verdict.applicable:
                continue
            if roles.get(name) == "gate":
                if not verdict.accepted:
                    return ChainResult(0.0, False, name, verdicts, verdict.error)
                continue
            if verdict.accepted:
                return ChainResult(verdict.reward, True, name, verdicts)
            if best is None or verdict.reward > best.reward or (best.error is None and verdict.error):
                best = verdict
        if best is None:
            applied = [n for n, v in verdicts.items() if v.applicable]
            has_acceptor = any(role != "gate" for role in roles.values())
            if applied and not has_acceptor:  # a chain of gates only: passing every gate is acceptance
                return ChainResult(1.0, True, applied[-1], verdicts)
            if applied:  # gates alone never accept where the chain's acceptors all stand aside
                return ChainResult(0.0, False, "", verdicts, "no acceptor in the chain applies to this pivot")
            return ChainResult(0.0, False, "", verdicts, "no verifier in the chain applies to this pivot")
        return ChainResult(best.reward, False, best.verifier, verdicts, best.error)


def _settled(steps: Sequence[tuple[str, Any]], ran: Mapping[str, Verdict]) -> bool:
    """True once a gate rejected or an acceptor accepted (later verifiers need not run)."""
    for name, v in steps:
        verdict = ran.get(name)
        if verdict is None or not verdict.applicable:
            continue
        if verifier_meta(v)["role"] == "gate" and not verdict.accepted:
            return True
        if verifier_meta(v)["role"] != "gate" and verdict.accepted:
            return True
    return False
