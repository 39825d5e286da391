"""The Verdict contract and the Verifier protocol every verifier follows."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from pivot_core import Message, Pivot

Cost = Literal["cheap", "sandbox", "judge"]
Role = Literal["gate", "acceptor"]
COST_ORDER: dict[str, int] = {"cheap": 0, "sandbox": 1, "judge": 2}


@dataclass(frozen=True)
class Verdict:
    """A verifier's score of one candidate action at one pivot.

    Attributes:
        reward: in [0, 1]; 1.0 means locally acceptable.
        accepted: the 0/1 decision (a continuous verifier may give reward 0.5 and accepted False).
        reason: one human-readable line saying why.
        details: structured evidence (which parts matched or differed).
        error: set when the verifier could not decide (it raised, timed out, its backend is
            down). An errored verdict is never a silent 0: trainers and reports count it apart.
        applicable: False when the verifier has nothing to say about this pivot (e.g. the
            sandbox verifier on a pivot with no sandbox context); the chain skips it.
    """

    reward: float
    accepted: bool
    reason: str = ""
    details: Mapping[str, Any] | None = None
    error: str | None = None
    applicable: bool = True
    verifier: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        value = float(self.reward)
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"Verdict.reward: expected a float in [0, 1], got {self.reward!r}")
        object.__setattr__(self, "reward", value)
        object.__setattr__(self, "accepted", bool(self.accepted))

    def named(self, verifier: str) -> Verdict:
        """This verdict under another verifier's name."""
        return Verdict(self.reward, self.accepted, self.reason, self.details, self.error, self.applicable, verifier)

    @classmethod
    def accept(cls, reason: str = "", **details: Any) -> Verdict:
        """Reward 1, accepted."""
        return cls(1.0, True, reason, details or None)

    @classmethod
    def reject(cls, reason: str, reward: float = 0.0, **details: Any) -> Verdict:
        """Not accepted (reward 0 unless a partial reward is given)."""
        return cls(reward, False, reason, details or None)

    @classmethod
    def failed(cls, error: str, **details: Any) -> Verdict:
        """The verifier could not decide; reward 0 with `error` set."""
        return cls(0.0, False, f"error: {error}", details or None, error=error)

    @classmethod
    def skip(cls, reason: str) -> Verdict:
        """Not applicable to this pivot; the chain moves on."""
        return cls(0.0, False, reason, None, applicable=False)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (used in `info["verdicts"]` and by the CLI)."""
        return {
            "verifier": self.verifier,
            "accepted": self.accepted,
            "reward": self.reward,
            "reason": self.reason,
            "details": dict(self.details) if self.details else {},
            "error": self.error,
            "applicable": self.applicable,
        }


@runtime_checkable
class Verifier(Protocol):
    """What `factory()` returns: an object that scores one parsed action at one pivot.

    Class attributes a verifier may set (the host reads them with defaults):
        role: "gate" (must pass, runs first) or "acceptor" (any acceptor accepting is enough).
        cost: "cheap", "sandbox" or "judge"; the chain runs cheaper verifiers first.
        deterministic: False for judges and other stochastic verifiers; their verdicts are not
            cached unless the cache is opened with `nondeterministic=True`.
        version: bump when the semantics change; part of the reward-cache key.

    Optional methods:
        `verify_batch(pivot, actions) -> list[Verdict]` scores a GRPO group at once.
        `fingerprint(pivot) -> str | None` names what a verdict at `pivot` depends on beyond the
            pivot, the action, this verifier's name, version and config: the content hash of a
            database it reads, the id of the image it runs in, the backend it runs on. It is
            folded into the reward-cache key, so a changed database never serves a stale verdict.
            None means "cannot tell now" (the Docker engine is unreachable): the verdict is
            neither read from nor written to the cache. It must be cheap: it runs on every
            cached lookup.

    A verdict that two runs of the same candidate may not repeat (a race the verifier saw) sets
    `details["stable"] = False` (`UNSTABLE`): it is never cached.
    """

    def verify(self, pivot: Pivot, action: Message) -> Verdict:
        """Score `action` (an assistant Message parsed from the completion) at `pivot`."""
        ...


UNSTABLE = "stable"  # `details[UNSTABLE] is False`: a verdict that a second run may not repeat (never cached)


def is_unstable(verdict: Verdict) -> bool:
    """True when the verifier marked the verdict as one a rerun may not repeat (`details["stable"] is False`)."""
    details = verdict.details
    return bool(details) and details.get(UNSTABLE, True) is False


def verifier_fingerprint(verifier: object, pivot: Pivot) -> str | None:
    """The verifier's `fingerprint(pivot)`, "" when it has none.

    None when it cannot tell, raises or returns a non-string: a fingerprint that fails says
    nothing about the verdict's inputs, so the caller must not cache.
    """
    fn = getattr(verifier, "fingerprint", None)
    if not callable(fn):
        return ""
    try:
        value = fn(pivot)
    except Exception:  # noqa: BLE001 - "cannot tell": scoring goes on uncached, the verifier reports its own errors
        return None
    return value if isinstance(value, str) else None


def verifier_meta(verifier: object) -> dict[str, Any]:
    """The verifier's declared role, cost, determinism and version, with defaults filled in."""
    return {
        "role": getattr(verifier, "role", "acceptor"),
        "cost": getattr(verifier, "cost", "cheap"),
        "deterministic": getattr(verifier, "deterministic", True),
        "version": str(getattr(verifier, "version", "1")),
    }
