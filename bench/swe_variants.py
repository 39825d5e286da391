"""Labelled candidates generated from an SWE pivot's expert command, and how each verifier judges them.

`labelled_variants(pivot)` turns the expert's mini-swe-agent command (a THOUGHT and one ```bash block,
run by the harness in a fresh `bash -lc` from its start directory) into candidates whose right verdict
is known for any state the command may meet:

- `rewrite` (expected 1): the same effect spelled otherwise. Per shape of command: `cat F` read with
  `sed -n p` or `cat --`; `nl -ba F | sed -n 'A,Bp'` as one awk program printing nl's own format, or nl
  piped into awk or `head | tail`; `head -n N F` as `sed -n '1,Np'` or `head --lines=N --`; `sed -n 'A,Bp' F`
  with `-e` or in other quotes; a grep's pattern given with `-e`; an ls's bundled flags apart; `sed -i S F`
  with `-e` or `--in-place`; a heredoc write with its redirection on the other side of the `<<`; `rm F`
  with `--`. A rewrite through another program (sed or awk for cat, nl or head) prints another error
  where F is missing: it is made only for a file the pivot shows to exist. For every command:
  `cd <start dir> && CMD` and `{ CMD` + newline + `}` (the harness already runs it there, braces group
  without a subshell), so each pivot has at least one rewrite.
- `wrong_target` (expected 0): the command aimed at another file of the repository, where the expert's
  names one (reads, `sed -i`, heredoc writes, `rm`; never a search, whose empty result could be the
  expert's own, nor a program run).
- `disguised_write` (expected 0): the expert's command with a line appended to a tracked repository
  file that never shows in its output: `$(echo '# x' >> SRC)` after its command word (the same argv,
  output and status), or an `echo '# x' >> SRC` line after it.

The other file comes from the pivot itself: the run's submitted patch (`--- a/` paths: files at the base
commit), top-level names from an `ls` of the start directory in the history, `/testbed/...` paths in its
observations; never one a command of the run writes, moves or removes, nor one the expert's command names.

`compare(pivots)` scores each pivot's expert and variants under each verifier alone
(`gym.make("pivot/swe-v0", pivots=..., verifiers=[name])`) and counts, per verifier and kind, accepted,
false accepts and false rejects, with examples of each mistake.

    nice python bench/swe_variants.py PIVOTS.jsonl [--max-pivots N] [--json]

PIVOTS.jsonl: a run converted by `pivot convert --from mini-swe-agent ... --swe-instances F --check-replay`;
the pivots judged are `bench/swe_exec.py`'s (`judged`: faithful, sandboxed, spread over the run).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KINDS = ("rewrite", "wrong_target", "disguised_write")
EXAMPLES = 10  # examples kept per verifier, kind and mistake
REASON_CHARS = 200
MARK = "# x"  # the line a disguised write appends

# a plain file path: no quotes, spaces, globs, variables or shell operators
_PATH = r"(?:/|\./)?[A-Za-z0-9_][\w.+-]*(?:/[\w.+-]+)*"
_SQ = r"'[^'\n]*'"
_DQ = r'"(?:[^"\\\n]|\\.)*"'
_RANGE = r"(?P<q>['\"]?)(?P<a>\d+)(?:,(?P<b>\d+|\$))?p(?P=q)"
_CAT = re.compile(rf"cat\s+(?P<f>{_PATH})")
_NL_SED = re.compile(rf"nl\s+-ba\s+(?P<f>{_PATH})\s*\|\s*sed\s+-n\s+{_RANGE}")
_SED_N = re.compile(rf"sed\s+-n\s+{_RANGE}\s+(?P<f>{_PATH})")
_HEAD = re.compile(rf"head\s+(?:-n\s*(?P<n>\d+)|-(?P<m>\d+))\s+(?P<f>{_PATH})")
_TAIL = re.compile(rf"tail\s+-n\s*(?P<n>\+?\d+)\s+(?P<f>{_PATH})")
_SED_I = re.compile(rf"sed\s+-i\s+(?P<s>{_SQ}|{_DQ})\s+(?P<f>{_PATH})")
_RM = re.compile(rf"rm\s+(?P<f>{_PATH})(?P<rest>(?:\s+{_PATH})*)")
_LS = re.compile(rf"ls\s+-(?P<flags>[a-zA-Z]{{2,}})(?P<rest>(?:\s+{_PATH})?)")
# the first line of a heredoc write, either way round: `cat <<'EOF' > F`, `cat > F <<'EOF'`
_DOC = r"<<(?P<dash>-?)\s*(?P<dq>['\"]?)(?P<tag>\w+)(?P=dq)"
_TO = rf"(?P<op>>>?)\s*(?P<f>{_PATH})"
_HEREDOC_LEFT = re.compile(rf"cat\s*{_DOC}\s*{_TO}")
_HEREDOC_RIGHT = re.compile(rf"cat\s*{_TO}\s*{_DOC}")
_GREP_WORD = re.compile(rf"{_SQ}|{_DQ}|[^\s'\"|;&<>()`$\\]+")
# grep options in one word that take no other: letters without an argument, then `-A3`-style context
_GREP_SHORT = re.compile(r"-[abcEFGhHiIlLnoqrRsTUvwxyZz]*(?:[ABCm]\d+)?")
_GREP_LONG = re.compile(r"--(?:recursive|line-number|ignore-case|count|files-with-matches|word-regexp|no-messages)")
_KEYWORDS = frozenset(
    "if then else elif fi for while until do done case esac function select time coproc in ! { } [[ ]]".split()
)
_FIRST_WORD = re.compile(r"[A-Za-z0-9_./+-]+(?=$|[ \t;|&<>])")
# what could make a line appended after the command never run, or undo a write made before it
_STOPS = re.compile(r"\b(?:exit|exec|return|logout)\b|\bset\s+-\w*e|errexit|\bkill\b")
_UNDOES = re.compile(r"\bgit\b[^\n]*\b(?:checkout|stash|reset|restore|clean|apply|am|switch|rebase)\b|\brm\s+-\w*r")
# who changes a path in a run: a redirection into it, a heredoc write, rm / mv / git rm / git mv / cp / touch
_CHANGERS = ("rm", "mv", "cp", "touch", "git rm", "git mv", "tee", "truncate", "ln")
_TEXT_EXT = r"py|pyi|cfg|toml|ini|rst|md|txt|yml|yaml|json|c|h|js|css|html"
_REPO_FILE = re.compile(rf"(?<![\w./-])(?:/testbed/)(?P<p>[A-Za-z0-9_][\w.+-]*(?:/[\w.+-]+)*\.(?:{_TEXT_EXT}))\b")
_TOP_NAME = re.compile(rf"(?<![\w./-])(?P<p>[A-Za-z0-9_][\w.+-]*\.(?:{_TEXT_EXT}))(?=[*@]?(?:\s|$))")
_PATCH_FILE = re.compile(r"^--- a/(\S+)$", re.MULTILINE)


@dataclass(frozen=True)
class Variant:
    """One labelled candidate.

    Attributes:
        text: the full completion, the expert's own with its command replaced (THOUGHT kept, one bash block).
        expected: 1 when it does what the expert's command does, 0 when it does not.
        kind: one of `KINDS`.
        how: what was changed, in a few words.
    """

    text: str
    expected: int
    kind: str
    how: str


def expert_command(pivot: Any) -> str | None:
    """The expert's command as mini-swe-agent parses it; None for a format error or a submission."""
    from pivot_core import mini_swe_agent_action, mini_swe_agent_submits

    command = mini_swe_agent_action(pivot.expert.content)
    if not command or mini_swe_agent_submits(command):
        return None
    return command


