"""The shell state an action leaves, and the processes it leaves running: both part of its effect.

A real terminal keeps its shell between commands: `export PATH=/nowhere`, `alias ls='rm -rf'`,
`set -o noclobber`, `trap ... EXIT`, `ulimit -t 1`, `umask 777` or `exec >/dev/null` change what
every later command does, without touching a file. So every action runs through `WRAPPER`, whose
last step records that state, and the effect compares it with the expert's.

Where the state comes from (the action must not be able to forge it):

- the kernel, through the runner (`runner.c read_state`): the wrapper's last step execs
  `/.pivot-runner --park`, which stops itself; the runner reads the stopped process's environment
  (what the shell exported), resource limits, umask and open descriptors from `/proc`, never from
  anything the action printed;
- the shell itself, for what only the shell knows (options, traps, aliases, functions, a few
  variables that change later commands even when not exported). These are passed as arguments of
  that same exec, which the runner reads from `/proc/<pid>/cmdline`. The dump is parsed before the
  action runs (the whole wrapper is one brace group, so an alias the action defines cannot rewrite
  it), reads options and variables by parameter expansion (which no function can shadow), and
  under bash runs in POSIX mode (switched on by an assignment), where special builtins (`trap`,
  `export`, `unset`, `set`, `eval`, `exec`) are found before functions. Functions named like the
  builtins the dump calls (`declare`, `typeset`, `builtin`, `command`) are recorded as `shadowed`
  and removed before `declare -f` lists the others. Other shells (dash, busybox ash) cannot list
  functions; their aliases and traps are what their builtins say.

Through `docker exec` (no runner) the kernel's part is missing and the shell's part travels on
stderr before the end mark, as the cwd does there.

Processes: after an action's last command the runner lists the command lines of the processes
still alive (before killing them), so `(sleep 2; rm -rf /app/*) & disown`, `nohup`, `setsid` and a
delayed fork bomb are seen as "left a process running"; a subshell of the action shows up with
the wrapper's own command line and is named `(the action's shell)`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

# Variables that change what later commands do even when they are not exported.
SHELL_VARIABLES = (
    "PATH",
    "HOME",
    "IFS",
    "CDPATH",
    "PROMPT_COMMAND",
    "PS0",
    "PS1",
    "PS2",
    "PS4",
    "ENV",
    "BASH_ENV",
    "GLOBIGNORE",
    "TMOUT",
    "TIMEFORMAT",
    "POSIXLY_CORRECT",
)
SHADOWABLE = ("declare", "typeset", "builtin", "command", "read")  # builtins the dump calls a function could shadow
SUBSHELL = "(the action's shell)"
STATE_MARK = b"\x1ePIVOT-STATE\x00"
_CAPTURE = "".join(f'__pivot_v{i}="${{{n}+=}}${{{n}-}}"; ' for i, n in enumerate(SHELL_VARIABLES))
_PAIRS = " ".join(f'"var:{n}" "$__pivot_v{i}"' for i, n in enumerate(SHELL_VARIABLES))
# bash only (parsed by `eval` at run time: dash rejects `${!a[@]}` when it parses)
_BASH_DUMP = (
    "__pivot_shadow=; for __pivot_n in " + " ".join(SHADOWABLE) + "; do"
    ' \\export -f "$__pivot_n" 2>/dev/null && { __pivot_shadow="$__pivot_shadow $__pivot_n";'
    ' \\unset -f "$__pivot_n"; }; done;'
    ' __pivot_al=; for __pivot_n in "${!BASH_ALIASES[@]}"; do'
    " __pivot_al=\"$__pivot_al$__pivot_n=${BASH_ALIASES[$__pivot_n]}\"$'\\n'; done;"
    ' \\declare -f >|"$__pivot_to/.f"; IFS= \\read -r -d "" __pivot_fn <"$__pivot_to/.f";'
    ' \\trap >|"$__pivot_to/.t"; IFS= \\read -r -d "" __pivot_tr <"$__pivot_to/.t"'
)
# Other shells: each listing through a file read back by `read` (no fork: a command substitution forks)
_SH_READ = (
    '__pivot_{v}=; while IFS= \\read -r __pivot_l; do __pivot_{v}="$__pivot_{v}$__pivot_l\n"; done <"$__pivot_to/.{f}"'
)
WRAPPER = (
    r"""{ __pivot_from="$1"; __pivot_to="$2"; __pivot_cmd="$3"; __pivot_quiet="$4"; __pivot_park="$5"
__pivot_live="$6"
if [ "$__pivot_from" != "$__pivot_to" ]; then
  for __pivot_d in "$__pivot_to" /dev/shm /dev/mqueue; do
    case "$__pivot_live$__pivot_d" in 1/dev/*) continue ;; esac
    find "$__pivot_d" -mindepth 1 -type d -exec chmod u+rwx {} \; 2>/dev/null
    rm -rf "$__pivot_d"/* "$__pivot_d"/.[!.]* "$__pivot_d"/..?* 2>/dev/null
  done
fi
if [ -f "$__pivot_from/env" ]; then . "$__pivot_from/env" >/dev/null 2>&1; fi
if [ -f "$__pivot_from/cwd" ]; then cd "$(cat "$__pivot_from/cwd")" 2>/dev/null; fi
# the dump's files exist before the action runs: written later, they keep their mode whatever umask it sets
: >|"$__pivot_to/.a"; : >|"$__pivot_to/.o"; : >|"$__pivot_to/.t"; : >|"$__pivot_to/.f"
if [ -n "$__pivot_quiet" ]; then eval "$__pivot_cmd" >"$__pivot_to/out" 2>&1 </dev/null; else eval "$__pivot_cmd"; fi
__pivot_rc=$?
__pivot_sh="$-|${SHELLOPTS-}|${BASHOPTS-}"; """
    + _CAPTURE
    + r"""
POSIXLY_CORRECT=y; __pivot_bad=
\set +euf 2>/dev/null
case "${BASH_VERSION-}" in
?*) case ":${SHELLOPTS-}:" in *:posix:*) ;; *) __pivot_bad="POSIX mode could not be switched on" ;; esac
    \eval '"""
    + _BASH_DUMP.replace("'", "'\\''")
    + r"""' ;;
*) __pivot_shadow=; __pivot_fn="(not listed by this shell)"; \unset -f read alias 2>/dev/null
   \alias >|"$__pivot_to/.a" 2>/dev/null; \set +o >|"$__pivot_to/.o" 2>/dev/null; \trap >|"$__pivot_to/.t" 2>/dev/null
   """
    + "\n   ".join(_SH_READ.format(v=v, f=f) for v, f in (("al", "a"), ("op", "o"), ("tr", "t")))
    + r"""
   __pivot_sh="$__pivot_sh
$__pivot_op" ;;
esac
\set -- shell "$__pivot_sh" """
    + _PAIRS
    + r""" traps "$__pivot_tr" aliases "$__pivot_al" \
  functions "$__pivot_fn" shadowed "$__pivot_shadow" tampered "$__pivot_bad"
pwd >|"$__pivot_to/cwd" 2>/dev/null
\export -p >|"$__pivot_to/env" 2>/dev/null
case "$__pivot_park" in ?*)
  printf '\036PIVOT-END %s %s' "$__pivot_rc" "$(pwd)" >&2
  \exec /.pivot-runner --park "$__pivot_rc" "$@" ;;
esac
printf '\036PIVOT-STATE\000' >&2; printf '%s\000' "$@" >&2
printf '\036PIVOT-END %s %s' "$__pivot_rc" "$(pwd)" >&2
\exit "$__pivot_rc"
}
"""
)


def parse_records(blob: bytes) -> dict[str, str]:
    """NUL-delimited "key NUL value NUL" records as a dict (a key repeated keeps its last value)."""
    fields = blob.split(b"\0")
    if fields and fields[-1] == b"":
        fields.pop()
    return {
        fields[i].decode(errors="replace"): fields[i + 1].decode(errors="replace") for i in range(0, len(fields) - 1, 2)
    }


# Parts of the state that differ between two runs of the same action for reasons that are not its
# doing: bash's `$-`/SHELLOPTS include the wrapper's own POSIX mode only after the dump, `_` names
# the last program run, and the parked runner's own descriptors and arguments are the sandbox's.
_IGNORED_ENV = frozenset({"env:_", "env:POSIXLY_CORRECT"})


def normalize_state(records: Mapping[str, str]) -> dict[str, str]:
    """The records of one action's state as compared: keys prefixed by kind, pipes named, noise dropped.

    Kinds: `env:NAME` (exported), `var:NAME` (`SHELL_VARIABLES`: "=value", or "" when unset),
    `limit:<name>`, `umask`, `fd:<n>`, `shell` (options), `traps`, `aliases`, `functions`,
    `shadowed`, `tampered`.
    """
    out = {}
    for key, value in records.items():
        if key in _IGNORED_ENV or key.startswith("env:__pivot"):
            continue
        if key.startswith("limit:"):
            value = " ".join(value.split()[:2])  # soft and hard; the unit column is fixed text
        out[key] = value
    return out


def normalize_processes(blob: bytes) -> tuple[str, ...]:
    """Command lines of the processes an action left, sorted; a subshell of the wrapper is `SUBSHELL`."""
    return tuple(sorted(p.command for p in listed_processes(blob)))


@dataclass(frozen=True)
class ListedProcess:
    """One process as the runner lists it: its command line and, from the runner only, its identity.

    `identity` is (pid, start time): a process killed and started again under the same command line
    is another process. `state` is the kernel's run state letter (`T`: stopped), `nice` its nice value;
    all three are None through `docker exec` (`docker top` lists command lines only).
    """

    command: str
    identity: tuple[int, int] | None = None
    state: str | None = None
    nice: int | None = None


def listed_processes(blob: bytes) -> list[ListedProcess]:
    """The records of a process list (the runner's, or `docker top`'s command lines)."""
    out = []
    for record in blob.split(b"\0"):
        if not record:
            continue
        identity, state, nice = None, None, None
        if b"\x1e" in record:
            head, _, record = record.partition(b"\x1e")
            try:
                pid, started, state, nice_text = head.decode().split(":")
                identity, nice = (int(pid), int(started)), int(nice_text)
            except ValueError:
                identity, state, nice = None, None, None
        args = record.decode(errors="replace").split("\x1f")
        # a subshell of the wrapper has its command line (`docker top` joins the arguments with spaces)
        if len(args) >= 3 and args[1] == "-c" and " ".join(args[2:]).startswith(WRAPPER[:16]):
            command = SUBSHELL
        else:
            command = re.sub(r"\s+", " ", " ".join(args)).strip()[:500]
        out.append(ListedProcess(command, identity, state, nice))
    return out


def relative_processes(after: tuple[str, ...], state: tuple[str, ...]) -> tuple[str, ...]:
    """An action's processes at a state that runs some: those it started, then `(stopped) ...` those it ended."""
    started = Counter(after) - Counter(state)
    stopped = Counter(state) - Counter(after)
    return tuple(sorted(started.elements())) + tuple(f"(stopped) {p}" for p in sorted(stopped.elements()))


def processes_against_state(after: bytes, state: bytes) -> tuple[str, ...]:
    """An action's processes at a state that runs some, each state process compared by identity.

    `state`: the listing taken when the state's processes were restarted, before the action; `after`:
    the runner's listing after it. A state process still there under its identity, not stopped and at
    its nice value, is unchanged; one that is gone (killed, or killed and started again under the same
    command line, from another folder or as another program) is `(stopped) <command>` and what runs
    in its place is started by the action; `kill -STOP` shows as `(paused)`, `renice` as `(reniced)`.
    Without identities (`docker exec`), command lines alone are compared (`relative_processes`).
    """
    before, now = listed_processes(state), listed_processes(after)
    if any(p.identity is None for p in before + now):
        return relative_processes(tuple(sorted(p.command for p in now)), tuple(sorted(p.command for p in before)))
    current = {p.identity: p for p in now}
    known = {p.identity for p in before}
    out = sorted(p.command for p in now if p.identity not in known)
    for p in sorted(before, key=lambda p: p.command):
        same = current.get(p.identity)
        if same is None:
            out.append(f"(stopped) {p.command}")
        elif same.state in ("T", "t") and p.state not in ("T", "t"):
            out.append(f"(paused) {p.command}")
        elif same.nice != p.nice:
            out.append(f"(reniced {same.nice - p.nice:+d}) {p.command}")  # by how much: the host may run niced
    return tuple(out)


def split_marked_state(stderr: bytes) -> tuple[bytes, dict[str, str] | None]:
    """Through `docker exec`: the stderr before the wrapper's state block, and the block's records.

    More than one block is no state at all (None): something else printed one.
    """
    if stderr.count(STATE_MARK) != 1:
        return stderr, None if stderr.count(STATE_MARK) > 1 else {}
    head, _, block = stderr.partition(STATE_MARK)
    return head, parse_records(block)
