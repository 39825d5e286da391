"""What an SWE action is aimed at: file paths, a line range (reads), symbols (edits).

Targets come from tool-call arguments (`path`, `view_range`, `old_str`, ...) and from shell
commands (path-like words, `sed -n 'A,Bp'`, `head -n N`, heredoc and redirect targets, the
`def`/`class` names in written text). Matching is lenient where agents legitimately differ:
paths match on equality or a suffix at a `/` boundary (`/testbed/pkg/a.py` == `pkg/a.py`), a
search scope also matches a scope inside it, and a line range or symbol only constrains when both
sides name one.

A command that runs a program (`TestRun`) is compared by what it runs: the program (a script
path resolved against any `cd`, or the runner module: `python3 -m pytest` is `pytest`) and the
tests it selects (labels, node ids, `-k`/`-m` expressions), so `./tests/runtests.py X`,
`python3 tests/runtests.py X` and `cd tests && ./runtests.py X` are one run and `... Y` another.
Options that change only how results print (`-v`, `--verbosity 2`, `-q`, `--tb=short`) are ignored.
"""

from __future__ import annotations

import functools
import posixpath
import re
import shlex
from dataclasses import dataclass, field

from rapidfuzz import fuzz

from pivot_core import SHELL_TOOLS, Message, ToolCall, message_commands
from verifiers_plugins._memo import call_arguments, per_candidate
from verifiers_plugins.builtin._categories import command_category, command_verb, first_line, strip_prefixes

_PATH_KEYS = ("path", "file_path", "file", "filename", "file_name", "dir", "directory", "target_file")
_PATTERN_FIRST = {"grep", "egrep", "fgrep", "rg", "ag", "ack"}  # their first positional is a pattern
_PATHISH = re.compile(r"^[\w.\-/~]+$")
_EXT = re.compile(r"\.[A-Za-z0-9]{1,6}$")
_SYMBOL = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+(\w+)", re.MULTILINE)
_SED_LINES = re.compile(r"^(\d+)(?:,(\d+))?p$")
_ROOTS = ("/testbed/", "/workspace/", "/repo/")
ANCHOR_MIN_SIMILARITY = 60  # rapidfuzz partial_ratio (0-100) between the replaced passages


_RUNNER_MODULES = {"pytest": "pytest", "py.test": "pytest", "unittest": "unittest", "nose": "nosetests"}
# Options whose next word is their value; the selecting ones are part of what a run is.
_VALUE_OPTIONS = frozenset(
    "-k -m -n -p -c -o -W -r --tb --rootdir --maxfail --deselect --ignore --settings --parallel "
    "--verbosity --durations --timeout --junitxml --log-level --cov --basetemp --pythonpath".split()
)
_SELECT_OPTIONS = frozenset({"-k", "-m", "--deselect", "--ignore"})
PATTERN_MIN_SHARE = 0.6  # a search pattern inside the expert's (or around it) must be this share of its length
CODE_MIN_SIMILARITY = 70  # rapidfuzz ratio (0-100) between two inline programs (`python -c`, heredoc)
CONTENT_MIN_SIMILARITY = 60  # rapidfuzz ratio (0-100) between two texts written at the same place (mostly the same)


@dataclass(frozen=True)
class TestRun:
    """One program a command runs: what it is and what it selects.

    Attributes:
        program: a script path (relative to the repository root), `pytest`, `unittest`, `-m MODULE`,
            or `python -c` / `python -` for inline code.
        selection: the tests or arguments it is given (paths resolved, `-k=EXPR`), order ignored.
        code: the inline program (`python -c CODE`, a heredoc on stdin), whitespace collapsed.
    """

    __test__ = False  # not a pytest test class, whatever its name

    program: str
    selection: frozenset[str] = frozenset()
    code: str = ""

    def same_as(self, other: TestRun) -> bool:
        """The same run: program and selection equal; inline code similar enough."""
        if self.program != other.program or self.selection != other.selection:
            return False
        return self.code == other.code or fuzz.ratio(self.code, other.code) >= CODE_MIN_SIMILARITY


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


