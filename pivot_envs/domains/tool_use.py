"""Conversational tool use (tau-bench style): tool calls compared by name and arguments."""

from __future__ import annotations

from typing import ClassVar

from pivot_envs._env import PivotEnv


class ToolUseEnv(PivotEnv):
    """`pivot/tool-use-v0`: tau-bench airline trajectories and NeMo Gym tool-use pivot rows."""

    domain: ClassVar[str] = "tool-use"
    default_verifiers: ClassVar[tuple[str, ...]] = ("turn_kind", "json_schema", "tool_args", "string_similarity")
    bundled_files: ClassVar[tuple[str, ...]] = ("tool_use_tau_airline.jsonl", "tool_use_nemo.jsonl")
    # Pivots carrying a tool world (tau-bench airline) are judged by executing the calls.
    world_verifiers: ClassVar[tuple[str, ...]] = ("turn_kind", "tool_exec", "string_similarity")
