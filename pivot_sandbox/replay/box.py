"""The box every backend hands the shared replay code: a started sandbox and how its commands reach it.

Commands with a killing timeout and capped output (one action's commands and change set:
`replay/action.py`). A command reaches its sandbox through the in-sandbox runner (`replay/runner.py`,
one socket round trip) when the sandbox has one, else through what the backend offers instead
(`Sandbox.exec`: `docker exec` on the Docker wing). Nothing here knows which engine runs the box.

Every action runs through `WRAPPER` (`replay/shell_state.py`): it restores the shell state (working
directory and exported variables) that earlier commands left in a state folder, evaluates the
command, saves the new state, so that `cd project` in one command holds for the next one as in a
terminal, and reports the whole shell state the action left (`RawRun.state`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from pivot_sandbox.contract.spec import Limits, SandboxSpec
from pivot_sandbox.replay import runner as rn
from pivot_sandbox.replay.diff import Layers
from pivot_sandbox.replay.shell_state import WRAPPER, parse_records, split_marked_state

STATE = "/.pivot"  # shell state saved by replay (part of every snapshot)
RUN_STATE = "/.pivot-run"  # per-action state of a verification run (a tmpfs in pool containers)
IDLE = ["sleep", "2147483647"]
END_MARK = b"\x1ePIVOT-END "
FORGED_MARK = "end mark forged"  # `RawRun.killed` when stderr holds more than the wrapper's one end mark
# counts what an action can leave that is no file nor process: System V IPC rows, POSIX shm and queues
RESIDUE_PROBE = (
    "{ for t in shm sem msg; do tail -n +2 /proc/sysvipc/$t; done; ls -A /dev/shm; ls -A /dev/mqueue; }"
    " 2>/dev/null | wc -l"
)


@dataclass(frozen=True)
class RawRun:
    """Output of one command: exit code, raw bytes, why it was killed (None if it ended), cwd after it.

    `oom` and `left` (processes still running afterwards) come from the runner; None when unknown.
    `state`: the shell state the wrapper left (`replay/shell_state.py` records; None when it never said:
    the shell ended first, or the report was forged); `procs`: command lines of the processes the
    action left running (runner: after an action's last command); `fork_failures`: forks the pids
    limit refused during the command (runner only).
    """

    exit_code: int | None
    stdout: bytes
    stderr: bytes
    killed: str | None
    cwd: str = ""
    oom: bool | None = None
    left: int | None = None
    state: dict[str, str] | None = None
    procs: bytes = b""
    fork_failures: int = 0


class Sandbox(Protocol):
    r"""What a box's sandbox does for the shared replay code; each backend's wing implements it.

    `exec` runs a command without the runner (Docker's `docker exec`; a backend whose sandboxes
    always have a runner raises `SandboxError`); `processes` lists the command lines the engine sees
    (`\x1f` between words, NUL after each; b"" when it cannot); `changes` is the engine's own change
    list, `(path, kind)` with kind 0 changed, 1 added, 2 deleted, for boxes whose overlay folders
    this process cannot read; `put_archive` unpacks a tar into the sandbox as root.
    """

    @property
    def id(self) -> str:
        """The sandbox's id (a container id, a namespace sandbox's name)."""
        ...

    def kill(self) -> None:
        """Kill everything in the sandbox; it is never used again."""
        ...

    def oom_killed(self) -> bool:
        """Whether the kernel's OOM killer ended something in it."""
        ...

    def exec(self, argv: Sequence[str], *, user: str, timeout: float, output_cap: int, marked: bool) -> RawRun:
        """Run `argv` without the runner, stopped at `timeout` or `output_cap` bytes."""
        ...

    def processes(self) -> bytes:
        """The command lines of the processes the engine lists, the sandbox's own left out."""
        ...

    def changes(self) -> list[tuple[str, int]]:
        """The engine's list of changed paths since the sandbox started."""
        ...

    def put_archive(self, path: str, data: bytes) -> None:
        """Unpack the tar `data` at `path` inside the sandbox."""
        ...


@dataclass(frozen=True)
class Box:
    """A started sandbox and how its commands reach it: its runner's channel, or `Sandbox.exec`."""

    sandbox: Sandbox
    channel: rn.Channel | None = None
    holder: Box | None = None  # the retired container whose network namespace it joined (`docker/netns.py`)
    layers: Layers | None = None  # its overlay folders, when this process can read them (`replay/diff.py`)
    root: tuple[int, ...] | None = None  # its upper folder's own metadata when it started (`_diff.root_state`)
    # False for a replay with registry access (the host's network): never a namespace for candidates
    offline: bool = True
    # the processes its state runs, started again on a snapshot (`_restore.restart`): such a box is never reused
    running: tuple[str, ...] = ()
    # the runner's listing of those processes once restarted (their identities: `processes_against_state`)
    running_listing: bytes = b""

    @property
    def id(self) -> str:
        """The sandbox's id."""
        return self.sandbox.id


def settle(box: Box) -> bool:
    """Kill whatever still runs in a runner container; True when nothing but the runner is left."""
    if box.channel is None:
        return False
    try:
        return box.channel.call(["true"], uid=-1, gid=-1, timeout=5, output_cap=1024).left == 0
    except rn.RunnerLost:
        return False


