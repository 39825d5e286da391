"""SWE action categories (the paper's tool-name verifier compares these) and the alias table.

Tool-call agents are categorised by tool name (and, for multiplexed editors such as
`str_replace_editor`, by their `command` sub-command); bash-only agents by the verb of their
command. `TOOL_ALIASES` is the built-in table; it is registered through the
`register_categories` hook like any plugin's aliases, and verifiers read the merged table from
the plugin host (`category_table()`), so a plugin adds aliases without mutating this module.
Lookups are case-insensitive (`Bash`, `Read`, `TodoWrite` from Claude Code-style agents).
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Mapping

from pivot_core import (
    SHELL_TOOLS,
    Message,
    ToolCall,
    message_commands,
)
from verifiers_plugins._memo import call_arguments

CATEGORIES = ("search", "read", "edit", "run", "plan", "finish", "other")

# One table for tool names (SWE-agent, OpenHands, OpenCode, Codex, Claude Code) and shell verbs.
TOOL_ALIASES: dict[str, str] = {
    # search: locate files or text
    "grep": "search",
    "egrep": "search",
    "fgrep": "search",
    "rg": "search",
    "ag": "search",
    "ack": "search",
    "find": "search",
    "fd": "search",
    "locate": "search",
    "ls": "search",
    "tree": "search",
    "glob": "search",
    "search": "search",
    "find_file": "search",
    "search_dir": "search",
    "search_file": "search",
    "list_files": "search",
    "list": "search",
    "list_dir": "search",
    "codebase_search": "search",
    "file_search": "search",
    "grep_search": "search",
    "filemap": "search",
    # read: show file contents
    "cat": "read",
    "head": "read",
    "tail": "read",
    "less": "read",
    "more": "read",
    "nl": "read",
    "wc": "read",
    "view": "read",
    "read": "read",
    "read_file": "read",
    "open": "read",
    "goto": "read",
    "scroll_up": "read",
    "scroll_down": "read",
    "awk": "read",
    "diff": "read",
    "file": "read",
    "stat": "read",
    "todoread": "read",
    "view_image": "read",
    "notebookread": "read",
    # edit: change files
    "edit": "edit",
    "create": "edit",
    "str_replace": "edit",
    "insert": "edit",
    "write": "edit",
    "write_file": "edit",
    "apply_patch": "edit",
    "patch": "edit",
    "undo_edit": "edit",
    "touch": "edit",
    "mv": "edit",
    "cp": "edit",
    "rm": "edit",
    "mkdir": "edit",
    "tee": "edit",
    "multiedit": "edit",
    "notebookedit": "edit",
    "edit_file": "edit",
    "replace": "edit",
    "chmod": "edit",
    "ed": "edit",
    "truncate": "edit",
    "perl": "edit",
    # run / test: execute code
    "python": "run",
    "python3": "run",
    "pytest": "run",
    "py.test": "run",
    "nosetests": "run",
    "unittest": "run",
    "tox": "run",
    "nox": "run",
    "make": "run",
    "pip": "run",
    "pip3": "run",
    "node": "run",
    "npm": "run",
    "npx": "run",
    "yarn": "run",
    "go": "run",
    "cargo": "run",
    "bash": "run",
    "sh": "run",
    "execute_bash": "run",
    "run": "run",
    "java": "run",
    "mvn": "run",
    "gradle": "run",
    "django-admin": "run",
    "execute_ipython_cell": "run",
    "ipython": "run",
    "uv": "run",
    "coverage": "run",
    "shell": "run",
    "local_shell": "run",
    "exec_command": "run",
    "sphinx-build": "run",
    "apt-get": "run",
    "apt": "run",
    "conda": "run",
    "ruby": "run",
    "rake": "run",
    "which": "search",
    "type": "search",
    "pwd": "search",
    # plan / think
    "think": "plan",
    "plan": "plan",
    "update_plan": "plan",
    "todo_write": "plan",
    "todowrite": "plan",
    "task_tracker": "plan",
    "exitplanmode": "plan",
    # finish / submit
    "submit": "finish",
    "finish": "finish",
    "task_complete": "finish",
    "exit": "finish",
    "attempt_completion": "finish",
}
# Sub-commands of `git` that do not edit the work tree.
GIT_SUBCOMMANDS = {
    "diff": "read",
    "show": "read",
    "log": "read",
    "blame": "read",
    "status": "search",
    "grep": "search",
    "ls-files": "search",
}
_SUBMIT_MARK = "COMPLETE_TASK_AND_SUBMIT"
_PREFIX_WORDS = ("sudo", "env", "time", "timeout", "nohup", "nice")
_DURATION = re.compile(r"\d+(?:\.\d+)?[smhd]?")
# Compiled once (every candidate's command meets them; `re.match(pattern, ...)` looks each up per call).
_ASSIGNMENT = re.compile(r"\w+=\S*")
_SUBMIT = re.compile(r"submit\b")
_HEREDOC_START = re.compile(r"<<-?\s*['\"]?\w+['\"]?")
_REDIRECT_WRITE = re.compile(r"(echo|printf|cat)\b[^|]*[^2&]>>?\s*\S")
_OPERATOR_SPLIT = re.compile(r"\s*(?:&&|\|\||;|\|)\s*")


def strip_prefixes(words: list[str]) -> list[str]:
    """The words after prefixes that run another command (`timeout 60`, `nice -n 5`, `env A=1`, `sudo`).

    `timeout 60 pytest` runs pytest: the duration (and the prefix's options) are not the program.
    """
    i = 0
    while i < len(words):
        word = words[i]
        if word in _PREFIX_WORDS:
            i += 1
            while i < len(words) and words[i].startswith("-"):
                # `nice -n 5`, `timeout -s KILL 60`: options that take a value consume it.
                i += 2 if words[i] in ("-n", "-s", "-k", "--signal", "--kill-after", "-u") else 1
            if word == "timeout" and i < len(words) and _DURATION.fullmatch(words[i]):
                i += 1
        elif _ASSIGNMENT.fullmatch(word):
            i += 1
        else:
            break
    return words[i:]


def category_table() -> dict[str, str]:
    """The merged alias table (built-ins and plugins) from the plugin host, lower-case keys."""
    from verifiers_plugins._host import get_host

    table: dict[str, str] = {}
    for alias, reg in get_host().registry("categories").items():
        if reg.obj not in CATEGORIES:
            raise ValueError(f"plugin {reg.plugin!r} maps {alias!r} to {reg.obj!r}; expected one of {CATEGORIES}")
        table[alias.lower()] = reg.obj
    return table


@functools.lru_cache(maxsize=8192)
def _split(segment: str) -> tuple[str, ...]:
    return tuple(_words_uncached(segment))


def _words(segment: str) -> list[str]:
    return list(_split(segment[:2000]))


def _words_uncached(segment: str) -> list[str]:
    segment = segment[:2000]  # a verb and its first words are all a category needs
    try:
        return shlex.split(segment, posix=True)
    except ValueError:
        return segment.split()


def command_category(command: str, table: Mapping[str, str] = TOOL_ALIASES) -> str:
    """Category of one shell command from its verb (`sed -i` edits, `sed -n` reads, heredocs edit)."""
    text = command.strip()
    if not text:
        return "other"
    if _SUBMIT_MARK in text or _SUBMIT.match(text):
        return "finish"
    if _HEREDOC_START.search(text) and ">" in first_line(text):
        return "edit"  # `cat <<'EOF' > file` / `cat > file <<EOF`: a heredoc write
    if _REDIRECT_WRITE.match(first_line(text)):
        return "edit"  # `echo x > file`: a redirect write
    segments = [s for s in _OPERATOR_SPLIT.split(first_line(text)) if s.strip()]
    for k, segment in enumerate(segments):
        words = strip_prefixes(_words(segment))
        if not words or words[0] in ("cd", "pushd", "source", "export", "set"):
            continue  # set-up words: categorise what follows
        if words[0] in ("echo", "printf", "yes") and k + 1 < len(segments):
            continue  # `echo c | pytest --pdb`: the input feeds the command that matters
        return _verb_category(words, table)
    return "search" if segments and _words(segments[0])[:1] == ["cd"] else "other"


def first_line(command: str) -> str:
    """The first line of a command that is not a comment (heredoc bodies and notes follow it)."""
    for line in command.strip().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            return line.strip()
    return ""


def command_verb(command: str) -> str:
    """The program a command runs (after `cd`, env assignments and prefixes), "" when none."""
    for segment in _OPERATOR_SPLIT.split(first_line(command)):
        words = strip_prefixes(_words(segment))
        if words and words[0] not in ("cd", "pushd", "source", "export", "set"):
            return words[0].rsplit("/", 1)[-1]
    return ""


def _verb_category(words: list[str], table: Mapping[str, str]) -> str:
    verb = words[0].rsplit("/", 1)[-1].lower()
    if verb == "sed":
        return "edit" if any(w.startswith("-i") or w == "--in-place" for w in words[1:]) else "read"
    if verb == "perl":
        return "edit" if any(w.startswith("-i") or w.startswith("-pi") for w in words[1:]) else "run"
    if verb == "git":
        sub = words[1] if len(words) > 1 else ""
        return GIT_SUBCOMMANDS.get(sub, "edit")
    if words[0].startswith(("./", "bin/")) or verb.endswith((".py", ".sh")) or verb.startswith("python"):
        return "run"
    return table.get(verb, "other")


def call_category(call: ToolCall, table: Mapping[str, str] = TOOL_ALIASES) -> str:
    """Category of a tool call: shell tools by their command, editors by their sub-command, others by name."""
    args = call_arguments(call)
    args = args if isinstance(args, dict) else {}
    name = call.name.lower()
    if name in SHELL_TOOLS or name in ("bash", "shell", "local_shell"):
        cmd = args.get("command", args.get("cmd"))
        if isinstance(cmd, list):
            cmd = " ".join(str(c) for c in cmd)  # Codex `shell` takes argv
        return command_category(cmd, table) if isinstance(cmd, str) else "other"
    if "editor" in name or name.endswith("_edit"):
        sub = args.get("command")
        # A multiplexed editor's category is its sub-command's; without a known one it is no action.
        return table.get(sub.lower(), "other") if isinstance(sub, str) else "other"
    if name in table:
        return table[name]
    for part in re.split(r"[_\-.]", name):
        if part in table:
            return table[part]
    return "other"


def action_categories(message: Message, table: Mapping[str, str] = TOOL_ALIASES) -> list[str]:
    """One category per action of a turn: each tool call, else each command (Terminus / fenced)."""
    if message.tool_calls:
        return [call_category(c, table) for c in message.tool_calls]
    return [command_category(c, table) for c in message_commands(message)]


def action_count(message: Message) -> int:
    """How many actions a turn takes (tool calls, else commands), without categorising them."""
    return len(message.tool_calls) or len(message_commands(message))


def message_category(message: Message, table: Mapping[str, str] = TOOL_ALIASES) -> str:
    """Category of an assistant turn: its first action's, "other" for a turn with no action."""
    cats = action_categories(message, table)
    return cats[0] if cats else "other"
