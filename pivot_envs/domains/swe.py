"""Repository-editing agents (SWE): the paper's tool-name / action-category verifier."""

from __future__ import annotations

from typing import ClassVar

from pivot_envs._env import PivotEnv


class SweEnv(PivotEnv):
    """`pivot/swe-v0`: NeMo swe_pivot rows and mini-swe-agent trajectories."""

    domain: ClassVar[str] = "swe"
    # `swe_target` = the paper's category check (`tool_name`) plus the action's target; the audit
    # shows why: category alone accepts the right tool with junk arguments. Pass
    # verifiers=["turn_kind", "json_schema", "tool_name"] for the paper's verifier.
    default_verifiers: ClassVar[tuple[str, ...]] = ("turn_kind", "json_schema", "swe_target")
    bundled_files: ClassVar[tuple[str, ...]] = ("swe_nemo.jsonl", "swe_mini_swe_agent.jsonl")