def normalize_path(path: str) -> str:
    """Strip quotes, `./`, well-known sandbox roots and trailing slashes."""
    p = path.strip().strip("'\"")
    for root in _ROOTS:
        if p.startswith(root):
            p = p[len(root) :]
    while p.startswith("./"):
        p = p[2:]
    return p.rstrip("/") or "."


def _join(cwd: str, path: str) -> str:
    """`path` as seen from the repository root when the command runs in `cwd`."""
    p = path.strip().strip("'\"")
    if p.startswith("/"):
        return normalize_path(p + ("/" if p.rstrip("/") + "/" in _ROOTS else ""))
    return normalize_path(posixpath.normpath(posixpath.join(cwd, p)))


def _is_test_runner(program: str) -> bool:
    """`pytest`, `unittest`, or a script named like a test runner (`tests/runtests.py`, `bin/test`)."""
    return program in _RUNNER_MODULES.values() or "test" in program.rsplit("/", 1)[-1]


def _run(program: str, args: list[str], cwd: str) -> TestRun:
    """A run of `program`: a test runner's options that only change its report are left out, a script's are kept."""
    if _is_test_runner(program):
        return TestRun(program, _selection(args, cwd))
    return TestRun(program, _selection(args, cwd) | {w for w in args if w.startswith("-") and ">" not in w})


def _selection(args: list[str], cwd: str) -> frozenset[str]:
    """What the arguments select: path-like words resolved against `cwd`, labels, `-k`/`-m` expressions."""
    out: set[str] = set()
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if word in (">", ">>", "<", "1>", "2>", "2>>", "&>"):
            i += 1  # `> out.txt`: the redirect and its file are not arguments
            continue
        if ">" in word or "<" in word:
            continue  # `2>&1`, `>out.txt`
        if word.startswith("-"):
            name, eq, value = word.partition("=")
            if not eq and name in _VALUE_OPTIONS and i < len(args):
                value, i = args[i], i + 1
            elif not eq and i < len(args) and args[i].isdigit():
                i += 1  # `-v 2` (Django's runtests): a number after an option is its value
            if name in _SELECT_OPTIONS:
                out.add(f"{name}={' '.join(value.split())}")
            continue
        path, sep, rest = word.partition("::")
        out.add(_join(cwd, path) + sep + rest if "/" in path or path.endswith(".py") or sep else word)
    return frozenset(out)


def _python_run(args: list[str], cwd: str, body: str) -> TestRun | None:
    """The run of `python ARGS`: a module (`-m`), inline code (`-c`, stdin) or a script."""
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] not in ("-m", "-c", "-"):
        i += 2 if args[i] in ("-W", "-X") else 1  # interpreter options
    if i >= len(args) or args[i] == "-":
        return TestRun("python -", code=" ".join(body.split()))
    if args[i] == "-m" and i + 1 < len(args):
        module = args[i + 1]
        return _run(_RUNNER_MODULES.get(module, f"-m {module}"), args[i + 2 :], cwd)
    if args[i] == "-c" and i + 1 < len(args):
        return TestRun("python -c", code=" ".join(args[i + 1].split()))
    if ">" in args[i] or "<" in args[i]:
        return TestRun("python -", code=" ".join(body.split()))
    return _run(_join(cwd, args[i]), args[i + 1 :], cwd)


# A quoted string (to its close, or to the end when it never closes; `\` escapes inside double
# quotes only), an escaped character, a separator (`&&`, `||`, `;`, `|`, newline), or a run of
# anything else (a lone `&`, as in `2>&1` or a background job, does not split).
_SHELL_TOKEN = re.compile(r"""'[^']*'?|"(?:\\[\s\S]|[^"\\])*"?|\\[\s\S]?|&&|\|\||[;|\n]|[^'"\\;|\n&]+|&""")
_SEPARATORS = frozenset({"&&", "||", ";", "|", "\n"})


