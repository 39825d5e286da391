"""What an SWE command may change: its state-changing commands and the writes hidden in its reads.

`command_effects` gives one key per thing a command may change, so that a candidate doing more
than the expert's action shows a key the expert's lacks. A read or a search changes nothing by its
verb, but a command line can still write through it: a redirection (`grep x src > src.py`, `2>`,
`&>`, `>|`, `<>`), a command or process substitution (`$(git stash)`, backquotes, `<(...)`,
`>(...)`), `find -delete`/`-exec`/`-execdir`/`-ok`/`-fprint*`, a sed `w`/`W`/`e` command or
`s///w`, an awk `system()` or `print >`, `git -c`/`--output`, `less -o`, `tree -o`, `rg --pre`,
or a variable set for the command (`GIT_EXTERNAL_DIFF=...`). Each of these is a key of its own
(`write src.py`, `substitution $(git stash)`, ...), so such a read is another action unless the
expert's has the same construct.

A redirection into `/dev/null`, `/dev/stdout` or `/dev/stderr` writes no file (the sink and the
process's own streams: nothing there is the repository's), and `2>&1`, `>&2`, `<&-` only copy or
close descriptors: those are no writes, so `find . -name x 2>/dev/null` stays the read it is.
"""

from __future__ import annotations

import functools
import re

from pivot_core import Message, message_commands, scan_shell
from verifiers_plugins._memo import CACHE_SIZE
from verifiers_plugins.builtin._categories import command_category, command_verb, strip_prefixes
from verifiers_plugins.builtin._shellwords import normalize_path, shell_segments, words

_HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?")
_HARMLESS = frozenset({"cd", "pushd", "popd", "echo", "printf", "true", "pwd", "sleep", "export", "set", "clear"})
_SINKS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})
_FIND_ACTIONS = frozenset({"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls"})
# options that make a reading program write a file or run another program, per verb
_WRITING_OPTIONS = {
    "less": ("-o", "-O", "--log-file", "--LOG-FILE", "+"),
    "more": ("+",),
    "tree": ("-o",),
    "rg": ("--pre",),
    "file": ("-C",),
    "git": ("--output", "--open-files-in-pager", "--ext-diff"),
    "sort": ("-o", "--output"),
}
_AWK_WRITES = re.compile(r"\bsystem\s*\(|\|\s*(?:&\s*)?(?:getline|\")|\b(?:print|printf)\b[^;}\n]*>|\bfflush\b")
_SED_FLAGS = re.compile(r"[gpiImMe0-9w]*")


