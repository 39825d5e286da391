"""One action in a sandbox container: its commands under one deadline, then its bounded change set.

The effect of an action is what `contract/effects.py` compares: exit status, output, the change set and
the working directory. The change set is read from the container's overlay upper folder when this
process can (`replay/diff.py`), else from `docker diff`, and bounded in paths and time
(`Limits.max_changed_paths`, `Limits.change_set_timeout`): a candidate past them is stopped with
`killed="change set cap"`, never hashed for minutes. Paths cross the container boundary as
structured data only (argv frames, NUL-delimited records, JSON), never as lines.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from pivot_sandbox.contract.effects import normalize_output
from pivot_sandbox.contract.spec import Effect, Limits, SandboxSpec
from pivot_sandbox.replay import runner as rn
from pivot_sandbox.replay.box import RUN_STATE, STATE, Box, RawRun, left_running, run, shell_run
from pivot_sandbox.replay.diff import describe, scan_upper
from pivot_sandbox.replay.shell_state import (
    normalize_processes,
    normalize_state,
    processes_against_state,
    relative_processes,
)

SIGXFSZ_EXIT = 128 + 25
UNKNOWN_CWD = "(unknown: the shell ended before the wrapper did)"  # not absolute: never a real path
CHANGE_SET_CAP = "change set cap"  # `Effect.killed` of an action whose change set is past `Limits`' bounds
PIDS_LIMIT = "pids limit"  # `Effect.killed` of an action some of whose forks the pids limit refused
# the state of a shell that ended before the wrapper could report it (`exit`), or whose report was forged
NO_STATE = {"unknown": "the shell ended before the wrapper reported its state"}

# Describes every path it is given, as the action's user (where the host cannot read the layers).
# Output is NUL-delimited "descriptor NUL path NUL": a path may hold any byte but NUL, a newline
# included, and a line-based format let `hello.txt<newline>X` pass for `hello.txt`. The
# descriptor's mode, owner and special file type match `_diff.describe` (extended attributes are read
# only where the host reads the layers: busybox has no getfattr).
HASHER = r"""cap="$1"; shift
for p in "$@"; do
  m=$(stat -c '%a %u:%g' "$p" 2>/dev/null) || m='? ?:?'
  if [ -L "$p" ]; then d="link:$(readlink "$p")"
  elif [ -d "$p" ]; then d="dir $m"
  elif [ -f "$p" ]; then
    if [ ! -r "$p" ]; then d="unreadable $m"
    else s=$(wc -c < "$p"); s=$((s + 0))
      if [ "$s" -gt "$cap" ]; then d="size:$s $m"
      else d="sha256:$(sha256sum < "$p" | cut -c1-64):$s $m"; fi
    fi
  else d="other:$(stat -c '%F %t:%T' "$p" 2>/dev/null) $m"; fi
  printf '%s\000%s\000' "$d" "$p"