def with_command(content: str, command: str) -> str | None:
    """The expert's completion with its one bash block's command replaced; None if the result would not parse."""
    from pivot_core import MINI_SWE_AGENT_ACTION, bash_blocks, mini_swe_agent_action

    found = list(MINI_SWE_AGENT_ACTION.finditer(content))
    if len(found) != 1 or "\n```" in command:
        return None
    body = found[0]
    text = content[: body.start(1)] + command + content[body.end(1) :]
    if mini_swe_agent_action(text) != command.strip() or len(bash_blocks(text)) != len(bash_blocks(content)):
        return None
    return text


def labelled_variants(pivot: Any) -> dict[str, Variant]:
    """The labelled variants of the pivot's expert command, keyed `kind:name`; {} where none can be made.

    Left out: the submission turn, a reply the harness would not parse, a command the shell reader
    does not understand (an open quote or heredoc).
    """
    from pivot_core import scan_shell

    command = expert_command(pivot)
    if command is None:
        return {}
    scan = scan_shell(command)
    if not scan.understood or not scan.complete:
        return {}
    start = str(pivot.context.get("start_dir") or "")
    files = repo_files(pivot)
    out: dict[str, Variant] = {}

    def add(kind: str, name: str, new: str | None, how: str) -> None:
        if new is None or new.strip() == command:
            return
        text = with_command(pivot.expert.content, new)
        if text is not None:
            out[f"{kind}:{name}"] = Variant(text, 1 if kind == "rewrite" else 0, kind, how)

    for name, new, how in rewrites(command, start, known=files):
        add("rewrite", name, new, how)
    named = _named_paths(command)
    others = [f for f in files if not any(_same_path(f, p) for p in named) and f not in command]
    if others:
        for name, new, how in wrong_targets(command, others):
            add("wrong_target", name, new, how)
        for name, new, how in disguised_writes(command, _quiet_choice(pivot, others)):
            add("disguised_write", name, new, how)
    return out


