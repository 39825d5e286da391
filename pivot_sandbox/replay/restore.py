"""Bringing a sandbox to a pivot state: replay (files and processes), and restart on a snapshot (processes).

Every backend replays a state the same way (`replay_state`): the state folder and set-up as root,
then the history as the user, each command through the wrapper so that the shell state carries
over. A snapshot of the result keeps its files, not its processes: a server the history started
(`node server.js &`, `nohup`, a daemon such as busybox `httpd`, a tmux server) is gone from every
sandbox started on the snapshot. So the replay also records which processes are left running and
which history commands started them (`Running`); each sandbox started on the snapshot runs those
commands again in the shell state they ran in, and waits until the same processes run and the same
sockets listen (`restart`), before a candidate or an episode gets it.

What cannot be restored that way is refused with the reason (`ProcessesNotRestored`), never judged
on a state without them: a process the set-up started (set-up steps are the dataset's, often
installs: not re-run per candidate), and a restart that does not bring back the same processes.
"""

from __future__ import annotations

import shlex
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from pivot_sandbox.contract.spec import Limits, SandboxSpec
from pivot_sandbox.errors import ProcessesNotRestored, SandboxError
from pivot_sandbox.replay.box import RUN_STATE, STATE, Box, RawRun, left_running, run, running_processes, shell_run
from pivot_sandbox.replay.shell_state import normalize_processes

PRE_STATE = f"{STATE}/pre"  # the shell state before each history command that started a process still running
LISTENING = "cat /proc/net/tcp /proc/net/tcp6 /proc/net/unix 2>/dev/null"
CPU_TIME = "cat /proc/[0-9]*/stat 2>/dev/null"  # every process's CPU time, in its fields 14 to 17
RESTART_TIMEOUT = 30.0  # seconds for the restarted processes to run and listen again
SETTLE = 2.0  # seconds the sockets must stay the same, and the processes idle, when a state's are first measured
STARTED = 0.3  # seconds what a history command started must stay the same, and idle, before the replay lists it
IDLE_SHARE = 0.05  # of one CPU: what a started server uses while nobody asks it anything
CLOCK_TICKS = 100  # per second, in /proc/<pid>/stat (USER_HZ: 100 on every Linux this runs on)
POLL = 0.05


@dataclass(frozen=True)
class Running:
    """The processes a replayed state holds, and how to start them again on its snapshot.

    Attributes:
        processes: their command lines (`normalize_processes`) when the replay ended.
        launchers: (index, command) of the history commands that started them; each runs again
            from the shell state saved before it (`PRE_STATE/<index>`).
        from_setup: processes the set-up left running (never re-run: see the module docstring).
        listening: the sockets listening once they settled (`tcp <addr:port>`, `unix <path>`),
            measured on the first sandbox restarted on the snapshot; None until then.
    """

    processes: tuple[str, ...] = ()
    launchers: tuple[tuple[int, str], ...] = ()
    from_setup: tuple[str, ...] = ()
    listening: tuple[str, ...] | None = None

    def __bool__(self) -> bool:
        return bool(self.processes)

    def refusal(self) -> ProcessesNotRestored | None:
        """Why no sandbox on the snapshot can hold these processes again (None when restart can)."""
        if self.from_setup:
            return ProcessesNotRestored(self.from_setup, "the set-up started them (set-up steps are not re-run)")
        return None


def replay_state(box: Box, spec: SandboxSpec, limits: Limits, history: Sequence[str]) -> Running:
    """Bring a fresh sandbox to the pivot state: the state folder and set-up as root, then the history as the user.

    Returns what the set-up and history left running (empty when nothing); the shell state before
    each command that started one is kept in `PRE_STATE` for `restart`.

    Raises:
        SandboxError: a set-up step failed, or a history command was stopped (timeout, a limit).
    """
    _set_up(box, spec, limits)
    if not history:
        return attribute([], normalize_processes(running_processes(box)), history)
    listed = _replay_history(box, spec, limits, history)
    running = attribute(listed[:-1], listed[-1], history)
    _keep_launch_states(box, spec, limits, len(history), running)
    return running


def _set_up(box: Box, spec: SandboxSpec, limits: Limits) -> None:
    """As root: the state folder (cwd and env of the shell), the set-up steps, the working directory handed over."""
    first = shlex.quote(spec.first_dir)
    init = (
        f"mkdir -p {STATE} {RUN_STATE} {spec.workdir} {first} && chmod 1777 {RUN_STATE}"
        f" && printf '%s' {first} > {STATE}/cwd && : > {STATE}/env"
    )
    owner = [] if spec.runs_as_root else [f"chown -R {spec.user} {STATE} {spec.workdir} {first}"]
    steps = [("state folder creation", init)] + [(f"set-up step {i + 1}", c) for i, c in enumerate(spec.setup)]
    for what, command in steps + [("handing the working directory to the user", c) for c in owner]:
        raw = _root(box, spec, limits, f"cd {spec.workdir} 2>/dev/null; {command}")
        if raw.exit_code != 0:
            tail = (raw.stderr or raw.stdout).decode(errors="replace").strip()[-300:]
            raise SandboxError(f"{what} failed in {spec.image} ({raw.killed or raw.exit_code}): {tail}")


