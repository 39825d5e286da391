"""What an SWE action is aimed at: file paths, a line range (reads), symbols (edits).

Targets come from tool-call arguments (`path`, `view_range`, `old_str`, ...) and from shell
commands (path-like words, `sed -n 'A,Bp'`, `head -n N`, heredoc and redirect targets, the
`def`/`class` names in written text). Matching is lenient where agents legitimately differ:
paths match on equality or a suffix at a `/` boundary (`/testbed/pkg/a.py` == `pkg/a.py`), a
search scope also matches a scope inside it, and a line range or symbol only constrains when both
sides name one.
"""

from __future__ import annotations

import functools
import re
import shlex
from dataclasses import dataclass, field

from rapidfuzz import fuzz

from pivot_envs._actions import SHELL_TOOLS
from pivot_envs._model import Message, ToolCall
from verifiers_plugins.builtin._categories import first_line, message_commands

_PATH_KEYS = ("path", "file_path", "file", "filename", "file_name", "dir", "directory", "target_file")
_PATTERN_FIRST = {"grep", "egrep", "fgrep", "rg", "ag", "ack"}  # their first positional is a pattern
_PATHISH = re.compile(r"^[\w.\-/~]+$")
_EXT = re.compile(r"\.[A-Za-z0-9]{1,6}$")
_SYMBOL = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+(\w+)", re.MULTILINE)
_SED_LINES = re.compile(r"^(\d+)(?:,(\d+))?p$")
_ROOTS = ("/testbed/", "/workspace/", "/repo/")
ANCHOR_MIN_SIMILARITY = 60  # rapidfuzz partial_ratio (0-100) between the replaced passages


@dataclass(frozen=True)
class Target:
    """The aim of one action (empty fields mean "not stated")."""

    paths: tuple[str, ...] = ()
    lines: tuple[int, int] | None = None
    symbols: frozenset[str] = field(default_factory=frozenset)
    anchor: str = ""  # the text an edit replaces (old_str / search), when it names no symbol
    written: str = ""  # the text an edit writes (new_str / text / file_text)


def normalize_path(path: str) -> str:
    """Strip quotes, `./`, well-known sandbox roots and trailing slashes."""
    p = path.strip().strip("'\"")
    for root in _ROOTS:
        if p.startswith(root):
            p = p[len(root) :]
    while p.startswith("./"):
        p = p[2:]
    return p.rstrip("/") or "."


def paths_match(a: str, b: str, scopes: bool = False) -> bool:
    """Equal, or one a suffix of the other at a `/` boundary; with `scopes`, one inside the other."""
    a, b = normalize_path(a), normalize_path(b)
    if a == b:
        return True
    if a == "." or b == ".":
        return scopes
    short, long_ = sorted((a.lstrip("/"), b.lstrip("/")), key=len)
    if long_.endswith("/" + short) or long_ == short:
        return True
    return scopes and (long_.startswith(short + "/") or a.startswith(b + "/") or b.startswith(a + "/"))


def symbols_in(text: str | None) -> frozenset[str]:
    """Names of the functions and classes defined in a text."""
    return frozenset(_SYMBOL.findall(text or ""))


def _words(segment: str) -> list[str]:
    segment = segment[:4000]  # bounded: a pasted script on one line must not make scoring quadratic
    try:
        return shlex.split(segment, posix=True)
    except ValueError:
        return segment.split()


def _is_path(word: str) -> bool:
    return (
        bool(_PATHISH.match(word))
        and not word.startswith("-")
        and ("/" in word or bool(_EXT.search(word)) or word in (".", ".."))
    )


