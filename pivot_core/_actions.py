"""Pure helpers that read actions: Terminus JSON turns, fenced bash blocks, shell normalisation."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from typing import Any

from pivot_core._editor import EDITOR_TOOL, editor_shell
from pivot_core._harnesses import (
    MINI_SWE_AGENT,
    MINI_SWE_AGENT_TIMED_OUT,
    mini_swe_agent_action,
    mini_swe_agent_command,
    mini_swe_agent_shell,
    mini_swe_agent_timeout,
)
from pivot_core._ipython import IPYTHON_TOOL, ipython_command
from pivot_core._model import Message, Pivot, ToolCall
from pivot_core._openhands_bash import EXECUTE_BASH, NotRun, execute_bash_outcome
from pivot_core._safejson import decode_json
from pivot_core._shell import Typed, scan_shell, trim_command, typed_commands

# Terminus 2 turns carry analysis/plan/task_complete; Terminus 1 turns state_analysis/explanation/
# is_task_complete. Both carry `commands`, which is what the sandbox runs.
TERMINUS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["commands"],
    "anyOf": [{"required": ["analysis", "plan"]}, {"required": ["state_analysis", "explanation"]}],
    "properties": {
        "analysis": {"type": "string"},
        "plan": {"type": "string"},
        "state_analysis": {"type": "string"},
        "explanation": {"type": "string"},
        "is_task_complete": {"type": "boolean"},
        "commands": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["keystrokes"],
                "properties": {"keystrokes": {"type": "string"}, "duration": {"type": "number", "minimum": 0}},
            },
        },
        "task_complete": {"type": "boolean"},
    },
}

_SHELL_FENCES = ("bash", "sh", "shell", "console")
_SHORT_FLAGS = re.compile(r"-[A-Za-z]{1,6}")
_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def parse_terminus(text: str | None) -> dict[str, Any] | None:
    """The Terminus JSON object in `text` (tolerating text around it), None when there is none.

    JSON that decodes to an unsafe value (see `decode_json`) is no Terminus turn: it scores 0.
    """
    if not text or "{" not in text:  # no object to find (and no decode error raised to find that out)
        return None
    for candidate in (text.strip(), *(m.group(0) for m in _JSON_OBJECT.finditer(text))):
        try:
            obj = decode_json(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and "commands" in obj:
            return obj
    return None


def terminus_keystrokes(obj: dict[str, Any]) -> list[str]:
    """The keystrokes of a Terminus turn, in order (non-string entries skipped)."""
    cmds = obj.get("commands")
    if not isinstance(cmds, list):
        return []
    return [c["keystrokes"] for c in cmds if isinstance(c, dict) and isinstance(c.get("keystrokes"), str)]


def bash_blocks(text: str | None) -> list[str]:
    """The fenced bash/sh blocks of a message (mini-swe-agent style), stripped.

    Fences are paired line by line, so a ```python block before the action cannot swallow it.
    """
    blocks: list[str] = []
    info: str | None = None
    body: list[str] = []
    for line in (text or "").splitlines():
        stripped = line.strip()
        if info is None:
            if stripped.startswith("```"):
                info, body = stripped[3:].strip().lower(), []
        elif stripped == "```":
            if info in _SHELL_FENCES:
                blocks.append("\n".join(body).strip())
            info = None
        else:
            body.append(line)
    return blocks


def shell_actions(message: Message) -> list[str]:
    """The shell commands an assistant message runs: Terminus keystrokes, bash tool calls, fenced blocks.

    An OpenHands `str_replace_editor` call that changes a file runs as the shell command that makes
    the same change (`pivot_core._editor`), an IPython cell as its kernel-equivalent process
    (`pivot_core._ipython`); `view` runs nothing, nor does a call its harness does not run (`shell_call`).
    """
    obj = parse_terminus(message.content)
    if obj is not None:
        return [k for k in terminus_keystrokes(obj) if k.strip()]
    out = [command for call in message.tool_calls if isinstance(command := shell_call(call), str)]
    if out:
        return out
    return bash_blocks(message.content)


SHELL_TOOLS = frozenset({"bash", "execute_bash", "shell", "run_shell_command", "terminal", "exec_command", "run"})