def _replay_history(box: Box, spec: SandboxSpec, limits: Limits, history: Sequence[str]) -> list[tuple[str, ...]]:
    """Run the history as the user, each command from the shell state the one before left; what ran before each.

    Item i is what ran before command i; the last item, what runs after the history.
    """
    # command i reads its shell state from PRE_STATE/i and writes the next one's to PRE_STATE/i+1, so
    # the state before each command is kept with no extra step; the runner lists what runs after
    # each command in the same reply
    folders = " ".join(f"{PRE_STATE}/{i}" for i in range(len(history) + 1))
    prepare = f"mkdir -p {folders} && cp -p {STATE}/cwd {STATE}/env {PRE_STATE}/0/"
    listed = [
        _save_and_list(
            box, spec, limits, prepare + ("" if spec.runs_as_root else f" && chown -R {spec.user} {PRE_STATE}")
        )
    ]
    for i, command in enumerate(history):
        src, dst = f"{PRE_STATE}/{i}", f"{PRE_STATE}/{i + 1}"
        raw = shell_run(
            box,
            spec,
            limits,
            command,
            src=src,
            dst=dst,
            quiet=True,
            timeout=limits.replay_timeout,
            list_left=True,
            replaying=True,
        )
        if raw.killed:
            raise SandboxError(f"history command {command[:60]!r} was stopped during replay: {raw.killed}")
        found = normalize_processes(left_running(box, raw))
        # it started something: listed once it has started (a job may compute first, then exec)
        if Counter(found) - Counter(listed[-1]):
            found = settled(box, lambda b: normalize_processes(running_processes(b)), STARTED)
        listed.append(found)
    return listed


def _keep_launch_states(box: Box, spec: SandboxSpec, limits: Limits, n_history: int, running: Running) -> None:
    """Make the state after the history the snapshot's; of the saved states, keep only those a restart reads."""
    keep = {i for i, _ in running.launchers}
    drop = " ".join(f"{PRE_STATE}/{i}" for i in range(n_history + 1) if i not in keep)
    last = f"{PRE_STATE}/{n_history}"
    finish = f"cp -p {last}/cwd {last}/env {STATE}/ && rm -rf {drop}" + ("" if keep else f" && rm -rf {PRE_STATE}")
    raw = _root(box, spec, limits, finish)
    if raw.exit_code != 0:
        raise SandboxError(f"saving the state after the history failed in {spec.image}: {raw.stderr[-200:]!r}")


def attribute(listed: Sequence[tuple[str, ...]], final: tuple[str, ...], history: Sequence[str]) -> Running:
    """Which history commands started the processes running at the end (`listed[i]`: what ran before command i)."""
    if not final:
        return Running()
    left = Counter(final)
    from_setup = tuple(sorted((Counter(listed[0]) & left).elements())) if listed else final
    launchers = []
    for i in range(len(history)):
        after = Counter(listed[i + 1]) if i + 1 < len(listed) else Counter(final)
        if (after - Counter(listed[i])) & left:
            launchers.append((i, history[i]))
    return Running(final, tuple(launchers), from_setup)


def restart(box: Box, spec: SandboxSpec, limits: Limits, running: Running) -> Box:
    """Run the state's launchers again in a sandbox fresh on its snapshot; the box, marked with its processes.

    Waits until the same processes run and, once measured (`Running.listening`), the same sockets
    listen. Raises `ProcessesNotRestored` when they do not within `RESTART_TIMEOUT`.
    """
    refused = running.refusal()
    if refused is not None:
        raise refused
    for i, command in running.launchers:
        raw = shell_run(
            box, spec, limits, command, src=f"{PRE_STATE}/{i}", dst=RUN_STATE, quiet=True, timeout=limits.replay_timeout
        )
        if raw.killed:
            raise ProcessesNotRestored(running.processes, f"restarting {command[:60]!r} was stopped: {raw.killed}")
    deadline = time.monotonic() + RESTART_TIMEOUT
    want = Counter(running.processes)
    while True:
        listing = running_processes(box)
        now = normalize_processes(listing)
        sockets = listening(box) if running.listening else ()
        if Counter(now) == want and set(running.listening or ()) <= set(sockets):
            return replace(box, running=running.processes, running_listing=listing)
        if time.monotonic() > deadline:
            got = f"{list(now)} running" + (f", {list(sockets)} listening" if running.listening else "")
            raise ProcessesNotRestored(running.processes, f"restarted, the sandbox had {got}")
        time.sleep(POLL)