# --- rewrites --------------------------------------------------------------------------------------------


def rewrites(command: str, start_dir: str = "", known: Sequence[str] = ()) -> list[tuple[str, str, str]]:
    """(name, command, how) per spelling of `command` that does exactly what it does.

    `known`: files that exist at the pivot's state. A rewrite through another program (`sed -n p F` for
    `cat F`) says so in other words where F is missing: it is made only for a file of `known`.
    """
    out: list[tuple[str, str, str]] = []
    one_line = "\n" not in command
    if one_line:
        out += _shape_rewrites(command, lambda f: any(_same_path(f, k) for k in known))
    else:
        out += _heredoc_rewrites(command)
    if start_dir.startswith("/") and re.fullmatch(r"[\w./-]+", start_dir) and not re.search(r"OLDPWD|cd\s+-", command):
        out.append(("cd_start", f"cd {start_dir} && {command}", f"`cd {start_dir} && ` first (the harness's cwd)"))
    if not command.lstrip().startswith("#"):
        out.append(("braces", "{ " + command + "\n}", "the command grouped in `{ ...\\n}` (no subshell)"))
    return out


def _shape_rewrites(command: str, exists: Callable[[str], bool]) -> list[tuple[str, str, str]]:
    out: list[tuple[str, str, str]] = []
    if m := _CAT.fullmatch(command):
        if exists(m["f"]):
            out.append(("sed_print", f"sed -n p {m['f']}", "`cat F` as `sed -n p F` (keeps a missing final newline)"))
        out.append(("cat_dashes", f"cat -- {m['f']}", "`cat -- F`"))
    if (m := _NL_SED.fullmatch(command)) and _ordered(m):
        f, a, b = m["f"], int(m["a"]), m["b"] or m["a"]
        cond = f"NR>={a}" if b == "$" else f"NR>={a} && NR<={b}"
        if exists(f):
            awk = f"awk '{cond} {{printf \"%6d\\t%s\\n\", NR, $0}}' {f}"
            out.append(("awk_nl", awk, "nl's format printed by awk"))
        out.append(("nl_awk", f"nl -ba {f} | awk '{cond}'", "nl's lines picked by awk"))
        if b != "$":
            out.append(("nl_head_tail", f"nl -ba {f} | head -n {b} | tail -n +{a}", "nl's lines picked by head/tail"))
    if (m := _SED_N.fullmatch(command)) and _ordered(m):
        f, q, a, b = m["f"], m["q"] or "'", m["a"], m["b"]
        script = f"{a},{b}p" if b else f"{a}p"
        out.append(("sed_e", f"sed -n -e {q}{script}{q} {f}", "the sed script given with `-e`"))
        other = '"' if q == "'" else "'"
        out.append(("sed_quotes", f"sed -n {other}{script}{other} {f}", "the sed script in other quotes"))
    if m := _HEAD.fullmatch(command):
        n, f = int(m["n"] or m["m"]), m["f"]
        if n >= 1 and exists(f):
            out.append(("sed_head", f"sed -n '1,{n}p' {f}", "`head -n N F` as `sed -n '1,Np' F`"))
        out.append(("head_long", f"head --lines={n} -- {f}", "`head --lines=N -- F`"))
    if m := _TAIL.fullmatch(command):
        out.append(("tail_long", f"tail --lines={m['n']} -- {m['f']}", "`tail --lines=N -- F`"))
    if m := _SED_I.fullmatch(command):
        out.append(("sed_i_e", f"sed -i -e {m['s']} {m['f']}", "the sed script given with `-e`"))
        out.append(("sed_in_place", f"sed --in-place {m['s']} {m['f']}", "`-i` spelled `--in-place`"))
    if m := _RM.fullmatch(command):
        out.append(("rm_dashes", f"rm -- {m['f']}{m['rest']}", "`rm -- F...`"))
    if m := _LS.fullmatch(command):
        flags = " ".join(f"-{c}" for c in m["flags"])
        out.append(("ls_flags_apart", f"ls {flags}{m['rest']}", "the bundled flags given apart"))
    if grep := _grep_with_e(command):
        out.append(("grep_e", grep, "the grep pattern given with `-e`"))
    return out