@functools.lru_cache(maxsize=4096)
def command_target(command: str) -> Target:
    """Paths, sed/head line range and written symbols of a shell command."""
    line = first_line(command)
    paths: list[str] = []
    lines: tuple[int, int] | None = None
    for segment in re.split(r"\s*(?:&&|\|\||;|\|)\s*", line):
        words = _words(segment)
        if not words or words[0] in ("cd", "echo", "printf", "export"):
            continue
        verb = words[0].rsplit("/", 1)[-1]
        positional = [w for w in words[1:] if not w.startswith("-")]
        if verb in _PATTERN_FIRST and positional and "-e" not in words:
            positional = positional[1:]
        if verb == "sed" and positional:
            m = _SED_LINES.match(positional[0].strip("'\""))
            if m:
                lines = (int(m.group(1)), int(m.group(2) or m.group(1)))
            positional = positional[1:]
        if verb == "head":
            n = next((w for w in words if w.isdigit()), None) or next(
                (w[2:] for w in words if re.fullmatch(r"-n?\d+", w)), None
            )
            lines = (1, int(n.lstrip("n"))) if n and n.lstrip("n").isdigit() else lines
        paths.extend(p.split("::", 1)[0] for p in positional if _is_path(p.split("::", 1)[0]))
    for m in re.finditer(r">>?\s*['\"]?([\w.\-/~]+)", line):  # redirect / heredoc write targets
        if _is_path(m.group(1)) and m.group(1) not in paths:
            paths.append(m.group(1))
    body = command.split("\n", 1)[1] if "\n" in command else ""
    return Target(tuple(paths), lines, symbols_in(body))


def call_target(call: ToolCall) -> Target:
    """Target of a tool call: shell tools by their command, others by their path/range/text arguments."""
    args = call.parsed_arguments()
    args = args if isinstance(args, dict) else {}
    cmd = args.get("command", args.get("cmd"))
    if call.name.lower() in SHELL_TOOLS or call.name.lower() in ("bash", "shell"):
        if isinstance(cmd, list):
            cmd = " ".join(str(c) for c in cmd)
        return command_target(cmd) if isinstance(cmd, str) else Target()
    paths = tuple(str(args[k]) for k in _PATH_KEYS if isinstance(args.get(k), str) and args[k].strip())
    lines = None
    rng = args.get("view_range")
    if isinstance(rng, list) and len(rng) == 2 and all(isinstance(x, int) for x in rng):
        end = rng[1] if rng[1] > 0 else 10**9  # `-1` reads to the end of the file
        lines = (rng[0], end)
    for key in ("insert_line", "line_number", "line"):
        if isinstance(args.get(key), int):
            lines = (args[key], args[key])
    texts = [args.get(k) for k in ("old_str", "new_str", "file_text", "text", "content", "replace", "search")]
    old = symbols_in(args.get("old_str") if isinstance(args.get("old_str"), str) else None)
    symbols = old or frozenset().union(*(symbols_in(t) for t in texts if isinstance(t, str)))
    anchor = next((args[k] for k in ("old_str", "search") if isinstance(args.get(k), str)), "")
    written = next(
        (args[k] for k in ("new_str", "text", "file_text", "content", "replace") if isinstance(args.get(k), str)), ""
    )
    return Target(paths, lines, symbols, " ".join(anchor.split())[:600], " ".join(written.split())[:600])


def action_targets(message: Message) -> list[Target]:
    """One target per action of a turn (tool calls, else fenced / Terminus commands)."""
    if message.tool_calls:
        return [call_target(c) for c in message.tool_calls]
    return [command_target(c) for c in message_commands(message)]


def target_problem(want: Target, got: Target, category: str) -> str | None:
    """Why `got` misses `want` (None when it hits): paths, then lines for reads, symbols for edits."""
    if want.paths:
        if not got.paths:
            return f"expected a target among {list(want.paths)[:3]}, got none"
        scopes = category == "search"
        if not any(paths_match(w, g, scopes) for w in want.paths for g in got.paths):
            return f"expected a target among {list(want.paths)[:3]}, got {list(got.paths)[:3]}"
    if category == "read" and want.lines and got.lines:
        if got.lines[1] < want.lines[0] or got.lines[0] > want.lines[1]:
            return f"expected lines overlapping {list(want.lines)}, got {list(got.lines)}"
    if category == "edit" and want.symbols and got.symbols and not want.symbols & got.symbols:
        return f"expected an edit of {sorted(want.symbols)}, got {sorted(got.symbols)}"
    if category == "edit" and want.anchor and not (want.symbols and got.symbols):
        # No symbol to compare: the replaced text must be (mostly) the same passage.
        if fuzz.partial_ratio(want.anchor, got.anchor) < ANCHOR_MIN_SIMILARITY:
            return "expected an edit of the same passage, got another"
    if category == "edit" and want.written and not (want.paths or want.symbols or want.anchor):
        # Nothing names the place (a windowed editor's `insert` at the open file's cursor): compare what is written.
        if fuzz.partial_ratio(want.written, got.written) < ANCHOR_MIN_SIMILARITY:
            return "expected the same text written, got other text"
    return None
