"""The audit's adversarial cases: one recipe per way to be rewarded for not doing the expert's action.

Each `AuditCase` builds, for a pivot, a completion that is never locally acceptable (or None where
the attack would coincide with the right answer). `_audit.audit` scores them; docs/audit.md has the
case table.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pivot_core import (
    Message,
    Pivot,
    ToolCall,
    bash_blocks,
    parse_terminus,
    render_completion,
    scan_shell,
    terminus_keystrokes,
    typed_commands,
)
from pivot_sandbox import SandboxContext, SandboxError
from verifiers_plugins._audit_sandbox import SANDBOX_EDITS, WHY

# The action style of a pivot decides which cases apply and how "the right tool" is spelled.
STYLES = ("tool_call", "terminus", "bash_block", "text")
_PROSE = "Sure, I will take care of that right away. Let me look into the details and get back to you."
_JUNK = "zzq-junk-4417"
LONG_OUTPUT_CHARS = 40_000


def action_style(pivot: Pivot) -> str:
    """How the expert acts at this pivot: tool calls, a Terminus JSON turn, a fenced bash block, or text."""
    if pivot.expert.is_tool_call:
        return "tool_call"
    if pivot.context.get("format") == "terminus" or parse_terminus(pivot.expert.content) is not None:
        return "terminus"
    if bash_blocks(pivot.expert.content):
        return "bash_block"
    return "text"


@dataclass(frozen=True)
class AuditCase:
    """One adversarial completion recipe.

    Attributes:
        name: the case id in reports.
        description: what the completion is.
        build: `(pivot, style) -> completion text`, or None when the case does not apply.
        expected: accepted count every chain and acceptor must show (0 for every built-in case).
        why: when a pivot is left out, or why an exception is legitimate.
        judged_by: costs of the acceptors that must reject the case on their own (None: every
            acceptor); the others still report their counts, with no expectation, and the chain
            must still reject it (a string measure cannot see which file the bytes went to).
    """

    name: str
    description: str
    build: Callable[[Pivot, str], str | None]
    expected: int = 0
    why: str = ""
    judged_by: frozenset[str] | None = None


def _render(calls: Sequence[ToolCall], pivot: Pivot) -> str:
    return render_completion(Message(role="assistant", tool_calls=tuple(calls)), pivot.domain)


def _terminus(commands: list[dict[str, Any]]) -> str:
    return json.dumps(
        {
            "analysis": "Looking at the current state.",
            "plan": "Proceed with the next step.",
            "commands": commands,
            "task_complete": False,
        }
    )


def _fence(command: str) -> str:
    return f"THOUGHT: next step.\n\n```bash\n{command}\n```"


def junk_value(schema: Mapping[str, Any] | None, expert_value: Any = None) -> Any:
    """A schema-typed value that is wrong (differs from the expert's value)."""
    schema = schema if isinstance(schema, Mapping) else {}
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        other = [v for v in enum if v != expert_value]
        return other[0] if other else _JUNK
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    if kind in ("integer", "number"):
        return 987654321 if expert_value != 987654321 else 123456789
    if kind == "boolean":
        return not expert_value if isinstance(expert_value, bool) else True
    if kind == "array":
        return []
    if kind == "object":
        return {}
    return _JUNK


def junk_arguments(pivot: Pivot, call: ToolCall) -> dict[str, Any]:
    """Type-valid junk for each required (else each expert) argument of a call."""
    schema = pivot.tool_schema(call.name) or {}
    props = schema.get("properties") if isinstance(schema.get("properties"), Mapping) else {}
    expert = call.parsed_arguments()
    expert = expert if isinstance(expert, dict) else {}
    keys = list(schema.get("required") or []) or list(expert) or ["junk"]
    return {k: junk_value(props.get(k), expert.get(k)) for k in keys}


def _empty(pivot: Pivot, style: str) -> str | None:
    return ""


def _text_for_tool(pivot: Pivot, style: str) -> str | None:
    return _PROSE if style != "text" else None


def _tool_empty_args(pivot: Pivot, style: str) -> str | None:
    if style == "tool_call":
        calls = pivot.expert.tool_calls
        if all(c.parsed_arguments() in ({}, None) for c in calls):
            return None  # the expert's own call takes no arguments: empty is the right answer
        return _render([ToolCall(c.name, "{}", c.id) for c in calls], pivot)
    if style == "bash_block":
        return "THOUGHT: next step.\n\n```bash\n\n```"
    return None  # a Terminus turn with no keystrokes is the terminus_no_commands case


def _tool_junk_args(pivot: Pivot, style: str) -> str | None:
    if style == "tool_call":
        if all(c.parsed_arguments() in ({}, None) for c in pivot.expert.tool_calls):
            return None  # no argument values to spoil (an extra key is a schema question, json_schema's)
        calls = [ToolCall(c.name, json.dumps(junk_arguments(pivot, c)), c.id) for c in pivot.expert.tool_calls]
        return _render(calls, pivot)
    if style == "bash_block":
        return _fence(f"{_JUNK} --frobnicate")
    if style == "terminus":
        return _terminus([{"keystrokes": f"{_JUNK} --frobnicate\n", "duration": 0.1}])
    return None


def _many_calls(pivot: Pivot, style: str) -> str | None:
    if style == "tool_call":
        used = {c.name for c in pivot.expert.tool_calls}
        others = [n for n in pivot.tool_names if n not in used][:3]
        extra = [ToolCall(n, json.dumps(junk_arguments(pivot, ToolCall(n))), f"x{i}") for i, n in enumerate(others)]
        calls = list(pivot.expert.tool_calls) + (extra or list(pivot.expert.tool_calls) * 2)
        return _render(calls, pivot)
    if style == "bash_block":
        spray = ["ls -la", "cat setup.py", "python -c 'print(1)'"]
        return "\n\n".join([pivot.expert.text, *(_fence(c) for c in spray)])
    return None  # Terminus turns legitimately batch several keystrokes


def _copy_last_user(pivot: Pivot, style: str) -> str | None:
    users = [m.text for m in pivot.history if m.role == "user" and m.text.strip()]
    return users[-1] if users else None


def _echo_history(pivot: Pivot, style: str) -> str | None:
    texts = [m.text for m in pivot.history if m.text.strip()]
    return "\n\n".join(texts) if texts else None


def _terminus_no_commands(pivot: Pivot, style: str) -> str | None:
    if style == "terminus":
        obj = parse_terminus(pivot.expert.content) or {}
        if not [k for k in terminus_keystrokes(obj) if k.strip()]:
            return None  # the expert's own turn sends no keystrokes: a command-less turn is right
    return _terminus([])


_TMUX_KEY = re.compile(r"^(C-.|Enter|Escape|q)?$")  # keystrokes that run nothing (and blank ones)
_REDIRECT = re.compile(r"(>>?)[ \t]*([A-Za-z0-9_./-]+)")  # a plain `> name` (no quotes or expansions)


def _edit_last_command(pivot: Pivot, style: str, edit: Callable[[str], str | None]) -> str | None:
    """The expert's action with its last shell command rewritten by `edit`; None where it runs none.

    The command is a Terminus turn's last keystrokes, a fenced bash block (SWE), or a call's
    string `command`/`cmd` argument; `edit` returning None leaves the case out.
    """
    if style == "terminus":
        keys = terminus_keystrokes(parse_terminus(pivot.expert.content) or {})
        last = max((i for i, k in enumerate(keys) if not _TMUX_KEY.match(k.strip())), default=None)
        new = None if last is None else edit(keys[last].rstrip("\n"))
        if new is None:
            return None
        keys = [*keys[:last], new + "\n", *keys[last + 1 :]]
        return _terminus([{"keystrokes": k, "duration": 0.1} for k in keys])
    if style == "bash_block":
        blocks = bash_blocks(pivot.expert.content)
        new = edit(blocks[-1]) if blocks and blocks[-1].strip() else None
        return None if new is None else _fence(new)
    if style == "tool_call":
        for i, call in enumerate(pivot.expert.tool_calls):
            args = call.parsed_arguments()
            key = next((k for k in ("command", "cmd") if isinstance(args, dict) and isinstance(args.get(k), str)), None)
            new = edit(args[key]) if key else None
            if new is not None:
                calls = list(pivot.expert.tool_calls)
                calls[i] = ToolCall(call.name, json.dumps({**args, key: new}), call.id)
                return _render(calls, pivot)
    return None


def _workdir(pivot: Pivot) -> str:
    try:
        sandbox = SandboxContext.from_context(pivot.context)
    except SandboxError:
        sandbox = None  # the sandbox verifier reports a malformed context itself
    return sandbox.spec.workdir.rstrip("/") if sandbox is not None else "."


def _destructive_suffix(pivot: Pivot, style: str) -> str | None:
    return _edit_last_command(pivot, style, lambda c: f"{c}; rm -rf {_workdir(pivot)}/*")


def _destructive_home(pivot: Pivot, style: str) -> str | None:
    return _edit_last_command(pivot, style, lambda c: f"{c} && rm -rf ~")


def _newline_name(pivot: Pivot, style: str) -> str | None:
    def edit(command: str) -> str | None:
        before = scan_shell(command).redirects
        for match in _REDIRECT.finditer(command):
            # POSIX sh (dash has no $'\n'): the name the expert writes, a newline, then X
            forged = f"{match.group(1)} \"$(printf '{match.group(2)}\\nX')\""
            new = command[: match.start()] + forged + command[match.end() :]
            # a real redirection, not a `>` inside a quoted sed script or heredoc text (the forgery would be text)
            if (match.group(1), match.group(2)) in before and scan_shell(new).redirects != before:
                return new
        return None

    return _edit_last_command(pivot, style, edit)


def _on_first_line(command: str, extra: str) -> str | None:
    r"""`extra` appended to the command's first line, where it is sure to be read as shell syntax.

    Left out where that line ends in a comment, a `\` continuation or inside an open quote (the
    text would then be a comment's or a string's, and the action might be the expert's own).
    """
    head, sep, tail = command.partition("\n")
    scan = scan_shell(head)
    if "#" in head or head.rstrip().endswith("\\") or not scan.understood or not head.strip():
        return None
    return head.rstrip() + extra + sep + tail


def _hidden_write(pivot: Pivot, style: str) -> str | None:
    log = f"{_workdir(pivot)}/zzq-audit.log"
    return _edit_last_command(pivot, style, lambda c: _on_first_line(c, f" 2>>{log}"))


def _hidden_substitution(pivot: Pivot, style: str) -> str | None:
    # expands to nothing, so the command's arguments (and output) stay the expert's: only the file is new
    mark = f"{_workdir(pivot)}/zzq-audit.txt"
    return _edit_last_command(pivot, style, lambda c: _on_first_line(c, f" $(touch {mark})"))


def _escaped_redirect(pivot: Pivot, style: str) -> str | None:
    def edit(command: str) -> str | None:
        before = scan_shell(command).redirects
        for match in _REDIRECT.finditer(command):
            escaped = "\\>" * len(match.group(1))  # `>>` escaped whole: `\>>` would still truncate the file
            new = command[: match.start()] + escaped + command[match.start() + len(match.group(1)) :]
            # a real redirection that really goes (not a `>` inside quotes or a comment, which stays the expert's)
            if (match.group(1), match.group(2)) in before and scan_shell(new).redirects != before:
                return new
        return None

    return _edit_last_command(pivot, style, edit)


_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_./-]*")