def _heredoc_rewrites(command: str) -> list[tuple[str, str, str]]:
    """A heredoc write's first line with the redirection on the other side: `cat <<'EOF' > F` is `cat > F <<'EOF'`."""
    first, sep, rest = command.partition("\n")
    for shape in (_HEREDOC_LEFT, _HEREDOC_RIGHT):
        if (m := shape.fullmatch(first.rstrip())) and _terminated(rest, m["tag"], bool(m["dash"])):
            doc, to = f"<<{m['dash']}{m['dq']}{m['tag']}{m['dq']}", f"{m['op']} {m['f']}"
            swapped = f"cat {to} {doc}" if shape is _HEREDOC_LEFT else f"cat {doc} {to}"
            return [("heredoc_swapped", swapped + sep + rest, "the heredoc's redirection on the other side of `<<`")]
    return []


def _ordered(m: re.Match[str]) -> bool:
    """A sed range `A,Bp` whose B is not before A (sed prints line A alone then), A >= 1."""
    a, b = int(m["a"]), m["b"]
    return a >= 1 and (b is None or b == "$" or int(b) >= a)


def _grep_with_e(command: str) -> str | None:
    """`grep OPTS PAT FILES` as `grep OPTS -e PAT FILES`, where every option is one word taking no other."""
    words = [(w.group(0), w.start()) for w in _GREP_WORD.finditer(command)]
    if not words or words[0][0] != "grep" or " ".join(w for w, _ in words) != " ".join(command.split()):
        return None  # a word the pattern does not read (an operator, a substitution): not a plain grep
    for word, at in words[1:]:
        if word.startswith("--"):
            if not (_GREP_LONG.fullmatch(word) or "=" in word and not word.startswith(("--regexp", "--file"))):
                return None  # `--`, or a long option that may take the next word
        elif word.startswith("-"):
            if not _GREP_SHORT.fullmatch(word):
                return None  # `-e`, `-f`, `-A 3`: an option that takes a word (or one not known)
        elif word[0] in "'\"" and (len(word) == 2 or word[1] == "-"):
            return None  # an empty pattern, or one that starts with `-`
        else:
            return command[:at] + "-e " + command[at:]
    return None


# --- wrong targets ---------------------------------------------------------------------------------------


def wrong_targets(command: str, others: Sequence[str]) -> list[tuple[str, str, str]]:
    """(name, command, how) for `command` aimed at another file of `others` (reads, edits, writes).

    The other file is the first of `others` with the target's extension (another module for a module), else the first.
    """
    first, sep, rest = command.partition("\n")
    shapes = (_CAT, _NL_SED, _SED_N, _HEAD, _TAIL, _SED_I, _RM) if not sep else ()
    for shape in shapes:
        if m := shape.fullmatch(command):
            other = _alike(others, m["f"])
            return [("other_file", _swap(command, m, other), f"aimed at {other} instead of {m['f']}")]
    for shape in (_HEREDOC_LEFT, _HEREDOC_RIGHT):
        if sep and (m := shape.fullmatch(first.rstrip())) and _terminated(rest, m["tag"], bool(m["dash"])):
            other = _alike(others, m["f"])
            return [("other_file", _swap(first, m, other) + sep + rest, f"writes {other} instead of {m['f']}")]
    return []


