"""Terminal agents: Terminus JSON turns (keystrokes) and harness tool calls."""

from __future__ import annotations

from typing import ClassVar

from pivot_envs._env import PivotEnv


class TerminalEnv(PivotEnv):
    """`pivot/terminal-v0`: Terminus JSON turns, harness tool calls and fenced bash blocks.

    The default chain runs cheap checks first: `harness_format` (on pivots converted from a real
    agent's run, `context.harness`: the completion must be that harness's own reply format),
    `turn_kind` and `json_schema` (the Terminus gate), `tool_args` and `string_similarity`, then
    `docker_shell`, which restores the pivot's state in a container and compares effects when the
    pivot has `context["sandbox"]` (pivots from `pivot synthesize terminal-bench` and from `pivot
    convert --tasks-dir`). The bundled data holds both: sandboxed pivots synthesized from three
    small public Terminal-Bench tasks (`terminal_tasks.jsonl`, images built from the bundled task
    folders on first use; Terminal-Bench canary: tests and demos only) and the NeMo terminus rows,
    which carry no sandbox context (`docker_shell` skips them and the static part of the chain
    decides). `verifiers=["task_tests"]` scores by the task's own tests instead.
    """

    domain: ClassVar[str] = "terminal"
    default_verifiers: ClassVar[tuple[str, ...]] = (
        "harness_format",
        "turn_kind",
        "json_schema",
        "tool_args",
        "string_similarity",
        "docker_shell",
    )
    # the NeMo rows first: `pivots[0]` stays a pivot that needs no container
    bundled_files: ClassVar[tuple[str, ...]] = ("terminal_nemo.jsonl", "terminal_tasks.jsonl")
