"""The Python an action runs or writes, and everything around it that must match exactly.

An action becomes a list of `Piece`s, one per shell command or tool call:

- a shell command (a Terminus keystroke, a bash tool call, a fenced ```bash block) with
  `python -c CODE`, `python - <<EOF ... EOF` (a *script*) or `cat <<EOF > file.py` /
  `cat > file.py <<EOF` (a *file*); the rest of the command is kept as normalized words;
- an editor tool call on a `.py` path (`str_replace_editor` create / str_replace / insert, and
  any tool with a path and `file_text` / `new_str` / `content` / `code`), whose other arguments
  (path, `old_str`, line) must match exactly: an edit's anchor has to match the file byte for byte;
- a python tool call (`python`, `ipython`, `execute_python`, ...) with a `code` argument (a script).

Only pivot-gym's public names are used (the data model, `action_commands` for what a terminal
runs, `scan_shell` for the operators bash reads), so the plugin depends on nothing private.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from typing import Any

from pivot_core import action_commands, scan_shell

_PYTHON = re.compile(r"^(?:\S*/)?python(?:\d+(?:\.\d+)*)?$")
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1([^\n]*)\n(.*?)\n[ \t]*\2[ \t]*(?=\n|$)", re.DOTALL)
_CODE_KEYS = ("file_text", "new_str", "new_string", "content", "code", "new_content", "source")
_PATH_KEYS = ("path", "file_path", "filename", "file")
_PYTHON_TOOLS = frozenset(
    {
        "python",
        "ipython",
        "execute_python",
        "run_python",
        "python_interpreter",
        "code_interpreter",
        "execute_ipython_cell",
    }
)
_SHELL_KEYS = ("command", "cmd", "keystrokes", "script")
PLACEHOLDER = "\x00python\x00"


@dataclass(frozen=True)
class Piece:
    """One command or tool call of an action.

    Attributes:
        kind: "script" (module names are local), "file" or "edit" (module names are kept),
            or "other" (no Python; compared by `context` alone).
        code: the Python source ("" for "other").
        context: what must match exactly besides the code (tool name and arguments, or the
            command's words with the code replaced by a placeholder).
    """

    kind: str
    code: str
    context: str


def pieces(message: Any) -> list[Piece]:
    """The pieces of an assistant message, in order."""
    out: list[Piece] = []
    for call in message.tool_calls:
        out.extend(_tool_call_pieces(call))
    if not message.tool_calls:
        # what the terminal runs: pivot-gym's keystroke model (text typed without Enter runs nothing)
        for command in action_commands(message):
            out.extend(_shell_pieces(command))
    return out


def has_python(found: list[Piece]) -> bool:
    """True when any piece carries Python code."""
    return any(p.kind != "other" for p in found)


def _tool_call_pieces(call: Any) -> list[Piece]:
    args = call.parsed_arguments()
    if not isinstance(args, dict):
        return [Piece("other", "", json.dumps([call.name, call.arguments]))]
    if call.name not in _PYTHON_TOOLS:
        for key in _SHELL_KEYS:
            if isinstance(args.get(key), str) and set(args) <= {key, "timeout", "is_input", "security_risk"}:
                return _shell_pieces(args[key])
    code_key = next((k for k in _CODE_KEYS if isinstance(args.get(k), str)), None)
    path = next((args[k] for k in _PATH_KEYS if isinstance(args.get(k), str)), "")
    rest = json.dumps([call.name, {k: v for k, v in args.items() if k != code_key}], sort_keys=True)
    if code_key is None:
        return [Piece("other", "", rest)]
    if call.name in _PYTHON_TOOLS and not path:
        return [Piece("script", args[code_key], rest)]
    if path.endswith((".py", ".pyi")):
        kind = "edit" if code_key in ("new_str", "new_string") else "file"
        return [Piece(kind, args[code_key], rest)]
    return [Piece("other", "", json.dumps([call.name, args], sort_keys=True))]


def _shell_pieces(command: str) -> list[Piece]:
    """One command: heredoc bodies and `-c` arguments become Python pieces, the rest context."""
    command = command.strip()
    found: list[Piece] = []

    def take_heredoc(m: re.Match[str]) -> str:
        head = command[: m.start()].rsplit("\n", 1)[-1] + m.group(3)
        words = _words(head)
        if any(_PYTHON.match(w) for w in words):
            found.append(Piece("script", m.group(4), ""))
        elif any(w.endswith((".py", ".pyi")) for w in words):
            found.append(Piece("file", m.group(4), ""))
        else:
            return m.group(0)
        return f"<<{m.group(2)}{m.group(3)} {PLACEHOLDER}"

    rest = _HEREDOC.sub(take_heredoc, command)
    # the unquoted operators and redirections as bash reads them: shell words alone drop escapes, and
    # `echo hi \\> f` (which writes no file) would match `echo hi > f`
    skeleton = " ".join(scan_shell(rest).skeleton)
    words = _words(rest)
    for i, word in enumerate(words[:-1]):
        if _PYTHON.match(word):
            words[i] = "python"  # python, python3, /usr/bin/python3.11: the same interpreter here
            j = i + 1
            while j < len(words) - 1 and words[j].startswith("-") and words[j] != "-c":
                j += 1
            if words[j] == "-c" and j + 1 < len(words):
                found.append(Piece("script", words[j + 1], ""))
                words[j + 1] = PLACEHOLDER
    context = " ".join(words) + " \x00" + skeleton
    if not found:
        return [Piece("other", "", context)]
    return [Piece(p.kind, p.code, context) for p in found]


def _words(text: str) -> list[str]:
    """Shell words (quotes resolved, operators split off); plain whitespace split if unbalanced."""
    try:
        lex = shlex.shlex(text, posix=True, punctuation_chars=True)
        lex.whitespace_split = True
        return list(lex)
    except ValueError:
        return text.split()