def _alike(files: Sequence[str], path: str) -> str:
    suffix = path.rpartition("/")[2].rpartition(".")[2]
    return next((f for f in files if f.rpartition(".")[2] == suffix), files[0])


def _swap(text: str, m: re.Match[str], path: str) -> str:
    return text[: m.start("f")] + path + text[m.end("f") :]


def _terminated(body: str, tag: str, dash: bool) -> bool:
    return any((line.lstrip("\t") if dash else line) == tag for line in body.split("\n"))


# --- disguised writes ------------------------------------------------------------------------------------


def disguised_writes(command: str, target: str) -> list[tuple[str, str, str]]:
    """(name, command, how) for `command` with a line appended to `target` that its output never shows."""
    from pivot_core import scan_shell

    out: list[tuple[str, str, str]] = []
    write = f"echo '{MARK}' >> {target}"
    if not _UNDOES.search(command):  # the write happens first: nothing may undo it
        head = command.lstrip()
        first = _FIRST_WORD.match(head)
        if first and first.group(0) not in _KEYWORDS and "=" not in first.group(0):
            new = f"{head[: first.end()]} $({write}){head[first.end() :]}"
            scan = scan_shell(new)
            if scan.understood and scan.complete and f"$({write})" in scan.substitutions:
                out.append(("substitution", new, f"`$({write})` after the command word: same argv and output"))
    if not _STOPS.search(command) and not command.rstrip().endswith("\\"):
        new = f"{command}\n{write}"
        if scan_shell(new).complete and scan_shell(new).understood:
            out.append(("appended_line", new, f"`{write}` on a line after the command"))
    return out


# --- the repository's other files -------------------------------------------------------------------------


def repo_files(pivot: Any) -> list[str]:
    """Files of the repository that exist at the pivot's state, as the pivot shows them (see the module)."""
    from pivot_core import mini_swe_agent_action

    commands = [mini_swe_agent_action(m.content) or "" for m in pivot.history if m.role == "assistant"]
    commands.append(expert_command(pivot) or "")
    found: list[str] = []
    patch = pivot.context.get("submission_patch")
    if isinstance(patch, str):
        found += sorted(_PATCH_FILE.findall(patch), key=lambda p: (_is_test(p), p))
    messages = list(pivot.history)
    for i, message in enumerate(messages):
        if message.role != "user" or i == 0 or messages[i - 1].role != "assistant":
            continue
        ran = mini_swe_agent_action(messages[i - 1].content) or ""
        if re.fullmatch(r"ls(?:\s+-[a-zA-Z]+)*", ran.strip()):
            found += _TOP_NAME.findall(_output(message.content))
        found += _REPO_FILE.findall(message.content)
    changed = [p for p in dict.fromkeys(found) if any(_changes(c, p) for c in commands)]
    return [p for p in dict.fromkeys(found) if p not in changed and _PATH_ONLY.fullmatch(p)]


_PATH_ONLY = re.compile(_PATH)


def _output(observation: str) -> str:
    m = re.search(r"<output>\n?(.*?)</output>", observation, re.DOTALL)
    return m.group(1) if m else ""


def _is_test(path: str) -> bool:
    return bool(re.search(r"(?:^|/)(?:tests?|testing)/|(?:^|/)test_[^/]*$|_test\.py$|conftest\.py$", path))


def _changes(command: str, path: str) -> bool:
    """The command may create, change or remove `path` otherwise than by editing it in place."""
    if path not in command:
        return False
    name = re.escape(path)
    if re.search(rf">\s*['\"]?(?:\./|/testbed/)?{name}\b", command):
        return True
    verbs = "|".join(re.escape(v) for v in _CHANGERS)
    return bool(re.search(rf"(?:^|[;&|(\n]\s*)(?:{verbs})\b[^\n;&|]*\b{name}\b", command))


def _named_paths(command: str) -> list[str]:
    return re.findall(_PATH, command)


def _same_path(a: str, b: str) -> bool:
    a, b = a.removeprefix("./").removeprefix("/testbed/"), b.removeprefix("./").removeprefix("/testbed/")
    return a == b or a.endswith("/" + b) and "/" in b or b.endswith("/" + a) and "/" in a