def measured(box: Box, spec: SandboxSpec, limits: Limits, running: Running, discard: Callable[[Box], None]) -> Running:
    """`running` with the sockets it listens on, measured once on a fresh sandbox of its new snapshot.

    The processes are restarted in `box` (`restart`), the sockets read once they settle
    (`settled_listening`); the box is discarded after, whatever happens.
    """
    try:
        box = restart(box, spec, limits, running)
        return replace(running, listening=settled_listening(box))
    finally:
        discard(box)


def settled_listening(box: Box) -> tuple[str, ...]:
    """The sockets listening in a restarted sandbox once they settle (`settled`, for `SETTLE` seconds).

    The sockets alone are not enough: a server that computes for seconds before it binds (a notebook
    server importing its modules) would settle on none, and candidates would then run before it
    listens, racing it. While it starts it uses the CPU; once it waits for requests it does not.
    """
    return settled(box, listening, SETTLE)


def settled(box: Box, read: Callable[[Box], tuple[str, ...]], window: float) -> tuple[str, ...]:
    """What `read(box)` reads once it settles, or at `RESTART_TIMEOUT`.

    Settled: for `window` seconds it stays the same and the sandbox's processes use under `IDLE_SHARE`
    of a CPU.
    """
    deadline = time.monotonic() + RESTART_TIMEOUT
    seen, ticks, since = read(box), cpu_ticks(box), time.monotonic()
    while time.monotonic() - since < window and time.monotonic() < deadline:
        time.sleep(POLL)
        now, used = read(box), cpu_ticks(box)
        busy = used - ticks > 1 + IDLE_SHARE * (time.monotonic() - since) * CLOCK_TICKS
        if now != seen or busy:
            seen, ticks, since = now, used, time.monotonic()
    return seen


def listening(box: Box) -> tuple[str, ...]:
    """The sockets listening in the sandbox's network namespace: `tcp <hex addr:port>`, `unix <path>`."""
    raw = run(box, ["/bin/sh", "-c", LISTENING], user="0", timeout=10, output_cap=1 << 20, keep=True)
    return _sockets(raw.stdout.decode(errors="replace"))


def cpu_ticks(box: Box) -> int:
    """The CPU time (clock ticks, user and system) the sandbox's running processes have used."""
    raw = run(box, ["/bin/sh", "-c", CPU_TIME], user="0", timeout=10, output_cap=1 << 20, keep=True)
    return sum(_cpu_ticks(line) for line in raw.stdout.decode(errors="replace").splitlines())


def _cpu_ticks(stat: str) -> int:
    """The CPU time of one /proc/<pid>/stat line, user and system, its waited-for children's included.

    A loop of short commands computes in its children. The name in parentheses may hold spaces.
    """
    fields = stat[stat.rfind(")") + 2 :].split()[11:15]  # utime stime cutime cstime (fields 14-17)
    return sum(int(f) for f in fields) if len(fields) == 4 and all(f.isdigit() for f in fields) else 0


def _sockets(text: str) -> tuple[str, ...]:
    found = set()
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[3] == "0A" and ":" in fields[1]:  # /proc/net/tcp*: st 0A is LISTEN
            found.add(f"tcp {fields[1]}")
        elif len(fields) >= 7 and fields[3] == "00010000" and fields[0].endswith(":"):  # unix: __SO_ACCEPTCON
            found.add(f"unix {fields[7] if len(fields) > 7 else '(unnamed)'}")
    return tuple(sorted(found))


def _root(box: Box, spec: SandboxSpec, limits: Limits, command: str, list_left: bool = False) -> RawRun:
    """A set-up style command: as root, in the shell, what it starts kept running."""
    argv = [spec.shell, "-c", command]
    return run(
        box, argv, user="0", timeout=limits.replay_timeout, output_cap=limits.output_cap, keep=True, list_left=list_left
    )


def _save_and_list(box: Box, spec: SandboxSpec, limits: Limits, command: str) -> tuple[str, ...]:
    """Run a root command that keeps what runs, and list what runs (the runner lists it in the same call)."""
    raw = _root(box, spec, limits, command, list_left=True)
    if raw.exit_code != 0:
        tail = raw.stderr.decode(errors="replace")[-200:]
        raise SandboxError(f"saving the shell state failed in {spec.image}: {tail}")
    return normalize_processes(left_running(box, raw))
