"""What an SWE action is aimed at: file paths, a line range (reads), symbols (edits), a submission.

Targets come from tool-call arguments (`path`, `view_range`, `old_str`, ...) and from shell
commands (path-like words, `sed -n 'A,Bp'`, `head -n N`, heredoc and redirect targets, the
`def`/`class` names in written text). Matching is lenient where agents legitimately differ:
paths match on equality or a suffix at a `/` boundary (`/testbed/pkg/a.py` == `pkg/a.py`), a
search scope also matches a scope inside it, and a line range or symbol only constrains when both
sides name one. What a command runs is `_runs`' business, what it may change `_effects`'. A
submission is judged by what it submits (`submission_form`): the expert's own command, up to
spellings git documents as the same (`--staged` is `--cached`, `add --all` is `add -A`).
"""

from __future__ import annotations

import functools
import re
import warnings
from dataclasses import dataclass, field

from rapidfuzz import fuzz

from pivot_core import SHELL_TOOLS, Message, ToolCall, message_commands, normalize_shell
from verifiers_plugins._memo import CACHE_SIZE, call_arguments
from verifiers_plugins.builtin._categories import command_category, first_line
from verifiers_plugins.builtin._effects import command_effects
from verifiers_plugins.builtin._runs import TestRun, command_runs, heredoc_body, runs_problem
from verifiers_plugins.builtin._shellwords import is_path, normalize_path, shell_segments
from verifiers_plugins.builtin._shellwords import words as shell_words

__all__ = ["Target", "TestRun", "extra_effects", "normalize_path", "shell_segments", "target_problem", "targets_of"]

_PATH_KEYS = ("path", "file_path", "file", "filename", "file_name", "dir", "directory", "target_file")
_PATTERN_FIRST = {"grep", "egrep", "fgrep", "rg", "ag", "ack"}  # their first positional is a pattern
_SYMBOL = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+(\w+)", re.MULTILINE)
_SED_LINES = re.compile(r"^(\d+)(?:,(\d+))?p$")
ANCHOR_MIN_SIMILARITY = 60  # rapidfuzz partial_ratio (0-100) between the replaced passages
PATTERN_MIN_SHARE = 0.6  # a search pattern inside the expert's (or around it) must be this share of its length
CONTENT_MIN_SIMILARITY = 60  # rapidfuzz ratio (0-100) between two texts written at the same place (mostly the same)


@dataclass(frozen=True)
class Target:
    """The aim of one action (empty fields mean "not stated")."""

    paths: tuple[str, ...] = ()
    lines: tuple[int, int] | None = None
    symbols: frozenset[str] = field(default_factory=frozenset)
    anchor: str = ""  # the text an edit replaces (old_str / search), when it names no symbol
    written: str = ""  # the text an edit writes (new_str / text / file_text)
    runs: tuple[TestRun, ...] = ()  # the programs a command runs (empty: none recognised)
    pattern: str = ""  # what a grep-like search looks for
    effects: frozenset[str] = frozenset()  # what a command may change (see `command_effects`)
    content: str = ""  # the whole text a write puts in a file (a heredoc's body, `create`'s file_text)
    submission: str = ""  # what a finishing command submits (`submission_form`), "" for other actions
    source: str = ""  # a whole file's text as written (indentation kept), bounded: Python must still compile


def patterns_match(want: str, got: str) -> bool:
    """The same search: equal patterns (case aside), or one inside the other and most of its length.

    `calculate_total` finds what `def calculate_total` finds (and a little more); `def` alone, or
    `def calculate_tax`, is another search however similar its letters.
    """
    a, b = want.strip().casefold(), got.strip().casefold()
    if a == b:
        return True
    short, long_ = sorted((a, b), key=len)
    return bool(short) and short in long_ and len(short) >= PATTERN_MIN_SHARE * len(long_)


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