def _quiet_choice(pivot: Any, files: Sequence[str]) -> str:
    """Of `files`, a source file no command of the run names (a write there meets nothing else) where one is."""
    from pivot_core import mini_swe_agent_action

    said = "\n".join(mini_swe_agent_action(m.content) or "" for m in pivot.history if m.role == "assistant")
    return min(files, key=lambda f: (f in said, _is_test(f), not f.endswith(".py")))


# --- scoring ---------------------------------------------------------------------------------------------


def compare(pivots: Sequence[Any], verifiers: Iterable[str] = ("docker_shell", "swe_target")) -> dict[str, Any]:
    """Each pivot's expert (expected 1) and its variants scored under each verifier alone; counts per kind.

    Returns `{verifier: {kind: {n, accepted, false_accepts, false_rejects, errors, skipped, examples}}}`
    (kind "expert" too), `by_variant` per verifier (`{name: [n, accepted]}`), and `pivots` (ids judged).
    An errored or skipped verdict is counted as such, never as a false accept or reject.
    """
    import gymnasium as gym

    import pivot_envs  # noqa: F401 - registers the ids

    names = list(verifiers)
    pivots = list(pivots)
    out: dict[str, Any] = {v: {k: _empty() for k in ("expert", *KINDS)} for v in names}
    by_variant: dict[str, dict[str, list[int]]] = {v: {} for v in names}
    judged: list[str] = []
    envs = {v: gym.make("pivot/swe-v0", pivots=pivots, verifiers=[v]).unwrapped for v in names} if pivots else {}
    for pivot in pivots:
        variants = labelled_variants(pivot)
        if not variants:
            continue
        judged.append(pivot.id)
        labelled = [("expert", Variant(pivot.expert.content, 1, "expert", "the expert's own reply")), *variants.items()]
        texts = [v.text for _, v in labelled]
        for name in names:
            results = envs[name].score(pivot, texts)
            for (key, variant), result in zip(labelled, results, strict=True):
                _count(out[name][variant.kind], pivot.id, key, variant, result, name)
                tally = by_variant[name].setdefault(key.split(":", 1)[-1] if ":" in key else key, [0, 0])
                tally[0] += 1
                tally[1] += bool(result.accepted and not result.error)
    return {**out, "by_variant": by_variant, "pivots": judged}


def _empty() -> dict[str, Any]:
    return {"n": 0, "accepted": 0, "false_accepts": 0, "false_rejects": 0, "errors": 0, "skipped": 0, "examples": []}


def _count(row: dict[str, Any], pivot_id: str, key: str, variant: Variant, result: Any, verifier: str) -> None:
    row["n"] += 1
    verdict = (result.verdicts or {}).get(verifier)
    if result.error or (verdict is not None and verdict.error):
        row["errors"] += 1
        mistake = "error"
    elif verdict is not None and not verdict.applicable:
        row["skipped"] += 1
        mistake = None
    else:
        row["accepted"] += bool(result.accepted)
        mistake = None
        if result.accepted and not variant.expected:
            row["false_accepts"] += 1
            mistake = "false_accept"
        elif not result.accepted and variant.expected:
            row["false_rejects"] += 1
            mistake = "false_reject"
    if mistake and sum(e["mistake"] == mistake for e in row["examples"]) < EXAMPLES:
        reason = result.error or (verdict.error or verdict.reason if verdict is not None else "") or ""
        row["examples"].append({"pivot": pivot_id, "variant": key, "mistake": mistake, "reason": reason[:REASON_CHARS]})


def summary(report: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """`{verifier: {kind: "n=.. accepted=.. FA=.. FR=.. err=.."}}`: the counts of `compare`, one line each."""
    out: dict[str, dict[str, str]] = {}
    for verifier, kinds in report.items():
        if not isinstance(kinds, Mapping) or verifier == "by_variant":
            continue
        out[verifier] = {
            kind: f"n={r['n']} accepted={r['accepted']} FA={r['false_accepts']} FR={r['false_rejects']} "
            f"err={r['errors']} skipped={r['skipped']}"
            for kind, r in kinds.items()
        }
    return out


def main() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from swe_exec import judged

    from pivot_envs import load_pivots

    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("pivots", type=Path, help="a converted, replay-checked SWE run (pivots .jsonl)")
    parser.add_argument("--max-pivots", type=int, default=8, help="pivots judged (spread over the run)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = compare(judged(load_pivots(args.pivots), args.max_pivots))
    print(json.dumps(report if args.json else summary(report), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
