"""Words, paths and simple commands of SWE shell actions: the vocabulary `_targets`, `_runs` and `_effects` share."""

from __future__ import annotations

import posixpath
import re
import shlex

_PATHISH = re.compile(r"^[\w.\-/~]+$")
_EXT = re.compile(r"\.[A-Za-z0-9]{1,6}$")
_ROOTS = ("/testbed/", "/workspace/", "/repo/")


def normalize_path(path: str) -> str:
    """Strip quotes, `./`, well-known sandbox roots and trailing slashes."""
    p = path.strip().strip("'\"")
    for root in _ROOTS:
        if p.startswith(root):
            p = p[len(root) :]
    while p.startswith("./"):
        p = p[2:]
    return p.rstrip("/") or "."


def join_path(cwd: str, path: str) -> str:
    """`path` as seen from the repository root when the command runs in `cwd`."""
    p = path.strip().strip("'\"")
    if p.startswith("/"):
        return normalize_path(p + ("/" if p.rstrip("/") + "/" in _ROOTS else ""))
    return normalize_path(posixpath.normpath(posixpath.join(cwd, p)))


# A quoted string (to its close, or to the end when it never closes; `\` escapes inside double
# quotes only), an escaped character, a separator (`&&`, `||`, `;`, `|`, newline), a lone `&`, or a
# run of anything else. A lone `&` ends a background job (a command of its own) unless it belongs to
# a redirection (`2>&1`, `<&3`, `&>file`) or to `|&`.
_SHELL_TOKEN = re.compile(r"""'[^']*'?|"(?:\\[\s\S]|[^"\\])*"?|\\[\s\S]?|&&|\|\||[;|\n]|[^'"\\;|\n&]+|&""")
_SEPARATORS = frozenset({"&&", "||", ";", "|", "\n"})


def shell_segments(line: str) -> list[str]:
    """The simple commands of a line (or lines), split at `&&`, `||`, `;`, `|`, `&` and newlines outside quotes."""
    out, current = [], []
    tokens = _SHELL_TOKEN.findall(line)  # one regex pass: a loop over characters cost 4x as much
    for i, token in enumerate(tokens):
        if token == "&" and i and tokens[i - 1] == "|":
            continue  # `|&` pipes stderr as well: still one pipe
        if token in _SEPARATORS or (token == "&" and _is_background(tokens, i)):
            out.append("".join(current))
            current = []
        else:
            current.append(token)
    out.append("".join(current))
    return [seg.strip() for seg in out if seg.strip()]


def _is_background(tokens: list[str], i: int) -> bool:
    before = tokens[i - 1] if i else ""
    after = tokens[i + 1] if i + 1 < len(tokens) else ""
    return not (before.endswith((">", "<")) or after.startswith(">"))


def words(segment: str) -> list[str]:
    """The shell words of one simple command (whitespace-split when its quotes do not balance)."""
    segment = segment[:4000]  # bounded: a pasted script on one line must not make scoring quadratic
    try:
        return shlex.split(segment, posix=True)
    except ValueError:
        return segment.split()


def is_path(word: str) -> bool:
    """A word that names a file or folder (`pkg/a.py`, `setup.cfg`, `.`), not an option or a pattern."""
    return (
        bool(_PATHISH.match(word))
        and not word.startswith("-")
        and ("/" in word or bool(_EXT.search(word)) or word in (".", ".."))
    )