done
"""
CWD_READER = "cat /.pivot-run/cwd 2>/dev/null || cat /.pivot/cwd 2>/dev/null"
HASH_CHUNK = 200  # paths per HASHER call
OOM_PROBE = "cat /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null"


@dataclass(frozen=True)
class ChangeSet:
    """What an action changed in its container's files.

    Attributes:
        files: changed path -> content descriptor ("deleted" for removed paths; see `Effect.files`).
        cwd: the working directory after the action.
        untouched: nothing of the container's files changed, metadata and the saved shell state
            included (a condition for going back to the pool).
        over: why the change set could not be read within `Limits` (too many paths, too long), else None.
    """

    files: dict[str, str]
    cwd: str
    untouched: bool
    over: str | None = None


def _in_state(path: str) -> bool:
    return any(path == d or path.startswith(d + "/") for d in (STATE, RUN_STATE))


def changed_paths(box: Box, limits: Limits, deadline: float) -> tuple[list[tuple[str, int]], bool, str | None]:
    """(path, kind) pairs of the container's changes, whether nothing changed at all, and why it stopped early.

    Read from the overlay upper folder when this process can (`replay/diff.py`: `docker diff` misses
    some same-size edits), else from `docker diff` (structured JSON). Kind is 0 changed, 1 added,
    2 deleted; the state folders are left out of the pairs, but a change there (or a change of
    metadata only, such as a folder's time) still means the container is not untouched.
    """
    if box.layers is not None:
        scan = scan_upper(box.layers, limits.max_changed_paths, deadline)
        items = [(p, k) for p, k in scan.changes if p != rn.MOUNT_POINT]
        untouched = scan.entries == 0 and scan.root == box.root
        return [(p, k) for p, k in items if not _in_state(p)], untouched, scan.over
    items = [(p, k) for p, k in box.sandbox.changes() if p != rn.MOUNT_POINT]
    if len(items) > limits.max_changed_paths:
        return [], False, f"more than {limits.max_changed_paths} changed paths"
    # the run-state folder is emptied before every action (a tmpfs in pool containers: not listed)
    untouched = all(p == RUN_STATE or p.startswith(RUN_STATE + "/") for p, _ in items)
    return [(p, k) for p, k in items if not _in_state(p)], untouched, None


def change_set(box: Box, spec: SandboxSpec, limits: Limits, cwd: str, settled: bool) -> ChangeSet:
    """The change set of the action that just ran, bounded in paths and time (`Limits.max_changed_paths`, ...).

    `settled`: nothing runs in the container any more (the runner said so), so the files can be
    hashed from here, out of the overlay folder; otherwise one `HASHER` command per 200 paths
    describes them inside the container, as the action's user. An action that changed nothing
    and reported its cwd costs no command at all.
    """
    deadline = time.monotonic() + limits.change_set_timeout
    changes, untouched, over = changed_paths(box, limits, deadline)
    if over:
        return ChangeSet({}, cwd, False, over)
    files = {p: "deleted" for p, kind in changes if kind == 2}
    present = [p for p, kind in changes if kind != 2]
    if settled and box.layers is not None:
        for path in present:
            desc = describe(box.layers, path, limits.hash_cap, deadline)
            if desc is None:
                return ChangeSet({}, cwd, False, "the change set took too long to read")
            files[path] = desc
    else:
        for i in range(0, len(present), HASH_CHUNK):
            described, over = _hash_in_container(box, spec, limits, present[i : i + HASH_CHUNK], deadline)
            if over:
                return ChangeSet({}, cwd, False, over)
            files.update(described)
    if not cwd:
        raw = run(box, [spec.shell, "-c", CWD_READER], user=spec.user, timeout=10, output_cap=64 * 1024)
        out = raw.stdout.decode(errors="replace")
        cwd = out[:-1] if out.endswith("\n") else out
    return ChangeSet(files, cwd, untouched)


def _hash_in_container(
    box: Box, spec: SandboxSpec, limits: Limits, paths: list[str], deadline: float
) -> tuple[dict[str, str], str | None]:
    """Descriptors of `paths` from one `HASHER` run (NUL-delimited records), and why it failed if it did."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return {}, "the change set took too long to read"
    res = run(
        box,
        [spec.shell, "-c", HASHER, "hash", str(limits.hash_cap), *paths],
        user=spec.user,
        timeout=remaining,
        output_cap=4 * 1024 * 1024,
    )
    if res.killed:
        return {}, f"the change set could not be read ({res.killed})"
    fields = res.stdout.split(b"\0")
    records = dict(zip(fields[1::2], fields[0:-1:2], strict=False))
    if len(fields) != 2 * len(paths) + 1 or len(records) != len(paths):
        # extra or repeated records: something else wrote to the hasher's output (a process the
        # action left, through docker exec); nothing of it is taken
        return {}, "the change set could not be read (unexpected records)"
    out = {}
    for path in paths:
        desc = records.get(path.encode(errors="surrogateescape"))
        if desc is None:
            # a path the hasher did not describe is not guessed at: the candidate fails with the reason
            return {}, f"the change set could not be read (no record for {path!r})"
        out[path] = desc.decode(errors="replace")
    return out, None


def classify_kill(box: Box, raw: RawRun) -> str | None:
    """Why the sandbox stopped the command: our own kill, the file size cap, or the OOM killer."""
    if raw.killed:
        return raw.killed
    if raw.fork_failures:
        # what ran and what did not depends on which forks lost the race: no effect to compare
        return PIDS_LIMIT
    if raw.exit_code == SIGXFSZ_EXIT:
        return "file size cap"
    if raw.exit_code == 137:
        if raw.oom is not None:  # the runner read the cgroup's OOM kills
            return "oom" if raw.oom else None
        probe = run(box, ["sh", "-c", OOM_PROBE], user="0", timeout=5, output_cap=4096)
        for line in probe.stdout.decode(errors="replace").splitlines():
            name, _, value = line.partition(" ")
            if name == "oom_kill" and value.strip().isdigit() and int(value) > 0:
                return "oom"
    return None


def effect_of(box: Box, spec: SandboxSpec, limits: Limits, commands: Sequence[str]) -> tuple[Effect, bool]:
    """Run the commands of one action in order (shell state carried between them) and capture the effect.

    `Limits.action_timeout` and `Limits.output_cap` bound the action as a whole: each command gets
    what its predecessors left of them (four `sleep 9` against 10 s stop in the second one).
    Reading the change set has its own bounds; a change set past them is the effect
    `killed="change set cap"`.

    Also says whether the container may be clean: False when the action was stopped or changed
    anything of the container's files (metadata and the saved shell state included). With a
    runner, its report that nothing is left (processes, IPC objects, shared memory, mounts)
    settles the rest; through `docker exec`, `is_pristine` checks the processes.
    """
    deadline = time.monotonic() + limits.action_timeout
    out, err = bytearray(), bytearray()
    raw = RawRun(0, b"", b"", None)
    for i, command in enumerate(commands):
        last = i == len(commands) - 1
        remaining, budget = deadline - time.monotonic(), limits.output_cap - len(out) - len(err)
        if remaining <= 0 or budget <= 0:
            return _effect(limits, None, out, err, {}, "", "timeout" if remaining <= 0 else "output cap"), False
        raw = shell_run(
            box,
            spec,
            limits,
            command,
            src=STATE if i == 0 else RUN_STATE,
            dst=RUN_STATE,
            keep=not last,
            timeout=remaining,
            output_cap=budget,
        )
        out += raw.stdout
        err += raw.stderr
        killed = classify_kill(box, raw)
        if killed:
            return _effect(limits, None, out, err, {}, "", killed), False
    settled = box.channel is not None and raw.left == 0
    # "" after a command is an unknown cwd (the shell ended early): never read from files the action could write
    cwd = (raw.cwd or UNKNOWN_CWD) if commands else ""
    # what the action left running (the runner listed it before killing it; through docker exec, look now)
    left = left_running(box, raw)
    procs = normalize_processes(left)
    if box.running:  # a state that runs processes: the action's are those it started, stopped or changed
        listing = box.running_listing
        procs = processes_against_state(left, listing) if listing else relative_processes(procs, box.running)
    state = normalize_state(raw.state) if raw.state is not None else dict(NO_STATE)
    changes = change_set(box, spec, limits, cwd, settled)
    if changes.over:
        return _effect(limits, None, out, err, {}, "", CHANGE_SET_CAP, changes.over), False
    # the runner stopped what the state ran: a box whose state runs processes is no longer at it
    clean = changes.untouched and (box.channel is None or raw.left == 0) and not box.running
    effect = _effect(limits, raw.exit_code, out, err, changes.files, changes.cwd, None)
    return replace(effect, state=state if commands else {}, processes=procs), clean


def _effect(
    limits: Limits,
    code: int | None,
    out: bytes,
    err: bytes,
    files: dict[str, str],
    cwd: str,
    killed: str | None,
    why: str = "",
) -> Effect:
    cap = limits.compare_chars
    return Effect(
        code,
        normalize_output(out.decode(errors="replace"), cap),
        normalize_output(err.decode(errors="replace"), cap),
        files,
        cwd,
        killed,
        why,
    )
