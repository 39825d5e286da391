r"""`string_similarity` acceptor: normalised similarity of text turns, shell commands and Terminus keystrokes.

Shell actions are compared command by command, not as one string: a candidate is similar only when
it runs as many simple commands (split at `;`, `&&`, `||`, `|`, `&` and newlines) as the expert,
each with the same program and a similar command line. A whole-string ratio would accept
`<expert>; rm -rf /app/*` (0.86 against the expert alone), and a pivot with no sandbox has nothing
else to catch it. Quoting and escapes are read, not dropped: the candidate must have the expert's
unquoted operators, redirections, substitutions and expansions, and its heredocs the expert's
indentation (`scan_shell(...).skeleton`), so `echo hi \> f` (which writes no file) is not
`echo hi > f`. A Terminus turn is compared by what its terminal runs: keystrokes without a final
Enter are typed, not run, and text left at the prompt must be the expert's.
"""

from __future__ import annotations

import functools
import re
import shlex
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from rapidfuzz import fuzz

from pivot_core import Message, Pivot, action_text, normalize_text, scan_shell, typed_action
from verifiers_plugins._memo import CACHE_SIZE
from verifiers_plugins._verdict import Verdict
from verifiers_plugins.builtin._shellwords import is_path, normalize_path
from verifiers_plugins.hookspecs import hookimpl

_QUOTES = re.compile(r"[\"'`]")
_DIGIT_TOKEN = re.compile(r"[\w\-.:/@#+$]*\d[\w\-.:/@#+]*")


class StringSimilarity:
    """Accepts when the normalised similarity (rapidfuzz ratio, 0-1) reaches `threshold`.

    Args:
        threshold: acceptance threshold in [0, 1].
    """

    role = "acceptor"
    cost = "cheap"
    deterministic = True
    # 2: shell actions compared command by command; 3: the files they name exactly; 4: quoting,
    # escapes and heredoc indentation kept (the skeleton), keystrokes compared by what runs; 5: blanks
    # around control operators made one in the compared text; 6: an unquoted heredoc's substitutions
    version = "6"

    def __init__(self, threshold: float = 0.85) -> None:
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"string_similarity: expected threshold in [0, 1], got {threshold!r}")
        self.threshold = threshold

    def verify(self, pivot: Pivot, action: Message) -> Verdict:
        """Compare the comparable text of expert and candidate."""
        if pivot.expert.tool_calls:
            return _EXPERT_CALLED
        expert = _expert_form(pivot.expert)
        typed = typed_action(action)
        commands = list(typed.commands) if not action.tool_calls else []  # derived once, for both checks
        if typed.pending != expert.pending:
            return Verdict.reject(f"leaves {typed.pending[-80:]!r} typed at the prompt, not run (no Enter)")
        if expert.commands is not None:
            mismatch = command_mismatch(expert.commands, commands) or skeleton_mismatch(expert.skeleton, commands)
            if mismatch:
                return Verdict.reject(mismatch)
        want, got = expert.text, normalize_text(action_text(action, commands))
        if not got:
            return _EMPTY
        if not want:
            return _NO_EXPERT_TEXT
        score = fuzz.ratio(want, got) / 100.0
        details = {"similarity": round(score, 4), "threshold": self.threshold}
        if score >= self.threshold:
            return Verdict.accept(f"similarity {score:.2f} >= {self.threshold}", **details)
        return Verdict.reject(f"similarity {score:.2f} < {self.threshold}", **details)


_EXPERT_CALLED = Verdict.skip("expert called a tool: compared by tool_args")
_EMPTY = Verdict.reject("empty completion")
_NO_EXPERT_TEXT = Verdict.reject("expert turn has no comparable text")
_OPERATORS = frozenset({";", "&&", "||", "|", "&", "|&", ";;", "\n"})


@dataclass(frozen=True)
class _ExpertForm:
    """What the comparison needs of the expert turn: its simple commands (None: it runs none) and normalised text."""

    commands: list[list[str]] | None
    text: str
    skeleton: tuple[str, ...] = ()
    pending: str = ""


@functools.lru_cache(maxsize=CACHE_SIZE)
def _expert_form(expert: Message) -> _ExpertForm:
    typed = typed_action(expert)
    actions = list(typed.commands)
    commands = simple_commands(actions) if actions else None
    text = normalize_text(action_text(expert, actions))
    return _ExpertForm(commands if actions else None, text, skeleton_of(actions), typed.pending)