@functools.lru_cache(maxsize=4096)
def command_target(command: str) -> Target:
    """Paths, sed/head line range and written symbols of a shell command."""
    line = first_line(command)
    paths: list[str] = []
    lines: tuple[int, int] | None = None
    pattern = anchor = written = ""
    for segment in shell_segments(line[:4000]):
        words = shell_words(segment)
        if not words or words[0] in ("cd", "echo", "printf", "export"):
            continue
        verb = words[0].rsplit("/", 1)[-1]
        positional = [w for w in words[1:] if not w.startswith("-")]
        if words[0].startswith("./") or verb.endswith(".py"):
            paths.append(words[0])  # `./tests/runtests.py X` names its script as `python3 tests/runtests.py X` does
        if verb in _PATTERN_FIRST and "-e" in words[:-1]:
            pattern = pattern or words[words.index("-e") + 1]
        elif verb in _PATTERN_FIRST and positional:
            pattern = pattern or positional[0]
            positional = positional[1:]
        if verb == "sed" and positional:
            m = _SED_LINES.match(positional[0].strip("'\""))
            if m:
                lines = (int(m.group(1)), int(m.group(2) or m.group(1)))
            in_place = any(w.startswith("-i") or w.startswith("--in-place") for w in words[1:])
            swap = sed_substitution(positional[0]) if in_place else None
            if swap:
                anchor, written = swap
            positional = positional[1:]
        if verb == "head":
            n = next((w for w in words if w.isdigit()), None) or next(
                (w[2:] for w in words if re.fullmatch(r"-n?\d+", w)), None
            )
            lines = (1, int(n.lstrip("n"))) if n and n.lstrip("n").isdigit() else lines
        paths.extend(p.split("::", 1)[0] for p in positional if is_path(p.split("::", 1)[0]))
    for m in re.finditer(r">>?\s*['\"]?([\w.\-/~]+)", line):  # redirect / heredoc write targets
        if is_path(m.group(1)) and m.group(1) not in paths:
            paths.append(m.group(1))
    body = command.split("\n", 1)[1] if "\n" in command else ""
    content = source = ""
    if re.search(r"<<-?\s*['\"]?\w+['\"]?", line) and ">" in line.replace("<<", ""):
        source = heredoc_body(command)[:_SOURCE_CHARS]
        content = _clip(source)  # `cat <<'EOF' > f`: the file becomes the body
    return Target(
        tuple(paths),
        lines,
        symbols_in(body),
        _clip(anchor)[:600],
        _clip(written)[:600],
        runs=command_runs(command),
        pattern=pattern,
        content=content,
        source=source,
        effects=command_effects(command),
        submission=submission_form(command) if command_category(command) == "finish" else "",
    )


def sed_substitution(expression: str) -> tuple[str, str] | None:
    """`(replaced, written)` of a sed `s/A/B/` expression (any delimiter, an address before it), else None."""
    m = re.match(r"^[\d,$]*s(.)", expression)
    if m is None or m.group(1).isalnum() or m.group(1) in " \\\n":
        return None
    delim = m.group(1)
    parts, current, i, rest = [], "", m.end(), expression
    while i < len(rest) and len(parts) < 2:
        c = rest[i]
        if c == "\\" and i + 1 < len(rest):
            current += rest[i : i + 2]
            i += 2
            continue
        if c == delim:
            parts.append(current)
            current = ""
        else:
            current += c
        i += 1
    return (parts[0], parts[1]) if len(parts) == 2 else None


_SOURCE_CHARS = 20_000  # a whole file compared by compiling it: bounded, so that scoring stays cheap