def shell_call(call: ToolCall) -> str | NotRun | None:
    """The shell command one tool call runs; `NotRun` for a shell call its harness runs nothing for.

    The one reading of a call that scoring, replays and episodes share: an OpenHands `execute_bash`
    call that sends input to a running process (`is_input`), holds several commands or a negative
    timeout is `NotRun` (`pivot_core._openhands_bash`), so nothing ever executes it as a command.
    None: the call is no shell call (an editor `view`, `think`, an unknown tool).
    """
    args = call.parsed_arguments()
    if call.name == EDITOR_TOOL:
        # OpenHands' file editor changes files: the shell command that makes the same change
        return editor_shell(args)
    if call.name == IPYTHON_TOOL and isinstance(args, dict) and isinstance(args.get("code"), str):
        return ipython_command(args["code"])  # OpenHands' kernel: a kernel-equivalent process (`_ipython`)
    if not isinstance(args, dict) or call.name not in SHELL_TOOLS:
        return None
    if call.name == EXECUTE_BASH and "command" in args:
        return execute_bash_outcome(args)
    return next(
        (args[key] for key in ("command", "cmd", "keystrokes", "script") if isinstance(args.get(key), str)), None
    )


def normalize_shell(command: str) -> str:
    r"""Canonical form of a shell command: two commands with the same form mean the same.

    Only changes that provably keep meaning are made (`scan_shell`): the blanks around the
    command, runs of blanks between words (never inside quotes or heredoc bodies), and a
    double-quoted literal spelled single-quoted. Quoting, escapes, indentation and flag order are
    kept: `echo hi \> f` writes no file, `tar -xf a` is not `tar -fx a`. Text the reader does not
    fully understand (an open quote, an unterminated heredoc) is compared as written.
    """
    return scan_shell(trim_command(command)).canonical


def loose_shell(command: str) -> str:
    """`normalize_shell`, then combined short flags split and sorted per run (`ls -la` == `ls -a -l`).

    Not meaning-preserving (`tar -xf a` is not `tar -fx a`): for acceptors whose acceptance a more
    faithful verifier overrides (similarity, argument matching), never for "the same action".
    """
    out: list[str] = []
    flags: list[str] = []
    for token in _CANONICAL_TOKEN.findall(normalize_shell(command)):
        if _SHORT_FLAGS.fullmatch(token):
            flags.extend("-" + ch for ch in token[1:])
            continue
        if token == " " and flags:
            continue
        if flags:
            out.append(" ".join(sorted(set(flags))))
            flags = []
            if token != " " and out and out[-1] != " ":
                out.append(" ")
        out.append(token)
    if flags:
        out.append(" ".join(sorted(set(flags))))
    return "".join(out)


# a quoted string, a run of other non-blank characters, or one blank (canonical text has single blanks)
_CANONICAL_TOKEN = re.compile(r"""'[^']*'|"(?:\\[\s\S]|[^"\\])*"|[^\s'"]+|\s""")


def action_text(message: Message, commands: list[str] | None = None) -> str:
    """The comparable text of a non-tool action: shell commands when it runs some, else its content.

    Args:
        message: the assistant turn.
        commands: `shell_actions(message)` when the caller has them already (they are not derived again).
    """
    if message.tool_calls:
        return message.text
    cmds = shell_actions(message) if commands is None else commands
    if cmds:
        return "\n".join(loose_shell(c) for c in cmds)
    return message.text


# tmux key names a turn may send outside a terminal (a bash tool's `C-c`); they run nothing in a fresh shell.
_KEYS = frozenset({"C-c", "C-d", "C-z", "C-l", "Enter", "Escape", "q"})


def typed_action(message: Message, pending: str = "") -> Typed:
    """What a turn runs and leaves typed, as the harness executes it.

    A Terminus turn's keystrokes are typed into a terminal (`typed_commands`): text without a
    final newline (or Enter) is not run, it waits at the prompt. Tool calls and fenced blocks are
    run whole by their harness, so they leave nothing typed.

    Args:
        message: the assistant turn.
        pending: what the terminal already holds typed (`history_typed(pivot).pending`).
    """
    obj = parse_terminus(message.content)
    if obj is not None:
        return typed_commands(terminus_keystrokes(obj), pending)
    commands = (trim_command(k) for k in shell_actions(message))
    return Typed(tuple(c for c in commands if c and c not in _KEYS), pending)