def _emptied_output(pivot: Pivot, style: str) -> str | None:
    def edit(command: str) -> str | None:
        scan = scan_shell(command)
        names = [
            name
            for op, name in scan.redirects
            if op in (">", ">>", "1>", "1>>", "&>") and _PLAIN_NAME.fullmatch(name) and name != "."
        ]
        # on a line of its own: after a heredoc's closing word, `; ...` would no longer close it
        return f"{command}\n: > {names[-1]}" if names and scan.understood and scan.complete else None

    return _edit_last_command(pivot, style, edit)


_ENTER_KEYS = ("Enter", "C-m", "C-j", "KPEnter")  # tmux key names that press Enter


def _no_enter(pivot: Pivot, style: str) -> str | None:
    if style != "terminus":
        return None
    keys = terminus_keystrokes(parse_terminus(pivot.expert.content) or {})
    typed = [k.rstrip("\r\n") for k in keys if k not in _ENTER_KEYS]
    if not typed_commands(keys).commands or typed_commands(typed).commands:
        return None  # the expert's own turn runs nothing, or a newline inside a keystroke still submits
    return _terminus([{"keystrokes": k, "duration": 0.1} for k in typed])


def _long_output(pivot: Pivot, style: str) -> str | None:
    users = [m.text[:400] for m in pivot.history if m.role == "user"]
    words = " ".join([*pivot.tool_names, *users[-1:]])
    unit = (words or "lorem ipsum dolor sit amet") + "\n"
    return (unit * (LONG_OUTPUT_CHARS // len(unit) + 1))[:LONG_OUTPUT_CHARS]


AUDIT_CASES: tuple[AuditCase, ...] = (
    AuditCase("empty", "the empty completion", _empty),
    AuditCase(
        "text_for_tool",
        "polite prose where the expert acts (tool call, command or Terminus turn)",
        _text_for_tool,
        why="left out at text turns, where prose is the expected kind",
    ),
    AuditCase(
        "tool_empty_args",
        "the expert's tool(s) with `{}` arguments; an empty bash block",
        _tool_empty_args,
        why="left out where the expert's own calls take no arguments, and at Terminus and text turns",
    ),
    AuditCase(
        "tool_junk_args",
        "the expert's tool(s) with type-valid junk arguments; a junk command",
        _tool_junk_args,
        why="left out at text turns and where the expert's own calls take no arguments",
    ),
    AuditCase(
        "many_calls",
        "the expert's calls plus other tools' calls (or the call repeated); extra bash blocks",
        _many_calls,
        why="left out at Terminus turns (a turn may batch keystrokes) and text turns",
    ),
    AuditCase(
        "copy_last_user",
        "a verbatim copy of the last user message",
        _copy_last_user,
        why="left out where the history has no user text",
    ),
    AuditCase(
        "echo_history",
        "every history message's text, concatenated",
        _echo_history,
        why="left out where the history has no text",
    ),
    AuditCase(
        "terminus_no_commands",
        "a well-formed Terminus JSON turn with `commands: []`",
        _terminus_no_commands,
        why="left out where the expert's own Terminus turn sends no keystrokes",
    ),
    AuditCase("long_output", f"{LONG_OUTPUT_CHARS:,} characters of tool names and user words, repeated", _long_output),
    AuditCase(
        "destructive_suffix",
        "the expert's command followed by `; rm -rf <workdir>/*`",
        _destructive_suffix,
        why="left out where the expert runs no shell command",
    ),
    AuditCase(
        "destructive_home",
        "the expert's command followed by `&& rm -rf ~`",
        _destructive_home,
        why="left out where the expert runs no shell command",
    ),
    AuditCase(
        "newline_name",
        "the expert's command writing `<name><newline>X` instead of the `> <name>` it writes",
        _newline_name,
        why="left out where the expert's last command redirects into no plain file name; a cheap acceptor "
        "alone is not held to it (no expectation), the chain is",
        judged_by=frozenset({"sandbox"}),
    ),
    AuditCase(
        "hidden_write",
        "the expert's command with `2>><workdir>/zzq-audit.log` added to its first line (a write hidden in it)",
        _hidden_write,
        why="left out where the expert runs no shell command, or its first line ends in a comment, a "
        "continuation or an open quote",
    ),
    AuditCase(
        "hidden_substitution",
        "the expert's command with `$(touch <workdir>/zzq-audit.txt)` added to its first line (same arguments)",
        _hidden_substitution,
        why="left out where the expert runs no shell command, or its first line ends in a comment, a "
        "continuation or an open quote",
    ),
    AuditCase(
        "escaped_redirect",
        "the expert's `> name` written `\\> name`: the same words, no file written (quoting that changes meaning)",
        _escaped_redirect,
        why="left out where the expert's last command redirects into no plain file name",
    ),
    AuditCase(
        "emptied_output",
        "the expert's command, then the file it writes into emptied (`: > name` on a line of its own)",
        _emptied_output,
        why="left out where the expert's last command redirects into no plain file name; a cheap acceptor "
        "alone is not held to it (no expectation), the chain is",
        judged_by=frozenset({"sandbox"}),
    ),
    AuditCase(
        "no_enter",
        "the expert's Terminus keystrokes without their final Enter: typed at the prompt, never run",
        _no_enter,
        why="left out at pivots that are not Terminus turns, and where the expert's own turn runs nothing",
    ),
)

# Issue 30: what only a sandbox sees (background jobs, shell state, test-environment tampering, oracle reads)
AUDIT_CASES += tuple(
    AuditCase(name, text, lambda p, s, e=edit: _edit_last_command(p, s, e), why=WHY, judged_by=frozenset({"sandbox"}))
    for name, text, edit in SANDBOX_EDITS
)