@functools.lru_cache(maxsize=512)
def compiles(source: str) -> bool:
    """Python source that compiles (parsed only, never run); any failure, a recursion limit included, is False."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarning for odd escapes is no error
        try:
            compile(source, "<written>", "exec", dont_inherit=True)
        except Exception:  # noqa: BLE001 - SyntaxError, ValueError (NUL), RecursionError, MemoryError: not Python
            return False
    return True


def _clip(text: str) -> str:
    """Whitespace collapsed, bounded (so that comparing two writes stays cheap)."""
    return " ".join(text.split())[:2000]


def call_target(call: ToolCall) -> Target:
    """Target of a tool call: shell tools by their command, others by their path/range/text arguments."""
    args = call_arguments(call)
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
    whole = args.get("file_text") if args.get("command") == "create" or "file_text" in args else None
    content = _clip(whole) if isinstance(whole, str) else ""
    source = whole[:_SOURCE_CHARS] if isinstance(whole, str) else ""
    clipped_anchor, clipped_written = " ".join(anchor.split())[:600], " ".join(written.split())[:600]
    return Target(paths, lines, symbols, clipped_anchor, clipped_written, content=content, source=source)


def action_targets(message: Message) -> list[Target]:
    """One target per action of a turn (tool calls, else fenced / Terminus commands)."""
    if message.tool_calls:
        return [call_target(c) for c in message.tool_calls]
    return [command_target(c) for c in message_commands(message)]


@functools.lru_cache(maxsize=CACHE_SIZE)
def targets_of(message: Message) -> tuple[Target, ...]:
    """`action_targets(message)`, once per distinct message (the expert's, or a candidate's for every SWE check)."""
    return tuple(action_targets(message))


def _added_words(target: Target) -> set[str]:
    return set(re.findall(r"\w+", target.written)) - set(re.findall(r"\w+", target.anchor))


def same_change(want: Target, got: Target) -> bool:
    """The replacement brings in (at least half of) the words the expert's brings in.

    Similarity of the whole written text says little for short edits (`return 0` and `return sum(xs)`
    are 73 % alike); the words an edit adds are what it changes.
    """
    added = _added_words(want)
    if not added:
        return fuzz.ratio(want.written, got.written) >= CONTENT_MIN_SIMILARITY  # a pure deletion: compare texts
    return len(added & _added_words(got)) >= 0.5 * len(added)


def effects_problem(want: Target, got: Target) -> str | None:
    """Why `got` does more than `want` (None when every state-changing command of `got` is one `want` runs too).

    `<expert command>; rm -rf /testbed/*` hits the expert's target and category, then does something else.
    """
    extra = got.effects - want.effects
    return f"also runs {sorted(extra)[:3]}, which the expert's action does not" if extra else None


def extra_effects(expert: Message, action: Message) -> str | None:
    """Why `action` changes more than `expert` does, action by action (None when it does not).

    The one check both SWE acceptors (`tool_name`, `swe_target`) apply after a category match.
    """
    want, got = targets_of(expert), targets_of(action)
    for i, g in enumerate(got):
        problem = effects_problem(want[i] if i < len(want) else Target(), g)
        if problem:
            return problem
    return None


_QUOTED_MARK = re.compile(r"""(['"])((?:COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT|MINI_SWE_AGENT_FINAL_OUTPUT)\w*)\1""")
_STAGED = re.compile(r"(?<=\s)--staged(?=[\s;&|]|$)")
_ADD_ALL = re.compile(r"\bgit add --all(?=[\s;&|]|$)")


def submission_form(command: str) -> str:
    """What a finishing command submits, in one spelling: two forms are equal only for the same patch.

    mini-swe-agent submits the output that follows its marker line (`echo MARK && git add -A &&
    git diff --cached`): the git diff form and pathspec are the submission. The form is the command
    after `normalize_shell`, with the marker unquoted and git's documented synonyms made one.
    """
    form = _QUOTED_MARK.sub(r"\2", normalize_shell(command))
    return _ADD_ALL.sub("git add -A", _STAGED.sub("--cached", form))


_WRITES = ("write ", "append to ", "read-write ")  # the keys of `hidden_writes` for redirections


def target_problem(want: Target, got: Target, category: str) -> str | None:
    """Why `got` misses `want` (None when it hits): writes and submissions, runs, else paths; then lines, symbols."""
    if category == "finish" and (want.submission or got.submission) and want.submission != got.submission:
        # `echo MARK` alone submits an empty patch, `git diff` without `--cached` misses new files,
        # `cat /tmp/patch.diff` submits whatever that file holds: what is submitted must be the expert's.
        return f"submits {got.submission[:120]!r}, not the expert's submission {want.submission[:120]!r}"
    missing = sorted(k for k in want.effects if k.startswith(_WRITES) and k not in got.effects)
    if missing:
        # `cat \> f <<EOF` names f and writes nothing: the expert's redirection is part of its effect
        return f"does not {missing[0]} as the expert's action does"
    if category == "run" and want.runs:
        # What is run, not just which file is named: `runtests.py forms` is not `runtests.py model_forms`.
        return runs_problem(want.runs, got.runs)
    if want.paths:
        if not got.paths:
            return f"expected a target among {list(want.paths)[:3]}, got none"
        scopes = category == "search"
        if not any(paths_match(w, g, scopes) for w in want.paths for g in got.paths):
            return f"expected a target among {list(want.paths)[:3]}, got {list(got.paths)[:3]}"
    if category == "search" and want.pattern and got.pattern and not patterns_match(want.pattern, got.pattern):
        return f"expected a search for {want.pattern!r}, got {got.pattern!r}"
    if category == "read" and want.lines and got.lines:
        if got.lines[1] < want.lines[0] or got.lines[0] > want.lines[1]:
            return f"expected lines overlapping {list(want.lines)}, got {list(got.lines)}"
    if category == "edit" and want.symbols and got.symbols and not want.symbols & got.symbols:
        return f"expected an edit of {sorted(want.symbols)}, got {sorted(got.symbols)}"
    if category == "edit" and want.anchor and not (want.symbols and got.symbols):
        # No symbol to compare: the replaced text must be (mostly) the same passage.
        if fuzz.partial_ratio(want.anchor, got.anchor) < ANCHOR_MIN_SIMILARITY:
            return "expected an edit of the same passage, got another"
    if category == "edit" and want.anchor and not same_change(want, got):
        # The same passage replaced by other text (`return 0` where the expert wrote `return sum(xs)`).
        return "expected the replaced passage to become the expert's text, got another change"
    if category == "edit" and want.source and any(p.endswith(".py") for p in want.paths):
        # whitespace-collapsed text compares alike with its indentation stripped: the file must still be Python
        if compiles(want.source) and not compiles(got.source):
            return "the written Python does not compile where the expert's does (indentation or syntax lost)"
    if category == "edit" and want.content and fuzz.ratio(want.content, got.content) < CONTENT_MIN_SIMILARITY:
        # A whole-file write is its text: the same path written empty (or with other text) is another edit.
        return "expected the file written with mostly the expert's text, got other text"
    if category == "edit" and want.written and not (want.paths or want.symbols or want.anchor):
        # Nothing names the place (a windowed editor's `insert` at the open file's cursor): compare what is written.
        if fuzz.partial_ratio(want.written, got.written) < ANCHOR_MIN_SIMILARITY:
            return "expected the same text written, got other text"
    return None
