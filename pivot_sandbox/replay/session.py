"""`Session`: one live container at a restored pivot state, kept for a whole episode.

The verifier runs each candidate in a fresh copy of the state and throws it away; an episode
needs the opposite: the same container across turns, its shell state (working directory,
exported variables) carried from one command to the next, as in a terminal. A session starts
from the backend's snapshot of the state, in a container made like a candidate's (every
capability dropped, no network, the backend's limits), so a policy's commands meet the same
walls as in the verifier; it belongs to the backend, so the backend's exit and signal clean-up
removes it if the process dies, and `close` removes it otherwise. A session opened with
`network="registries"` (an episode that may `pip install`) reaches the package registries this machine
is configured for, and nothing else, until `go_offline` (the Docker backend's `docker/registries.py`);
`freeze`, which comes before any test run, takes the network away first.

A task's tests run in the session's container too (`pivot_sandbox.tasks.verification.run_task_tests`),
after `freeze` stopped what the agent left and started again what ran.
"""

from __future__ import annotations

import posixpath
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, runtime_checkable

from pivot_sandbox.contract.backend import SandboxBackend
from pivot_sandbox.contract.spec import Limits, SandboxSpec
from pivot_sandbox.errors import ProcessesNotRestored, SandboxError, SandboxUnavailable
from pivot_sandbox.replay import box as ct
from pivot_sandbox.replay.restore import POLL, RESTART_TIMEOUT, Running, restart
from pivot_sandbox.replay.shell_state import listed_processes, normalize_processes

OUTPUT_HEAD = 64 * 1024  # bytes of a command's output read back
SESSION_NETWORKS = ("none", "registries")  # what a session's sandbox may reach: nothing, or the package registries
SESSION_PRE = f"{ct.STATE}/session-pre"  # the shell state before each command of a session
# daemons their clients start whenever they need one (gnupg's): `freeze` stops them like every process the
# agent left, and nothing starts them again (a test's `gpg` starts its own); running again the command that
# started one (an agent's `gpg --symmetric` whose input it then shredded) cannot, and scored the run 0
ON_DEMAND_DAEMONS = frozenset({"gpg-agent", "dirmngr", "keyboxd", "scdaemon"})


@dataclass(frozen=True)
class SessionRun:
    """One command of a session.

    Attributes:
        exit_code: the command's exit status (None when it was stopped).
        output: stdout and stderr together, as a terminal shows them.
        killed: why the sandbox stopped it ("timeout", "oom", "output", ...), None when it ended.
        cwd: the working directory after it.
    """

    exit_code: int | None
    output: str
    killed: str | None
    cwd: str


@runtime_checkable
class LiveBackend(SandboxBackend, Protocol):
    """What a `Session` asks of its backend (`live_sessions`: the Docker backend), beyond `SandboxBackend`.

    The namespace backend asks the same of the Docker backend it hands states to (`namespace/layer.py`).
    """

    def snapshot(self, spec: SandboxSpec, history: Sequence[str]) -> tuple[str, str]:
        """(key, image) of the snapshot at the state after `history`, built on a miss."""
        ...

    def at_state(self, key: str, image: str, spec: SandboxSpec, kind: str, network: str = "none") -> ct.Box:
        """A sandbox on the snapshot `key`, the processes its state runs started again (`restore.restart`).

        `network="registries"`: an episode's, reaching the package registries only (until `disconnect`).
        """
        ...

    def disconnect(self, box: ct.Box) -> None:
        """Take every network away from a sandbox `at_state` made (raises `SandboxError` when it cannot)."""
        ...

    def running_of(self, key: str) -> Running:
        """What the state of snapshot `key` runs (empty when nothing)."""
        ...

    def discard(self, box: ct.Box) -> None:
        """Remove a sandbox `at_state` made."""
        ...

    def image_env(self, image: str) -> list[str]:
        """The image's own environment (`KEY=value` each)."""
        ...