def run(
    box: Box,
    argv: Sequence[str],
    *,
    user: str,
    timeout: float,
    output_cap: int,
    marked: bool = False,
    keep: bool = False,
    clean_ipc: bool = False,
    list_left: bool = False,
) -> RawRun:
    """Run `argv` as `user`, stopped when it runs past `timeout` or prints more than `output_cap` bytes.

    `keep` leaves the command's background processes running (replay, and every command of an
    action but its last); `clean_ipc` first removes the user's System V IPC objects (runner only);
    `list_left` lists what is left running in `procs` even when it is kept (runner only).
    `marked`: the command is `WRAPPER`, whose end mark carries the exit status and the cwd.
    """
    ids = rn.parse_user(user)
    if box.channel is None or ids is None:
        return box.sandbox.exec(argv, user=user, timeout=timeout, output_cap=output_cap, marked=marked)
    try:
        reply = box.channel.call(
            argv,
            uid=ids[0],
            gid=ids[1],
            timeout=timeout,
            output_cap=output_cap,
            clean_ipc=clean_ipc,
            keep=keep,
            list_left=list_left,
        )
    except rn.RunnerLost as e:
        # the runner died (the OOM killer, a root action that killed everything) or hung: the
        # container is in no known state; it is killed, and never reused
        box.sandbox.kill()
        why = "oom" if box.sandbox.oom_killed() else ("timeout" if e.timed_out else "runner lost")
        return RawRun(None, b"", b"", why)
    code = reply.exit_code if reply.exit_code is not None else 128 + reply.signal
    # the cwd is the kernel's, read by the runner while the wrapper's last step was parked; a
    # command that ended the shell before that (`exit`) has none ("") and nothing it printed stands in
    cwd = reply.cwd or ""
    raw = RawRun(
        None if reply.killed else code,
        reply.stdout,
        reply.stderr,
        reply.killed,
        cwd=cwd,
        oom=reply.oom,
        left=reply.left,
        # read from the kernel while the wrapper was parked; none when it never parked
        state=parse_records(reply.state) if reply.cwd is not None else None,
        procs=reply.procs,
        fork_failures=reply.fork_failures,
    )
    return marked_run(raw, marked)


def marked_run(raw: RawRun, marked: bool) -> RawRun:
    """The wrapper reported its exit status and cwd at the end of stderr: no exec_inspect round trip.

    Through the runner, its exit status (the wrapper exits with the command's) and the cwd it read
    from the kernel win over the mark's: `printf` can write any mark. Through `docker exec` the
    mark is all there is. A process the command left in the background may print marks of its own,
    before or after the real one, so more than one mark is no report at all: the run counts as
    stopped ("end mark forged"), and a candidate doing it scores 0 with that reason.
    """
    if not marked or raw.killed:
        return raw
    if raw.stderr.count(END_MARK) > 1:
        return replace(raw, exit_code=None, killed=FORGED_MARK)
    cut = raw.stderr.rfind(END_MARK)
    if cut >= 0:
        code, _, cwd = raw.stderr[cut + len(END_MARK) :].decode(errors="replace").partition(" ")
        if code.strip().lstrip("-").isdigit():
            status = raw.exit_code if raw.exit_code is not None else int(code)
            # `oom` is known only to the runner: a runner's run keeps the cwd and state it read, even ""
            if raw.oom is not None:
                return replace(raw, exit_code=status, stderr=raw.stderr[:cut])
            stderr, state = split_marked_state(raw.stderr[:cut])
            return replace(raw, exit_code=status, stderr=stderr, cwd=cwd.strip(), state=state or None)
    return raw


def shell_run(
    box: Box,
    spec: SandboxSpec,
    limits: Limits,
    command: str,
    *,
    src: str,
    dst: str,
    quiet: bool = False,
    timeout: float | None = None,
    keep: bool = True,
    output_cap: int | None = None,
    list_left: bool = False,
    replaying: bool = False,
) -> RawRun:
    """Run one shell command through `WRAPPER` (state read from `src`, written to `dst`).

    A command that starts from the saved state (`src != dst`) begins a verification run: it also
    clears what an earlier action of a reused container may have left in System V IPC, POSIX shared
    memory and message queues, except in a box whose state runs processes (`Box.running`, never
    reused) and in a replay (`replaying`, which moves the state from folder to folder): what those
    hold there is the state's. `list_left`: the runner lists what runs after the command.
    `timeout` and `output_cap` default to the limits' (what an action's later commands get is less).
    """
    # through the runner, the wrapper ends parked so that the runner reads its cwd (`runner.c`)
    park = box.channel is not None and rn.parse_user(spec.user) is not None
    keeps_ipc = bool(box.running) or replaying
    live = "1" if keeps_ipc else ""
    argv = [spec.shell, "-c", WRAPPER, "pivot", src, dst, command, "1" if quiet else "", "1" if park else "", live]
    return run(
        box,
        argv,
        user=spec.user,
        timeout=timeout or limits.action_timeout,
        output_cap=limits.output_cap if output_cap is None else output_cap,
        marked=True,
        keep=keep,
        clean_ipc=src != dst and not keeps_ipc,
        list_left=list_left,
    )


def running_processes(box: Box) -> bytes:
    """The command lines of the container's processes but its own, as the runner lists them (nothing stopped).

    Through the runner, a command that runs nothing asks it to list what runs; without one, the
    engine's process table (`Sandbox.processes`).
    """
    if box.channel is not None:
        return run(box, ["true"], user="0", timeout=10, output_cap=1024, keep=True, list_left=True).procs
    return box.sandbox.processes()


def left_running(box: Box, raw: RawRun) -> bytes:
    """What runs after the command `raw` answered: the runner's list in its reply, else (`docker exec`) a look now."""
    return raw.procs if box.channel is not None else running_processes(box)


def read_text(box: Box, path: str, user: str = "0") -> str:
    """The text of a small file inside the container ("" when missing).

    A read never stops what runs in the container: a server a session's command started must be
    there for the next command and for the task's tests (`keep`; an action's own processes are
    stopped by the runner after the action's last command, not by a later read).
    """
    res = run(box, ["cat", path], user=user, timeout=10, output_cap=1024 * 1024, keep=True)
    return res.stdout.decode(errors="replace") if res.exit_code == 0 else ""
