"""`Profile`: the K verified samples of a reference policy at one pivot (what selection filters on)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pivot_core._checks import load, require

ProfileOutcome = Literal["unprofiled", "all_zero", "all_one", "constant", "mixed"]


@dataclass(frozen=True)
class Profile:
    """K verified samples of a reference policy at one pivot.

    Attributes:
        k: number of samples.
        rewards: the K rewards in sample order.
        policy_id: which policy sampled them (model path or name + revision).
        verifier_hash: hash of the verifier chain configuration that scored them.
    """

    k: int
    rewards: tuple[float, ...]
    policy_id: str = ""
    verifier_hash: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "rewards", tuple(float(r) for r in self.rewards))
        require(self.k == len(self.rewards), f"Profile.k: expected len(rewards)={len(self.rewards)}, got {self.k}")
        require(all(math.isfinite(r) for r in self.rewards), "Profile.rewards: expected finite numbers")
        require(
            all(0.0 <= r <= 1.0 for r in self.rewards),
            f"Profile.rewards: expected rewards in [0, 1], got {[r for r in self.rewards if not 0.0 <= r <= 1.0][:3]}",
        )

    @property
    def mean(self) -> float:
        """Mean reward (0.0 for an empty profile)."""
        return sum(self.rewards) / self.k if self.k else 0.0

    @property
    def variance(self) -> float:
        """Population variance of the rewards, the quantity PivotRL filters on."""
        if not self.k:
            return 0.0
        m = self.mean
        return sum((r - m) ** 2 for r in self.rewards) / self.k

    @property
    def outcome(self) -> ProfileOutcome:
        """The group's kind, the one classification the report and `select_pivots` share.

        "all_zero" and "all_one" are the zero-variance groups of binary rewards; "constant" is a
        zero-variance group of one partial reward (all 0.5): it teaches nothing either; "mixed"
        has variance > 0 (what selection keeps is a subset of it); "unprofiled" has no samples.
        """
        if not self.k:
            return "unprofiled"
        if self.variance > 0:
            return "mixed"
        if self.mean >= 1.0:
            return "all_one"
        return "all_zero" if self.mean <= 0.0 else "constant"

    @property
    def zero_variance(self) -> bool:
        """True for a profiled group whose rewards are all equal (GRPO's advantage is 0 for every sample)."""
        return self.outcome in ("all_zero", "all_one", "constant")

    def to_json(self) -> dict[str, Any]:
        """`{k, rewards, mean, variance, policy_id, verifier_hash}`; mean/variance are informative."""
        return {
            "k": self.k,
            "rewards": list(self.rewards),
            "mean": self.mean,
            "variance": self.variance,
            "policy_id": self.policy_id,
            "verifier_hash": self.verifier_hash,
        }

    @classmethod
    def from_json(cls, payload: Mapping[str, Any]) -> Profile:
        """Inverse of `to_json` (mean and variance are recomputed, not trusted)."""

        def build(p: Mapping[str, Any]) -> Profile:
            rewards = tuple(p["rewards"])
            return cls(
                k=int(p.get("k", len(rewards))),
                rewards=rewards,
                policy_id=p.get("policy_id", ""),
                verifier_hash=p.get("verifier_hash", ""),
            )

        return load("Profile", payload, build)
