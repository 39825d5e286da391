"""Repository-editing agents (SWE): candidates judged by execution where the pivot has a sandbox, else by target."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from pivot_envs._env import PivotEnv
from pivot_sandbox import SWE_STATE_LIMITS
from verifiers_plugins import VerifierChain


class SweEnv(PivotEnv):
    """`pivot/swe-v0`: NeMo swe_pivot rows and mini-swe-agent trajectories.

    The default chain: `harness_format` (pivots of a real run: mini-swe-agent's one bash block),
    `turn_kind`, `json_schema`, then `swe_target` (the paper's category check, `tool_name`, plus the
    action's target), `docker_shell` and `swe_tests`. On a pivot converted with `pivot convert
    --swe-instances` (its instance's image as `context.sandbox`, the replay checked faithful)
    `docker_shell` runs the candidate at the restored state and compares its effect with the
    expert's, and decides; at the run's submission `swe_tests` grades what the candidate submits
    with the instance's tests, as SWE-bench does. Where neither applies (NeMo rows, other
    repositories, a replay that diverged) `swe_target` decides. Pass
    verifiers=["turn_kind", "json_schema", "tool_name"] for the paper's verifier.
    """

    domain: ClassVar[str] = "swe"
    default_verifiers: ClassVar[tuple[str, ...]] = (
        "harness_format",
        "turn_kind",
        "json_schema",
        "swe_target",
        "docker_shell",
        "swe_tests",
    )
    bundled_files: ClassVar[tuple[str, ...]] = ("swe_nemo.jsonl", "swe_mini_swe_agent.jsonl")

    def build_chain(
        self, verifiers: Sequence[str] | None, config: Mapping[str, Mapping[str, Any]] | None
    ) -> VerifierChain:
        """The chain, `docker_shell` given the limits a SWE-bench state needs (unless the caller set its own)."""
        merged = {name: dict(cfg) for name, cfg in (config or {}).items()}
        shell = merged.setdefault("docker_shell", {})
        for key, value in SWE_STATE_LIMITS.items():
            shell.setdefault(key, value)
        return super().build_chain(verifiers, merged)
