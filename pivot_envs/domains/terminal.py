"""Terminal agents: Terminus JSON turns (keystrokes) and harness tool calls."""

from __future__ import annotations

from typing import ClassVar

from pivot_envs._env import PivotEnv


class TerminalEnv(PivotEnv):
    """`pivot/terminal-v0`: NeMo terminus_judge and terminal_multi_harness rows."""

    domain: ClassVar[str] = "terminal"
    default_verifiers: ClassVar[tuple[str, ...]] = ("turn_kind", "json_schema", "tool_args", "string_similarity")
    bundled_files: ClassVar[tuple[str, ...]] = ("terminal_nemo.jsonl",)