# `;`, `&&` and a line end all run the next command after this one: one kind of step here
_SEQUENCE = frozenset({";", "&&", ";;"})


def skeleton_of(commands: list[str]) -> tuple[str, ...]:
    """The unquoted shell syntax of commands, in order (`scan_shell`), with sequencing operators made one."""
    out: list[str] = []
    for command in commands:
        for token in (*scan_shell(command).skeleton, ";"):
            token = ";" if token in _SEQUENCE else token
            if not (token == ";" and (not out or out[-1] == ";")):
                out.append(token)
    return tuple(out[:-1] if out and out[-1] == ";" else out)


def skeleton_mismatch(want: tuple[str, ...], candidate: list[str]) -> str | None:
    """Why the candidate's shell syntax is not the expert's (quoting or escaping that changes meaning), or None."""
    got = skeleton_of(candidate)
    if got == want:
        return None
    extra = [t for t in got if t not in want] or [t for t in want if t not in got] or list(got[:3])
    return f"its quoting or operators differ from the expert's ({' '.join(want[:8])!r} vs {' '.join(got[:8])!r})" + (
        f": {extra[0]!r}" if extra else ""
    )


def simple_commands(actions: list[str]) -> list[list[str]] | None:
    """The simple commands of shell actions as word lists, split at control operators; None if unparseable."""
    out: list[list[str]] = []
    for action in actions:
        current: list[str] = []
        try:
            for token in shell_tokens(action.replace("\\\n", " ")):
                if token in _OPERATORS:
                    if current:
                        out.append(current)
                    current = []
                else:
                    current.append(token)
        except ValueError:  # unbalanced quotes: not a command line shlex can read
            return None
        if current:
            out.append(current)
    return out


# What shlex (posix, punctuation `;&|`, whitespace " \t\r") reads from an ASCII line with no quote,
# backslash or `#`: a run of its word characters (letters, digits and `_~-./*?=`), a run of
# punctuation, or any other character alone (`$`, `>`, `(`, a newline); whitespace separates.
_PLAIN_TOKEN = re.compile(r"[A-Za-z0-9_~\-./*?=]+|[;&|]+|[^ \t\r]")
_SHLEX_SPECIAL = re.compile(r"['\"\\#]")


def shell_tokens(line: str) -> list[str]:
    """The tokens shlex reads from a command line, newlines kept as tokens (they separate commands).

    A line without quoting, escapes or comments (most commands) is split by one regex pass that
    gives shlex's tokens exactly (`tests/verifiers_plugins/test_scan_fast_paths.py` compares them);
    any other line goes to shlex itself, character by character in Python.

    Raises:
        ValueError: unbalanced quotes (shlex's error).
    """
    if line.isascii() and not _SHLEX_SPECIAL.search(line):
        return _PLAIN_TOKEN.findall(line)
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lexer.whitespace = " \t\r"  # newlines separate commands
    tokens = []
    while (token := lexer.get_token()) != lexer.eof:
        tokens.append(token)
    return tokens


def command_mismatch(want: list[list[str]] | None, candidate: list[str]) -> str | None:
    """Why the candidate's commands cannot be a rewording of the expert's simple commands, or None when they may be."""
    got = simple_commands(candidate)
    if want is None:
        return None  # an expert line shlex cannot read: only the whole-string comparison is left
    if got is None:
        return "the candidate's command line cannot be parsed (unbalanced quotes)"
    if len(want) != len(got):
        return f"runs {len(got)} simple command(s) where the expert runs {len(want)}"
    for w, g in zip(want, got, strict=True):
        if w[:1] != g[:1]:
            return f"runs {g[0] if g else '(nothing)'!r} where the expert runs {w[0] if w else '(nothing)'!r}"
        if _files(w) != _files(g):
            # `open zz_chall.py` is 90 % like `open chall.py` and opens nothing: the files a command names are exact.
            return f"{g[0]!r} on {sorted(_files(g))[:3]} where the expert's is on {sorted(_files(w))[:3]}"
    return None


def _files(words: list[str]) -> Counter[str]:
    """The file paths a simple command names (`./a.py` is `a.py`), as a multiset."""
    return Counter(normalize_path(x) for x in words[1:] if is_path(x))


@hookimpl
def register_verifiers(register: Callable[..., None]) -> None:
    """Register `string_similarity`."""
    register("string_similarity", StringSimilarity)