class Session:
    """A live container of `backend` at the state after `history` (see the module docstring).

    Args:
        backend: a `DockerBackend` (from the `register_sandboxes` hook): a `LiveBackend`.
        spec: the pivot's sandbox.
        history: the shell commands before the pivot (replayed once, into the backend's snapshot cache).
        network: "none" (a candidate's: no network), or "registries": the package registries this
            machine is configured for and nothing else, until `go_offline` (`freeze` calls it).
    """

    def __init__(self, backend: LiveBackend, spec: SandboxSpec, history: Sequence[str], network: str = "none") -> None:
        if network not in SESSION_NETWORKS:
            raise SandboxError(f"a session's network: expected one of {SESSION_NETWORKS}, got {network!r}")
        self.backend, self.spec, self.network = backend, spec, network
        key, image = backend.snapshot(spec, list(history))
        self._key = key
        self._online = network != "none"
        # what the history left running (a server) runs again in it (`_restore.restart`)
        reach = {"network": network} if self._online else {}
        self._box: ct.Box | None = backend.at_state(key, image, spec, "episode", **reach)
        self._state = ct.STATE  # the snapshot's shell state, then the session's own (RUN_STATE)
        # what each command started that may still run at the tests: (pre-state folder, command, identities)
        self._launched: list[tuple[str, str, frozenset[tuple[int, int]]]] = []
        self._listing = self._box.running_listing
        # where the next command is typed: a terminal's prompt shows it before the command runs
        self.cwd = ct.read_text(self._box, f"{ct.STATE}/cwd").strip() or spec.workdir

    def run(self, command: str, timeout: float | None = None) -> SessionRun:
        """Run one command as the sandbox user, in the shell state the previous command left."""
        box = self._live()
        pre = self._save_state_before(box, len(self._launched))
        raw = ct.shell_run(
            box,
            self.spec,
            self.backend.limits,
            command,
            src=self._state,
            dst=ct.RUN_STATE,
            quiet=True,  # output goes to a file: a background process cannot hold the command open
            timeout=timeout or self.backend.limits.action_timeout,
            list_left=True,  # what it started: its launcher runs again before the tests (`run_tests`)
        )
        self._state = ct.RUN_STATE
        listing = ct.left_running(box, raw)
        self._launched.append((pre, command, _identities(listing) - _identities(self._listing)))
        self._listing = listing
        if raw.killed:
            return SessionRun(None, "", raw.killed, raw.cwd)
        self.cwd = raw.cwd or self.cwd
        return SessionRun(raw.exit_code, _head(box, f"{ct.RUN_STATE}/out"), None, raw.cwd)

    def freeze(self) -> str:
        """Stop every process the agent left, then start what ran again from its launchers; "" or why not.

        What a task's tests meet (`pivot_sandbox.tasks.verification`): a background job that waits
        for the tests and rewrites them, or fakes a tool, must not run into the test run; what ran
        (the history's servers, each session command that started a process still running) is
        started again (`_start_again`).
        """
        self.go_offline()  # a task's tests never run with the registries the episode reached
        box = self._live()
        left = ct.running_processes(box)
        stopped = self._stop_agent_processes(box)
        if stopped:
            return stopped
        try:
            self._box = self._start_again(box, left)
        except ProcessesNotRestored as e:
            return f"what the agent left running could not be started again: {e}"
        return ""

    def go_offline(self) -> None:
        """Take the registries away from a session opened with them (idempotent; raises `SandboxError` when it cannot).

        Whatever runs on, the sandbox keeps its loopback only: what follows (a task's tests) runs with
        no network, as in a session that never had one.
        """
        if self._online:
            self.backend.disconnect(self._live())
            self._online = False

    def live(self) -> ct.Box:
        """The live box (raises once the session is closed)."""
        return self._live()

    def image_env(self) -> list[str]:
        """The image's own environment (`KEY=value` each): what a task's tests run with, nothing the agent exported."""
        return self.backend.image_env(self.spec.image)

    def _stop_agent_processes(self, box: ct.Box) -> str:
        """Kill every process in the container but its own (the runner, or init and the idle process)."""
        if box.channel is not None:  # the runner kills whatever an action leaves when it is not kept
            ct.run(box, ["true"], user="0", timeout=10, output_cap=1024)
        else:
            idle = " ".join(ct.IDLE)
            script = (
                "for d in /proc/[0-9]*; do p=${d#/proc/}; [ $p = 1 ] || [ $p = $$ ] && continue; "
                f'[ "$(tr "\\0" " " < $d/cmdline 2>/dev/null)" = "{idle} " ] || kill -9 $p 2>/dev/null; done; true'
            )
            ct.run(box, ["/bin/sh", "-c", script], user="0", timeout=10, output_cap=4096)
        left: tuple[str, ...] = ()
        for _ in range(50):
            left = normalize_processes(ct.running_processes(box))
            if not left:
                return ""
            time.sleep(0.05)
        return f"the agent's processes could not be stopped before the tests: {', '.join(left[:3])}"

    def _save_state_before(self, box: ct.Box, index: int) -> str:
        """Keep the shell state a command starts from (its launcher runs again from it); the folder."""
        pre = f"{SESSION_PRE}/{index}"
        owner = "" if self.spec.runs_as_root else f" && chown -R {self.spec.user} {SESSION_PRE}"
        save = f"mkdir -p {pre} && cp -p {self._state}/cwd {self._state}/env {pre}/{owner}"
        ct.run(box, ["/bin/sh", "-c", save], user="0", timeout=10, output_cap=4096, keep=True)
        return pre

    def _start_again(self, box: ct.Box, left: bytes) -> ct.Box:
        """Start what ran when the agent finished (`left`) again from its launchers, after every process was stopped.

        The state's own processes (the history's servers) come back through `_restore.restart` when
        the agent left all of them running; what the session's commands started comes back by running
        each command that started a process still running, from the shell state it first ran in. The
        result must be the same processes (command lines) as `left`, within `RESTART_TIMEOUT`;
        raises `ProcessesNotRestored` otherwise. Through `docker exec` (no identities) nothing the
        session started can be attributed, and what it left is refused the same way.
        """
        want = _restartable(left)
        if not want:
            return box
        now = _identities(left)
        state = self.backend.running_of(self._key)  # a live-session backend (`open_session`): Docker's
        if state and _identities(box.running_listing) <= now:  # the agent left the state's servers as they were
            box = restart(box, self.spec, self.backend.limits, state)
        limits = self.backend.limits
        for pre, command, started in self._launched:
            if started & now:
                wait = limits.replay_timeout
                raw = ct.shell_run(box, self.spec, limits, command, src=pre, dst=ct.RUN_STATE, quiet=True, timeout=wait)
                if raw.killed:
                    raise ProcessesNotRestored(want, f"restarting {command[:60]!r} was stopped: {raw.killed}")
        deadline = time.monotonic() + RESTART_TIMEOUT
        while True:
            listing = ct.running_processes(box)
            if Counter(_restartable(listing)) == Counter(want):
                return replace(box, running=want, running_listing=listing)
            if time.monotonic() > deadline:
                got = list(_restartable(listing))
                raise ProcessesNotRestored(want, f"started again from their commands, the sandbox had {got} running")
            time.sleep(POLL)

    def run_as_root(self, command: str, timeout: float) -> SessionRun:
        """Run one command as root in the working directory (a task's tests), with no shell state."""
        box = self._live()
        argv = [self.spec.shell, "-c", f"cd {self.spec.workdir} 2>/dev/null; {command}"]
        raw = ct.run(box, argv, user="0", timeout=timeout, output_cap=self.backend.limits.output_cap, keep=True)
        output = (raw.stdout + raw.stderr).decode(errors="replace")
        return SessionRun(raw.exit_code, output, raw.killed, self.spec.workdir)

    def close(self) -> None:
        """Remove the container (idempotent)."""
        box, self._box = self._box, None
        if box is not None:
            self.backend.discard(box)

    @property
    def container_id(self) -> str | None:
        """The live container's id (None once closed)."""
        return self._box.id if self._box is not None else None

    def _live(self) -> ct.Box:
        if self._box is None:
            raise RuntimeError("the session is closed")
        return self._box


