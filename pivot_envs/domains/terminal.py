"""Terminal agents: Terminus JSON turns (keystrokes) and harness tool calls."""

from __future__ import annotations

from typing import ClassVar

from pivot_envs._env import PivotEnv


class TerminalEnv(PivotEnv):
    """`pivot/terminal-v0`: Terminus JSON turns, harness tool calls and fenced bash blocks.

    The default chain runs cheap checks first: `turn_kind` and `json_schema` (the Terminus gate),
    `tool_args` and `string_similarity` (fast accept), then `docker_shell`, which restores the
    pivot's state in a container and compares effects when the pivot has `context["sandbox"]`
    (pivots from `pivot synthesize terminal-bench`). NeMo terminus rows carry no sandbox
    context: `docker_shell` skips them and the static part of the chain decides.
    """

    domain: ClassVar[str] = "terminal"
    default_verifiers: ClassVar[tuple[str, ...]] = (
        "turn_kind",
        "json_schema",
        "tool_args",
        "string_similarity",
        "docker_shell",
    )
    bundled_files: ClassVar[tuple[str, ...]] = ("terminal_nemo.jsonl",)
