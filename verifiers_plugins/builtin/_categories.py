"""SWE action categories (the paper's tool-name verifier compares these) and the alias table.

Tool-call agents are categorised by tool name (and, for multiplexed editors, the `command`
argument); bash-only agents by the verb of their command. Plugins add aliases through the
`register_categories` hook.
"""

from __future__ import annotations

import re
import shlex

from pivot_envs._actions import SHELL_TOOLS, shell_actions
from pivot_envs._model import Message, ToolCall

CATEGORIES = ("search", "read", "edit", "run", "plan", "finish", "other")

TOOL_ALIASES: dict[str, str] = {
    # search
    "grep": "search", "find": "search", "ls": "search", "glob": "search", "search": "search",
    "find_file": "search", "search_dir": "search", "search_file": "search", "list_files": "search",
    "rg": "search", "tree": "search", "fd": "search",
    # read
    "cat": "read", "head": "read", "tail": "read", "less": "read", "nl": "read", "view": "read",
    "read": "read", "read_file": "read", "open": "read", "goto": "read", "scroll_up": "read",
    "scroll_down": "read", "awk": "read",
    # edit
    "edit": "edit", "create": "edit", "str_replace": "edit", "insert": "edit", "write": "edit",
    "write_file": "edit", "apply_patch": "edit", "patch": "edit", "undo_edit": "edit", "touch": "edit",
    "mv": "edit", "cp": "edit", "rm": "edit", "mkdir": "edit", "tee": "edit",
    # run / test
    "python": "run", "python3": "run", "pytest": "run", "tox": "run", "make": "run", "pip": "run",
    "node": "run", "npm": "run", "go": "run", "cargo": "run", "bash": "run", "sh": "run",
    "execute_bash": "run", "run": "run", "./": "run",
    # plan / think
    "think": "plan", "plan": "plan", "update_plan": "plan", "todo_write": "plan",
    # finish
    "submit": "finish", "finish": "finish", "task_complete": "finish", "exit": "finish",
}


def register_alias(alias: str, category: str) -> None:
    """Add one alias (used by the `register_categories` hook)."""
    if category not in CATEGORIES:
        raise ValueError(f"expected a category in {CATEGORIES}, got {category!r}")
    TOOL_ALIASES[alias] = category


def command_category(command: str) -> str:
    """Category of one shell command from its verb (`sed -i` edits, `sed -n` reads, heredocs edit)."""
    text = command.strip()
    if not text:
        return "other"
    if "COMPLETE_TASK_AND_SUBMIT" in text or text.startswith("submit"):
        return "finish"
    if re.search(r"(^|\s)(cat|tee)\s*>+|<<\s*['\"]?\w+['\"]?", text) and ">" in text:
        return "edit"
    first = re.split(r"\s*(?:&&|\|\||;|\|)\s*", text, maxsplit=1)[0]
    try:
        words = shlex.split(first)
    except ValueError:
        words = first.split()
    while words and (words[0] in ("cd", "sudo", "env", "time") or "=" in words[0]):
        if words[0] == "cd":  # `cd dir && <verb>`: categorise what follows
            rest = re.split(r"\s*(?:&&|;)\s*", text, maxsplit=1)
            return command_category(rest[1]) if len(rest) > 1 else "search"
        words = words[1:]
    if not words:
        return "other"
    verb = words[0].rsplit("/", 1)[-1]
    if verb == "sed":
        return "edit" if any(w.startswith("-i") for w in words[1:]) else "read"
    if verb.startswith("python") and "-m" in words and "pytest" in words:
        return "run"
    if words[0].startswith("./"):
        return "run"
    if verb == "git":
        sub = words[1] if len(words) > 1 else ""
        return {"diff": "read", "status": "search", "log": "read", "show": "read", "grep": "search"}.get(sub, "edit")
    return TOOL_ALIASES.get(verb, "other")


def call_category(call: ToolCall) -> str:
    """Category of a tool call: shell tools by their command, editors by their sub-command, others by name."""
    args = call.parsed_arguments()
    args = args if isinstance(args, dict) else {}
    if call.name in SHELL_TOOLS and isinstance(args.get("command"), str):
        return command_category(args["command"])
    sub = args.get("command")
    if isinstance(sub, str) and sub in TOOL_ALIASES and call.name.endswith(("editor", "edit", "file")):
        return TOOL_ALIASES[sub]
    name = call.name.lower()
    if name in TOOL_ALIASES:
        return TOOL_ALIASES[name]
    for part in re.split(r"[_\-.]", name):
        if part in TOOL_ALIASES:
            return TOOL_ALIASES[part]
    return "other"


def message_category(message: Message) -> str:
    """Category of an assistant turn: its first tool call, else its first shell command, else plan."""
    if message.tool_calls:
        return call_category(message.tool_calls[0])
    cmds = shell_actions(message)
    if cmds:
        return command_category(cmds[0])
    return "other"  # free text is not an action: it never matches by category