def command_effects(command: str) -> frozenset[str]:
    """What a command may change: one key per simple command that is not a read, and per hidden write.

    Every line counts (heredoc bodies are text, not commands), so `rm -rf /testbed` on a second
    line and `python x.py && rm -rf ~` show a command the expert's lacks. A key is the verb and the
    words it acts on (`rm reproduce.py` is not `rm ~`), `git <sub> ...` for git, and "run" for a run
    (which programs run is `runs`' business). A heredoc that never meets its terminator
    (`EOF; rm -rf ./*` is not `EOF`) swallows the rest of the command: that is an effect of its own.
    The writes a read can hide are keys too (`hidden_writes`).
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
        out |= _segment_writes(segment)
        category, verb = command_category(segment), command_verb(segment)
        if category in ("read", "search") or (verb in _HARMLESS and category != "edit"):
            continue
        if category == "run":
            out.add("run")
            continue
        argv = strip_prefixes(words(segment))
        operands = [w for w in argv[1:] if not w.startswith("-") and w not in ("<", "<<")]
        if verb == "sed" and operands:
            operands = operands[1:]  # the script, compared by anchor and written text
        out.add(" ".join([verb or argv[0] if argv else segment, *sorted(normalize_path(w) for w in operands)]))
    return frozenset(out | hidden_writes(command))


def hidden_writes(command: str) -> frozenset[str]:
    """The redirections and substitutions of a command line that can write or run something (see the module)."""
    scan = scan_shell(command[:20000])
    out = {f"substitution {' '.join(s.split())[:200]}" for s in scan.substitutions}
    for op, target in scan.redirects:
        base = op.lstrip("0123456789").lstrip("{").split("}")[-1]
        if base in ("<", "<&"):
            continue  # reads, or copies an input descriptor
        plain = target.strip("'\"")
        if base == ">&" and (plain.isdigit() or plain == "-"):
            continue  # `2>&1`, `>&2`, `>&-`: descriptors copied or closed
        if plain in _SINKS and target.count("'") + target.count('"') in (0, 2):
            continue
        # `>` empties the file first, `>>` adds to it, `<>` opens it both ways: three different changes
        verb = "append to" if base in (">>", "&>>") else "read-write" if base == "<>" else "write"
        out.add(f"{verb} {normalize_path(target) if target else '(no target)'}")
    if not scan.understood:
        out.add("shell text not understood (an open quote or heredoc)")
    return frozenset(out)


def _segment_writes(segment: str) -> set[str]:
    """Writes a reading verb makes through its own options (find actions, sed/awk scripts, ...)."""
    raw = words(segment)
    argv = strip_prefixes(raw)
    out = {f"env {w}" for w in raw[: len(raw) - len(argv)] if "=" in w and not w.startswith("-")}
    if not argv:
        return out
    verb = argv[0].rsplit("/", 1)[-1]
    if verb == "find":
        at = next((i for i, w in enumerate(argv) if w in _FIND_ACTIONS), None)
        if at is not None:
            out.add("find " + " ".join(argv[at:])[:200])
    elif verb == "sed" and not any(w.startswith("-i") or w.startswith("--in-place") for w in argv[1:]):
        if _sed_writes(argv[1:]):
            out.add("sed script that writes or runs " + " ".join(argv[1:])[:200])
    elif verb in ("awk", "gawk", "mawk", "nawk"):
        if any(w in ("-f", "-i", "--file", "--include") for w in argv[1:]) or any(
            _AWK_WRITES.search(w) for w in argv[1:]
        ):
            out.add("awk program that writes or runs " + " ".join(argv[1:])[:200])
    if verb == "git":
        sub = next((i for i, w in enumerate(argv[1:], 1) if not w.startswith("-")), len(argv))
        # `git -c diff.external=... diff`: a global option that makes the read run a program
        if any(w in ("-c", "--config-env") or w.startswith("--config-env=") for w in argv[1:sub]):
            out.add("git -c " + " ".join(argv[1:])[:200])
        if argv[sub : sub + 1] == ["grep"] and any(w == "-O" or w.startswith("-O") for w in argv[sub + 1 :]):
            out.add("git grep -O " + " ".join(argv[1:])[:200])  # opens the matches in a program of its choice
    for option in _WRITING_OPTIONS.get(verb, ()):
        hit = [w for w in argv[1:] if w == option or w.startswith(option + ("" if option == "+" else "="))]
        short = option.startswith("-") and len(option) == 2
        if hit or (short and any(_has_short(w, option[1]) for w in argv[1:])):
            out.add(f"{verb} {option} " + " ".join(argv[1:])[:200])
    return out


def _has_short(word: str, letter: str) -> bool:
    """`-xo` carries `-o`: a bundle of single-letter options."""
    return word.startswith("-") and not word.startswith("--") and letter in word[1:] and word[1:].isalpha()


def _sed_writes(args: list[str]) -> bool:
    """A sed invocation whose script writes a file or runs a command (`w`, `W`, `e`, `s///w`, `s///e`)."""
    scripts: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        if word in ("-f", "--file") or word.startswith("--file="):
            return True  # a script read from a file: unseen, so it may write
        if word in ("-e", "--expression") and i + 1 < len(args):
            scripts.append(args[i + 1])
            i += 2
            continue
        if word.startswith("--expression="):
            scripts.append(word.partition("=")[2])
        elif not word.startswith("-") and not scripts:
            scripts.append(word)
        i += 1
    return any(_sed_script_writes(s) for s in scripts)


def _sed_script_writes(script: str) -> bool:
    """Read a sed script command by command; any `w`/`W`/`e` command or `w`/`e` flag of `s` writes or runs."""
    i, n = 0, len(script)
    while i < n:
        c = script[i]
        if c in " \t\n;{}!,$+~0123456789":
            i += 1
        elif c == "/":
            i = _after(script, i + 1, "/")
        elif c == "\\" and i + 1 < n:
            i = _after(script, i + 2, script[i + 1])
        elif c in "sy":
            if i + 1 >= n:
                return False
            delim = script[i + 1]
            i = _after(script, _after(script, i + 2, delim), delim)
            if c == "s":
                flags = _SED_FLAGS.match(script, i).group(0)
                if "w" in flags or "e" in flags:
                    return True
                i += len(flags)
        elif c in "wWe":
            return True
        elif c in "aicrRbtTv:#":  # text, a file to read, a label or a comment: to the line's end
            end = script.find("\n", i)
            i = n if end < 0 else end
        else:
            i += 1
    return False


def _after(text: str, i: int, delim: str) -> int:
    """The index after the next `delim` not escaped by a backslash (the end when there is none)."""
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == delim:
            return i + 1
        i += 1
    return len(text)


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


@functools.lru_cache(maxsize=CACHE_SIZE)
def _command_facts(message: Message) -> tuple[tuple[int, frozenset[str]], ...]:
    """(number of simple commands, effects) of each text-form command of a turn (the expert's, in `rider_problem`)."""
    return tuple((len(shell_segments(c)), command_effects(c)) for c in message_commands(message))