def action_commands(message: Message, pending: str = "") -> list[str]:
    """The shell commands a message runs, as a shell receives them (see `typed_action`)."""
    return list(typed_action(message, pending).commands)


def harness_action(
    message: Message, context: Mapping[str, Any], pending: str = "", answer: Message | None = None
) -> Typed:
    """What a turn runs as the harness of its run (`context.harness`) ran it, in a shell that keeps its state.

    `typed_action`, except for mini-swe-agent: exactly one ```bash block (its `action_regex`; else
    it ran nothing), run in a fresh subshell from the harness's working directory
    (`mini_swe_agent_command`), so a `cd` inside it never reaches the next command. Every sandbox
    replay and judge of a turn reads its commands here (`history_typed`, `docker_shell`,
    `task_tests`, the replay check), so they all run it the same way.

    Args:
        message: the assistant turn.
        context: the pivot's context (`harness`; mini-swe-agent's `command_timeout`).
        pending: what the terminal already holds typed (a Terminus turn's).
        answer: what the harness answered to the turn, when known: a mini-swe-agent command it
            killed at its timeout runs for that timeout and is killed the same way.
    """
    if context.get("harness") != MINI_SWE_AGENT:
        return typed_action(message, pending)
    command = mini_swe_agent_action(message.content)
    if command is None:
        return Typed((), "")
    killed = answer is not None and answer.role == "user" and MINI_SWE_AGENT_TIMED_OUT in answer.text
    seconds = mini_swe_agent_timeout(context) if killed else None
    return Typed((mini_swe_agent_command(command, seconds, mini_swe_agent_shell(context)),), "")


def history_typed(pivot: Pivot) -> Typed:
    """Every command the assistant turns before the pivot ran, in order, and what they left typed.

    The turns share one terminal: what one Terminus turn leaves typed is the start of the next's line.
    Each turn's commands are those its harness ran (`harness_action`, given what the harness answered).
    """
    commands: list[str] = []
    pending = ""
    history = pivot.history
    for i, message in enumerate(history):
        if message.role == "assistant":
            answer = history[i + 1] if i + 1 < len(history) else None
            typed = harness_action(message, pivot.context, pending, answer)
            commands.extend(typed.commands)
            pending = typed.pending
    return Typed(tuple(commands), pending)


def history_commands(pivot: Pivot) -> list[str]:
    """Every shell command of the assistant turns before the pivot, in order (`history_typed`)."""
    return list(history_typed(pivot).commands)


def fenced_commands(text: str | None) -> list[str]:
    """Commands in fenced blocks: ```bash blocks, else a bare ``` block that ends the turn.

    Classic SWE-agent turns are a thought followed by one bare-fenced command, and SWE-agent
    runs the last block; a bare block with more text after it is an example or a quotation
    (e.g. inside an echoed prompt), not the turn's action.
    """
    blocks = bash_blocks(text)
    if blocks:
        return blocks
    body = (text or "").rstrip()
    if not body.endswith("```"):
        return []
    lines = body[:-3].rstrip(" ").splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].strip() == "```":
            command = "\n".join(lines[i + 1 :]).strip()
            return [command] if command else []
    return []


NOT_RUN = "(typed, not run) "  # marks text a Terminus turn leaves at the prompt: no command, no category


def message_commands(message: Message) -> list[str]:
    """The text-form actions of a turn: what a Terminus turn's terminal runs, else fenced commands.

    Text a Terminus turn leaves typed without Enter is a last entry of its own, `NOT_RUN` + text:
    it runs nothing, so it is in no command's category and never passes for the expert's command.
    """
    return list(_text_commands(message.content or ""))


@functools.lru_cache(maxsize=2048)
def _text_commands(text: str) -> tuple[str, ...]:
    # Cached: every verifier of a chain (and the audit) asks for the same turn's commands.
    obj = parse_terminus(text)
    if obj is not None:
        typed = typed_commands(terminus_keystrokes(obj))
        return typed.commands + ((NOT_RUN + typed.pending,) if typed.pending.strip() else ())
    return tuple(fenced_commands(text))
