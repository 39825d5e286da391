r"""A conservative reader of shell text: what bash would see, without running it.

`scan_shell` reads a command line (or script) once and reports what comparisons and the
keystroke model need: a canonical text that provably means the same (blank runs outside quotes
and heredoc bodies collapsed, a double-quoted literal written single-quoted, surrounding blanks
dropped), whether bash would run the text now or wait for more (an open quote, substitution,
heredoc, compound command, trailing `&&`/`|` or `\` continuation), the unquoted operators and
expansions in order (its skeleton), the redirections with their targets, and the substitutions.

`typed_commands` models a terminal (tmux + interactive bash): keystrokes accumulate at the
prompt; only a newline (or the Enter key) submits, and bash runs each complete command as soon
as its last line is submitted. Where the reader is unsure it errs towards "incomplete": text
that waits is never run, and a canonical form is only given for text it fully understood.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

MAX_NESTING = 50  # substitutions inside substitutions read at most this deep (the reader recurses)
MAX_SCAN_CHARS = 200_000  # longer text is left as it is (no canonical form) and read as incomplete
_META = frozenset(" \t\n;&|()<>")
_RESERVED_OPEN = frozenset({"if", "case", "for", "while", "until", "select", "{"})
_RESERVED_CLOSE = frozenset({"fi", "esac", "done", "}"})
# after these words the next word is again in command position
_LEADS = frozenset({"then", "do", "else", "elif", "if", "while", "until", "!", "{", "time", "}", "fi", "done"})
_DQ_SPECIAL = re.compile(r"[$`\\!'\n]")
_IO_NUMBER = re.compile(r"(?:\d+|\{\w+\})$")
_REDIRECT_OPS = (">>", ">|", ">&", "<>", "<&", ">", "<")
# where a command word stands, found without a parse: the text's start, after a separator or an
# opening parenthesis, or at a new line (`./run.sh` and `cd.py` are no command word `cd` then)
COMMAND_POSITION = r"(?:^|[;&|(]\s*|\n\s*)"
_BODY_SUBSTITUTION = re.compile(r"(?<!\\)(?:\$\(|`)")  # a substitution an unquoted heredoc body runs


@dataclass(frozen=True)
class ShellScan:
    """What `scan_shell` read.

    Attributes:
        canonical: the text with only meaning-keeping changes (the raw text when not `understood`).
        complete: bash would run all of it now (nothing open at the end).
        clean_end: length of the longest prefix ending at a line end after which bash has run everything.
        skeleton: unquoted operators, redirections, substitution openers and expansions (`$`, `*`, `~`),
            and heredoc bodies' indentation, in order: quoting or escaping that changes meaning changes it.
        redirects: `(operator, target as written)` per redirection (heredoc `<<` ones excluded).
        substitutions: the text of each `$(...)`, backquote, `<(...)` and `>(...)`.
        understood: every construct was read (no unterminated one, no length cap hit).
    """

    canonical: str
    complete: bool
    clean_end: int
    skeleton: tuple[str, ...]
    redirects: tuple[tuple[str, str], ...]
    substitutions: tuple[str, ...]
    understood: bool


class _Reader:
    """One pass over shell text; `out` collects the canonical pieces."""

    def __init__(self, text: str) -> None:
        self.s, self.i, self.n = text, 0, len(text)
        self.out: list[str] = []
        self.skeleton: list[str] = []
        self.redirects: list[tuple[str, str]] = []
        self.subs: list[str] = []
        # (delimiter, tabs stripped, body expanded) of each heredoc waiting for the next line end
        self.heredocs: list[tuple[str, bool, bool]] = []
        self.depth = 0  # open compound commands (if/case/loops/braces/subshells)
        self.cases = 0
        self.open = False  # an unterminated quote, substitution or heredoc
        self.need_more = False  # the last operator was `&&`, `||` or `|`: bash waits for a command
        self.continued = False  # the text ends in a `\` line continuation
        self.clean_end = 0
        self.breaks: list[int] = []  # every top-level line end after which bash has run everything
        self.nesting = 0  # substitutions open around `i`

    # -- words -------------------------------------------------------------------------------
    def word(self) -> str:
        """One word from `i` (quotes, escapes and expansions inside it), as written; canonical to `out`."""
        s, start, pieces = self.s, self.i, []
        while self.i < self.n and s[self.i] not in _META:
            c = s[self.i]
            if c == "\\":
                if self.i + 1 >= self.n:
                    self.open = True  # a lone backslash at the end escapes what comes next
                    pieces.append(c)
                    self.i += 1
                    break
                self.continued = s[self.i + 1] == "\n" and self.i + 2 >= self.n
                pieces.append(s[self.i : self.i + 2])
                self.i += 2
            elif c == "'":
                end = s.find("'", self.i + 1)
                if end < 0:
                    self.open = True
                    end = self.n - 1
                pieces.append(s[self.i : end + 1])
                self.i = end + 1
            elif c == '"':
                pieces.append(self.double_quoted())
            elif c == "$":
                pieces.append(self.dollar())
            elif c == "`":
                pieces.append(self.backquote())
            else:
                if c in "*?[" or (c == "~" and self.i == start) or (c == "{" and "," in s[self.i : self.i + 80]):
                    self.skeleton.append({"*": "*", "?": "*", "[": "*", "~": "~"}.get(c, "{,}"))
                pieces.append(c)
                self.i += 1
        raw = s[start : self.i]
        self.out.append("".join(pieces))
        return raw

    def double_quoted(self) -> str:
        s, start = self.s, self.i
        self.i += 1
        special = False
        while self.i < self.n and s[self.i] != '"':
            c = s[self.i]
            if c == "\\":
                special = True
                self.i += 2
            elif c == "$":
                special = True
                self.dollar()
            elif c == "`":
                special = True
                self.backquote()
            else:
                self.i += 1
        if self.i >= self.n:
            self.open = True
            self.i = self.n
            return s[start:]
        self.i += 1
        body = s[start + 1 : self.i - 1]
        if special or _DQ_SPECIAL.search(body):
            return s[start : self.i]
        return f"'{body}'"  # the same literal either way: one spelling for both

    def dollar(self) -> str:
        s, start = self.s, self.i
        nxt = s[self.i + 1] if self.i + 1 < self.n else ""
        if nxt == "'":  # $'...' (ANSI-C quoting): a quoting form, not an expansion
            j = self.i + 2
            while j < self.n and s[j] != "'":
                j += 2 if s[j] == "\\" else 1
            if j >= self.n:
                self.open = True
            self.i = min(j + 1, self.n)
            return s[start : self.i]
        self.skeleton.append("$")
        if nxt == "(" and s[self.i + 2 : self.i + 3] == "(":
            self.i = self.balanced(self.i + 1, "(", ")")  # $(( arithmetic ))
        elif nxt == "(":
            self.i += 2
            self.skeleton.append("$(")
            self.nested(")")
            self.subs.append(s[start : self.i])
        elif nxt == "{":
            self.i = self.balanced(self.i + 1, "{", "}")
        else:
            self.i += 1
            m = re.compile(r"\w+|[@*#?$!0-9-]").match(s, self.i)
            if m:
                self.i = m.end()
        return s[start : self.i]

    def balanced(self, at: int, left: str, right: str) -> int:
        """The index after the `right` that closes the `left` at `at` (quotes skipped); unterminated: open."""
        s, depth, j = self.s, 0, at
        while j < self.n:
            c = s[j]
            if c == "\\":
                j += 2
                continue
            if c == "'":
                k = s.find("'", j + 1)
                j = self.n if k < 0 else k + 1
                continue
            depth += (c == left) - (c == right)
            j += 1
            if depth == 0:
                return j
        self.open = True
        return self.n

    def backquote(self) -> str:
        s, start = self.s, self.i
        j = self.i + 1
        while j < self.n and s[j] != "`":
            j += 2 if s[j] == "\\" else 1
        if j >= self.n:
            self.open = True
        self.i = min(j + 1, self.n)
        self.skeleton.append("`")
        self.subs.append(s[start : self.i])
        return s[start : self.i]

    def nested(self, closer: str) -> None:
        """Commands up to the `closer` of a substitution (`i` is left after it); `out` keeps no inner text."""
        if self.nesting >= MAX_NESTING:  # `$($($(...` thousands deep: not read further, never understood
            self.open = True
            self.i = self.n
            return
        self.nesting += 1
        saved = (self.depth, self.cases, self.need_more, self.out)
        self.depth = self.cases = 0
        self.out = []  # the substitution is kept as written: its text is the caller's piece
        self.commands(closer)
        if self.i < self.n and self.s[self.i] == closer:
            self.i += 1
        else:
            self.open = True
        self.depth, self.cases, self.need_more, self.out = saved
        self.nesting -= 1

    # -- commands ----------------------------------------------------------------------------
    def blank(self) -> None:
        if self.out and self.out[-1] not in (" ", "\n") and not self.out[-1].endswith(("\n", "(")):
            self.out.append(" ")

    def commands(self, closer: str | None) -> None:
        s = self.s
        command_position = True
        while self.i < self.n:
            c = s[self.i]
            if closer is not None and c == closer and self.depth == 0 and self.cases == 0:
                self.trim_blank()
                return
            if c in " \t":
                self.i += 1
                self.blank()
            elif c == "\n":
                self.i += 1
                self.trim_blank()
                if self.out and not self.out[-1].endswith("\n"):
                    self.out.append("\n")
                if self.heredocs:
                    self.heredoc_bodies()
                if self.out and self.skeleton and self.skeleton[-1] != ";":
                    self.skeleton.append(";")
                command_position = True
                if closer is None and self.clean():
                    self.clean_end = self.i
                    self.breaks.append(self.i)
            elif c == "#":  # only ever met at a word's start here: a comment to the line's end
                end = s.find("\n", self.i)
                end = self.n if end < 0 else end
                self.out.append(s[self.i : end])
                self.i = end
            elif c in ";&|()<>":
                command_position = self.operator(command_position)
            else:
                raw = self.word()
                self.need_more = False
                if command_position and raw in _RESERVED_OPEN:
                    self.depth += 1
                    self.cases += raw == "case"
                elif command_position and raw in _RESERVED_CLOSE:
                    self.depth = max(0, self.depth - 1)  # a stray closer must not hide a later opener
                    self.cases -= raw == "esac" and self.cases > 0
                if raw == "in" and self.cases:
                    command_position = False
                elif not (command_position and "=" in raw and not raw.startswith("=")):
                    command_position = raw in _LEADS
        self.trim_blank()

    def trim_blank(self) -> None:
        while self.out and self.out[-1] == " ":
            self.out.pop()

    def clean(self) -> bool:
        return not (self.open or self.heredocs or self.depth > 0 or self.cases or self.need_more or self.continued)

    def operator(self, command_position: bool) -> bool:
        """Read one operator at `i`; returns whether the next word is in command position."""
        s, i = self.s, self.i
        if s[i] in "<>":
            if s.startswith("<<<", i):
                self.emit("<<<", i + 3)
                return command_position
            if s.startswith("<<", i):
                self.here_document(i)
                return command_position
            if s[i + 1 : i + 2] == "(":  # <( ) / >( ): a process substitution
                self.skeleton.append(s[i : i + 2])
                self.i = i + 2
                self.nested(")")
                self.out.append(s[i : self.i])
                self.subs.append(s[i : self.i])
                return command_position
            op = next(o for o in _REDIRECT_OPS if s.startswith(o, i))
            prev = self.out[-1] if self.out and self.out[-1] not in (" ", "\n") else ""
            fd = prev if _IO_NUMBER.fullmatch(prev) or prev == "&" else ""
            self.emit(op, i + len(op))
            self.target(fd + op)
            return command_position
        if s.startswith("&>", i):
            op = "&>>" if s.startswith("&>>", i) else "&>"
            self.emit(op, i + len(op))
            self.target(op)
            return command_position
        for op in (";;&", ";;", ";&", "&&", "||", "|&", ";", "&", "|", "(", ")"):
            if s.startswith(op, i):
                break
        spaced = op not in "()"  # `a=(1 2)` is an array and `a= (1)` an error: a blank there is kept as it is
        if spaced:  # blanks around a control operator never matter: one on each side
            self.trim_blank()
        if spaced and self.out and not self.out[-1].endswith("\n"):
            self.out.append(" ")
        self.emit(op, i + len(op))
        if spaced:
            self.out.append(" ")
        self.need_more = op in ("&&", "||", "|", "|&")
        if op == "(" and command_position:
            self.depth += 1
        elif op == ")" and self.depth > 0 and not self.cases:
            self.depth -= 1
        return True  # a case pattern's `)` and a function's `()` are followed by a command too

    def emit(self, op: str, end: int) -> None:
        self.out.append(op)
        self.skeleton.append(op)
        self.i = end

    def target(self, op: str) -> None:
        while self.i < self.n and self.s[self.i] in " \t":
            self.i += 1
        if self.i < self.n and self.s[self.i] not in _META:
            self.redirects.append((op, self.word()))
        else:
            self.redirects.append((op, ""))

    def here_document(self, at: int) -> None:
        strip = self.s.startswith("<<-", at)
        self.emit("<<-" if strip else "<<", at + (3 if strip else 2))
        while self.i < self.n and self.s[self.i] in " \t":
            self.i += 1
        raw = self.word() if self.i < self.n and self.s[self.i] not in _META else ""
        delimiter = re.sub(r"""['"\\]""", "", raw)
        if not delimiter:
            self.open = True
            return
        # `<<EOF` expands `$(...)` and backquotes in its body; `<<'EOF'` (any quoting) keeps them as text
        self.heredocs.append((delimiter, strip, delimiter == raw))

    def heredoc_bodies(self) -> None:
        """Read the pending heredoc bodies (verbatim) after a line end; one never closed leaves the text open."""
        s = self.s
        for delimiter, strip, expanded in self.heredocs:
            indents = []
            while True:
                if self.i >= self.n:
                    self.open = True
                    self.heredocs = []
                    return
                end = s.find("\n", self.i)
                end = self.n if end < 0 else end
                line = s[self.i : end]
                self.out.append(s[self.i : end + 1])
                self.i = min(end + 1, self.n)
                if (line.lstrip("\t") if strip else line) == delimiter:
                    break
                if expanded and _BODY_SUBSTITUTION.search(line):
                    self.skeleton.append("$(")
                    self.subs.append(f"in a heredoc: {line.strip()[:200]}")
                indents.append(len(line) - len(line.lstrip(" \t")))
            self.skeleton.append(f"<<body:{','.join(map(str, indents))}")
        self.heredocs = []


def scan_shell(text: str) -> ShellScan:
    """Read shell text once (see the module docstring); never raises."""
    if len(text) > MAX_SCAN_CHARS:
        return ShellScan(text, False, 0, ("<too long>",), (), (), False)
    reader = _Reader(text)
    reader.commands(None)
    if reader.heredocs:  # the text ends on the line that starts a heredoc
        reader.open = True
    complete = reader.clean()
    understood = not reader.open
    canonical = "".join(reader.out).strip("\n") if understood and not reader.continued else text
    return ShellScan(
        canonical,
        complete,
        len(text) if complete else reader.clean_end,
        tuple(reader.skeleton),
        tuple(reader.redirects),
        tuple(reader.subs),
        understood,
    )


def command_lines(text: str) -> tuple[str, ...] | None:
    r"""The text cut at each line end where bash has run everything before it: one piece per command line.

    What bash reads as one command stays one piece over its lines (a compound command, a quoted or
    heredoc newline, a `\` continuation, a trailing `&&` or `|`); blank lines are dropped, a
    comment line is a piece of its own. None when the reader did not understand the text (an open
    quote, substitution or heredoc; past `MAX_SCAN_CHARS`).
    """
    if len(text) > MAX_SCAN_CHARS:
        return None
    reader = _Reader(text)
    reader.commands(None)
    if reader.open or reader.heredocs:
        return None
    cuts = [0, *reader.breaks, len(text)]
    pieces = (text[start:end].strip() for start, end in itertools.pairwise(cuts))
    return tuple(piece for piece in pieces if piece)


# tmux key names (send-keys) that a Terminus turn may send as a whole keystrokes string.
SUBMIT_KEYS = frozenset({"Enter", "C-m", "C-j", "KPEnter"})
_CANCEL_KEYS = frozenset({"C-c"})  # bash drops the line being typed and any unfinished construct
_KILL_LINE_KEYS = frozenset({"C-u"})
# `q` alone quits a pager, which the fresh-shell model never leaves running: it types nothing here.
_NO_TEXT_KEYS = frozenset({"q", "Escape", "C-d", "C-z", "C-l", "Tab", "BTab", "Up", "Down", "Left", "Right"})
_KEY_NAME = re.compile(r"(?:[CMS]-)+\S|F\d{1,2}|Home|End|PPage|NPage|PageUp|PageDown|IC|DC|BSpace|Space")


@dataclass(frozen=True)
class Typed:
    """What a run of keystrokes does at a prompt.

    Attributes:
        commands: the command texts bash runs, in order (each complete, surrounding blanks dropped).
        pending: what stays typed and not run: lines submitted into an unfinished construct, then
            the line at the prompt (a later newline runs it, with whatever is typed before it).
    """

    commands: tuple[str, ...]
    pending: str


def typed_commands(keystrokes: Sequence[str], pending: str = "") -> Typed:
    """The commands a terminal runs for `keystrokes` typed at a prompt that already holds `pending`.

    Text accumulates until a newline or an Enter key; bash then runs every complete command
    (`scan_shell(...).clean_end`) and keeps the rest waiting. `C-c` discards what waits, `C-u`
    the line being typed, `BSpace` its last character; other key names type nothing.
    """
    commands: list[str] = []
    buf = pending
    for keys in keystrokes:
        if keys in _CANCEL_KEYS:
            buf = ""
            continue
        if keys in _KILL_LINE_KEYS:
            buf = buf[: buf.rfind("\n") + 1]
            continue
        if keys == "BSpace":
            buf = buf[:-1] if buf and not buf.endswith("\n") else buf
            continue
        if keys in SUBMIT_KEYS:
            text = "\n"
        elif keys == "Space":
            text = " "
        elif keys in _NO_TEXT_KEYS or _KEY_NAME.fullmatch(keys):
            continue
        else:
            text = keys.replace("\r\n", "\n").replace("\r", "\n")  # a carriage return is Enter too
        buf += text
        cut = buf.rfind("\n")
        if cut < 0:
            continue
        submitted = buf[: cut + 1]
        # past the reader's bound, the whole text runs: bash would run its complete commands, never hide them
        ran = len(submitted) if len(submitted) > MAX_SCAN_CHARS else scan_shell(submitted).clean_end
        if ran:
            command = trim_command(submitted[:ran])
            if command:
                commands.append(command)
            buf = buf[ran:]
    return Typed(tuple(commands), buf)


def trim_command(command: str) -> str:
    r"""`command` without the blanks around it where dropping them provably changes nothing.

    Leading blanks and blank lines never matter; trailing ones do after a `\` (an escaped
    blank, a line continuation), inside an open quote and on a heredoc's closing line.
    """
    text = command.lstrip(" \t\n")
    stripped = text.rstrip(" \t\n")
    if stripped == text or stripped.endswith("\\"):
        return text
    return stripped if scan_shell(stripped).complete and scan_shell(text).complete else text