def shell_segments(line: str) -> list[str]:
    """The simple commands of a line (or lines), split at `&&`, `||`, `;`, `|` and newlines outside quotes."""
    out, current = [], []
    for token in _SHELL_TOKEN.findall(line):  # one regex pass: a loop over characters cost 4x as much
        if token in _SEPARATORS:
            out.append("".join(current))
            current = []
        else:
            current.append(token)
    out.append("".join(current))
    return [seg.strip() for seg in out if seg.strip()]


_HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?")
_HARMLESS = frozenset({"cd", "pushd", "popd", "echo", "printf", "true", "pwd", "sleep", "export", "set", "clear"})


def command_effects(command: str) -> frozenset[str]:
    """What a command may change: one key per simple command that is not a read or a search.

    Every line counts (heredoc bodies are text, not commands), so `rm -rf /testbed` on a second
    line and `python x.py && rm -rf ~` show a command the expert's lacks. A key is the verb and the
    words it acts on (`rm reproduce.py` is not `rm ~`), `git <sub> ...` for git, and "run" for a run
    (which programs run is `runs`' business). A heredoc that never meets its terminator
    (`EOF; rm -rf ./*` is not `EOF`) swallows the rest of the command: that is an effect of its own.
    """
    lines, skip = [], ""
    for line in command[:20000].split("\n"):
        if skip:
            skip = "" if line.strip() == skip else skip
            continue
        lines.append(line)
        m = _HEREDOC.search(line)
        skip = m.group(1) if m else ""
    out = {f"unterminated heredoc {skip}"} if skip else set()
    for segment in shell_segments("\n".join(lines)):
        if segment.lstrip().startswith("#"):
            continue
        category, verb = command_category(segment), command_verb(segment)
        if category in ("read", "search") or (verb in _HARMLESS and category != "edit"):
            continue
        if category == "run":
            out.add("run")
            continue
        words = strip_prefixes(_words(segment))
        operands = [w for w in words[1:] if not w.startswith("-") and w not in ("<", "<<")]
        if verb == "sed" and operands:
            operands = operands[1:]  # the script, compared by anchor and written text
        out.add(" ".join([verb or words[0] if words else segment, *sorted(normalize_path(w) for w in operands)]))
    return frozenset(out)


def _heredoc_body(command: str) -> str:
    """The lines after the first, without a closing heredoc word (`EOF`)."""
    lines = command.split("\n")[1:]
    if lines and re.fullmatch(r"\s*[A-Za-z_]+\s*", lines[-1]):
        lines = lines[:-1]
    return "\n".join(lines)


def command_runs(command: str) -> tuple[TestRun, ...]:
    """The programs the first line of a command runs, with `cd` followed (empty when none is recognised)."""
    body = _heredoc_body(command)
    cwd = "."
    runs: list[TestRun] = []
    for segment in shell_segments(first_line(command)[:4000]):
        words = strip_prefixes(_words(segment))
        if not words:
            continue
        verb = words[0].rsplit("/", 1)[-1]
        if verb == "cd":
            cwd = _join(cwd, words[1]) if len(words) > 1 else "."
        elif re.fullmatch(r"python[\d.]*", verb):
            run = _python_run(words[1:], cwd, body)
            if run is not None:
                runs.append(run)
        elif verb in _RUNNER_MODULES:
            runs.append(_run(_RUNNER_MODULES[verb], words[1:], cwd))
        elif words[0].startswith(("./", "bin/")) or verb.endswith(".py"):
            runs.append(_run(_join(cwd, words[0]), words[1:], cwd))
    return tuple(runs)


