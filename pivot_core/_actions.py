"""Pure helpers that read actions: Terminus JSON turns, fenced bash blocks, shell normalisation."""

from __future__ import annotations

import functools
import json
import re
import shlex
from typing import Any

from pivot_core._model import Message, Pivot
from pivot_core._safejson import decode_json

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
    """The shell commands an assistant message runs: Terminus keystrokes, bash tool calls, fenced blocks."""
    obj = parse_terminus(message.content)
    if obj is not None:
        return [k for k in terminus_keystrokes(obj) if k.strip()]
    out: list[str] = []
    for call in message.tool_calls:
        args = call.parsed_arguments()
        if isinstance(args, dict):
            for key in ("command", "cmd", "keystrokes", "script"):
                if isinstance(args.get(key), str) and call.name in SHELL_TOOLS:
                    out.append(args[key])
                    break
    if out:
        return out
    return bash_blocks(message.content)


SHELL_TOOLS = frozenset({"bash", "execute_bash", "shell", "run_shell_command", "terminal", "exec_command", "run"})


def normalize_shell(command: str) -> str:
    """Canonical form of a shell command for string comparison.

    Whitespace is collapsed, quoting is normalised through shlex, a trailing newline (Terminus
    sends one to press Enter) is dropped, and combined short flags are split and sorted per word
    run (`ls -la` == `ls -al` == `ls -a -l`). Text shlex cannot split is only whitespace-collapsed.
    """
    text = command.strip()
    try:
        words = shlex.split(text, posix=True)
    except ValueError:
        return " ".join(text.split())
    out: list[str] = []
    flags: list[str] = []
    for w in words:
        if _SHORT_FLAGS.fullmatch(w):
            flags.extend("-" + ch for ch in w[1:])
            continue
        if flags:
            out.extend(sorted(set(flags)))
            flags = []
        out.append(shlex.quote(w))
    out.extend(sorted(set(flags)))
    return " ".join(out)


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
        return "\n".join(normalize_shell(c) for c in cmds)
    return message.text


# tmux key names a Terminus turn may send; they run nothing in a fresh shell.
_KEYS = frozenset({"C-c", "C-d", "C-z", "C-l", "Enter", "Escape", "q"})


def action_commands(message: Message) -> list[str]:
    """The shell commands a message runs, as a shell would receive them (Enter and key names dropped)."""
    out = []
    for keys in shell_actions(message):
        command = keys.rstrip("\n").strip()
        if command and command not in _KEYS:
            out.append(command)
    return out


def history_commands(pivot: Pivot) -> list[str]:
    """Every shell command of the assistant turns before the pivot, in order."""
    return [c for m in pivot.history if m.role == "assistant" for c in action_commands(m)]


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


def message_commands(message: Message) -> list[str]:
    """The text-form actions of a turn: Terminus keystrokes, else fenced commands."""
    return list(_text_commands(message.content or ""))


@functools.lru_cache(maxsize=2048)
def _text_commands(text: str) -> tuple[str, ...]:
    # Cached: every verifier of a chain (and the audit) asks for the same turn's commands.
    obj = parse_terminus(text)
    if obj is not None:
        return tuple(k for k in terminus_keystrokes(obj) if k.strip())
    return tuple(fenced_commands(text))