def transcript(
    box: ct.Box,
    spec: SandboxSpec,
    limits: Limits,
    commands: Sequence[str],
    timeout: float | None = None,
    stop: Callable[[int, ct.RawRun], bool] | None = None,
) -> list[tuple[ct.RawRun, str]]:
    """Run commands one by one in `box`, a backend's replay sandbox at the set-up state: (run, cwd after it) each.

    What synthesis records and the replay check compares with a run: a terminal session from the
    set-up state, in the replay's container (registry access where the spec has it). Output goes to
    a file first and is read back afterwards, so a command that leaves a process in the background
    cannot hold the session open. Stops at the first command the sandbox had to stop, and after
    command `i` where `stop(i, run)` is true (the replay check: a divergence found, nothing after it
    counts).
    """
    steps: list[tuple[ct.RawRun, str]] = []
    for command in commands:
        raw = ct.shell_run(
            box, spec, limits, command, src=ct.STATE, dst=ct.STATE, quiet=True, timeout=timeout or limits.replay_timeout
        )
        if raw.killed:
            steps.append((raw, ""))
            break
        output = ct.read_text(box, f"{ct.STATE}/out").encode()
        steps.append((ct.RawRun(raw.exit_code, output, b"", None), raw.cwd))
        if stop is not None and stop(len(steps) - 1, raw):
            break
    return steps


def _on_demand(command: str) -> bool:
    return posixpath.basename(command.split(" ", 1)[0]) in ON_DEMAND_DAEMONS


def _restartable(listing: bytes) -> tuple[str, ...]:
    """Command lines of a listing that `freeze` starts again, sorted: all but `ON_DEMAND_DAEMONS`."""
    return tuple(c for c in normalize_processes(listing) if not _on_demand(c))


def _identities(listing: bytes) -> frozenset[tuple[int, int]]:
    """(pid, start time) of each process of a listing that `freeze` starts again (none through `docker exec`)."""
    procs = listed_processes(listing)
    return frozenset(p.identity for p in procs if p.identity is not None and not _on_demand(p.command))


def _head(box: ct.Box, path: str) -> str:
    """The first `OUTPUT_HEAD` bytes of a file (a flood of output is cut, never dropped whole)."""
    # `keep`: reading the output must not stop what the command left running (a server for the next turn)
    argv = ["head", "-c", str(OUTPUT_HEAD), path]
    raw = ct.run(box, argv, user="0", timeout=10, output_cap=OUTPUT_HEAD + 1024, keep=True)
    return raw.stdout.decode(errors="replace") if raw.exit_code == 0 else ""


def open_session(backend: SandboxBackend, spec: SandboxSpec, history: Sequence[str], network: str = "none") -> Session:
    """A `Session` at the state after `history` (what episode envs call); `network` as `Session`'s.

    Raises `SandboxUnavailable` for a backend without live sessions (the namespace backend): an
    episode is never run on another backend than the one asked for, nor without the network it asked for.
    """
    if not backend.live_sessions or not isinstance(backend, LiveBackend):
        asked = " with registry access (network='registries')" if network != "none" else ""
        raise SandboxUnavailable(
            f"the {backend.name} sandbox backend has no live sessions (episodes{asked}, task tests): "
            "use the docker backend"
        )
    return Session(backend, spec, history, network)