def runs_problem(want: tuple[TestRun, ...], got: tuple[TestRun, ...]) -> str | None:
    """Why the candidate's runs are not the expert's (None when they pair up one to one)."""
    left = list(got)
    for run in want:
        match = next((g for g in left if run.same_as(g)), None)
        if match is None:
            what = sorted(run.selection)[:3]
            return f"expected a run of {run.program}{' ' + str(what) if what else ''}, got another run"
        left.remove(match)
    return "runs more programs than the expert" if left else None


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


def _words(segment: str) -> list[str]:
    segment = segment[:4000]  # bounded: a pasted script on one line must not make scoring quadratic
    try:
        return shlex.split(segment, posix=True)
    except ValueError:
        return segment.split()


def is_path(word: str) -> bool:
    """A word that names a file or folder (`pkg/a.py`, `setup.cfg`, `.`), not an option or a pattern."""
    return _is_path(word)


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
    pattern = anchor = written = ""
    for segment in shell_segments(line[:4000]):
        words = _words(segment)
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
            swap = sed_substitution(positional[0]) if any(w.startswith("-i") for w in words[1:]) else None
            if swap:
                anchor, written = swap
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
    content = ""
    if re.search(r"<<-?\s*['\"]?\w+['\"]?", line) and ">" in line.replace("<<", ""):
        content = _clip(_heredoc_body(command))  # `cat <<'EOF' > f`: the file becomes the body
    return Target(
        tuple(paths),
        lines,
        symbols_in(body),
        _clip(anchor)[:600],
        _clip(written)[:600],
        runs=command_runs(command),
        pattern=pattern,
        content=content,
        effects=command_effects(command),
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
    return Target(
        paths, lines, symbols, " ".join(anchor.split())[:600], " ".join(written.split())[:600], content=content
    )


def action_targets(message: Message) -> list[Target]:
    """One target per action of a turn (tool calls, else fenced / Terminus commands)."""
    if message.tool_calls:
        return [call_target(c) for c in message.tool_calls]
    return [command_target(c) for c in message_commands(message)]


@per_candidate
def targets_of(message: Message) -> tuple[Target, ...]:
    """`action_targets(message)`, once per message object (the expert's, or a candidate's for every SWE check)."""
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


def rider_problem(expert: Message, action: Message) -> str | None:
    """A state-changing command riding along after the expert's own, action by action (None when there is none).

    An action's category is its first command's, so `<expert>; rm -rf /testbed/*` is in the expert's
    category. A candidate action with more simple commands than the expert's whose commands change
    something the expert's do not is not the same action, whatever its category.
    """
    if expert.tool_calls or action.tool_calls:
        return None
    want, got = _command_facts(expert), message_commands(action)
    for i, command in enumerate(got):
        segments, effects = want[i] if i < len(want) else (0, frozenset())
        if len(shell_segments(command)) > segments:
            extra = command_effects(command) - effects
            if extra:
                return f"also runs {sorted(extra)[:3]}, which the expert's action does not"
    return None


@per_candidate
def _command_facts(message: Message) -> tuple[tuple[int, frozenset[str]], ...]:
    """(number of simple commands, effects) of each text-form command of a turn (the expert's, in `rider_problem`)."""
    return tuple((len(shell_segments(c)), command_effects(c)) for c in message_commands(message))


def target_problem(want: Target, got: Target, category: str) -> str | None:
    """Why `got` misses `want` (None when it hits): runs, else paths; then lines for reads, symbols for edits."""
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
    if category == "edit" and want.content and fuzz.ratio(want.content, got.content) < CONTENT_MIN_SIMILARITY:
        # A whole-file write is its text: the same path written empty (or with other text) is another edit.
        return "expected the file written with mostly the expert's text, got other text"
    if category == "edit" and want.written and not (want.paths or want.symbols or want.anchor):
        # Nothing names the place (a windowed editor's `insert` at the open file's cursor): compare what is written.
        if fuzz.partial_ratio(want.written, got.written) < ANCHOR_MIN_SIMILARITY:
            return "expected the same text written, got other text"
    return None
