"""`Session`: one live container at a restored pivot state, kept for a whole episode.

The verifier runs each candidate in a fresh copy of the state and throws it away; an episode
needs the opposite: the same container across turns, its shell state (working directory,
exported variables) carried from one command to the next, as in a terminal. A session starts
from the backend's snapshot of the state, in a container made like a candidate's (every
capability dropped, no network, the backend's limits), so a policy's commands meet the same
walls as in the verifier; it belongs to the backend, so the backend's exit and signal clean-up
removes it if the process dies, and `close` removes it otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pivot_sandbox import _containers as ct
from pivot_sandbox._spec import SandboxSpec

OUTPUT_HEAD = 64 * 1024  # bytes of a command's output read back


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


class Session:
    """A live container of `backend` at the state after `history` (see the module docstring).

    Args:
        backend: a `DockerBackend` (from the `register_sandboxes` hook).
        spec: the pivot's sandbox.
        history: the shell commands before the pivot (replayed once, into the backend's snapshot cache).
    """

    def __init__(self, backend: Any, spec: SandboxSpec, history: Sequence[str]) -> None:
        self.backend, self.spec = backend, spec
        _, image = backend.snapshot(spec, list(history))
        self._box: ct.Box | None = backend._create(image, spec, "episode")
        self._state = ct.STATE  # the snapshot's shell state, then the session's own (RUN_STATE)
        # where the next command is typed: a terminal's prompt shows it before the command runs
        self.cwd = ct.read_text(self._box, f"{ct.STATE}/cwd").strip() or spec.workdir

    def run(self, command: str, timeout: float | None = None) -> SessionRun:
        """Run one command as the sandbox user, in the shell state the previous command left."""
        box = self._live()
        raw = ct.shell_run(
            box,
            self.spec,
            self.backend.limits,
            command,
            src=self._state,
            dst=ct.RUN_STATE,
            quiet=True,  # output goes to a file: a background process cannot hold the command open
            timeout=timeout or self.backend.limits.action_timeout,
        )
        self._state = ct.RUN_STATE
        if raw.killed:
            return SessionRun(None, "", raw.killed, raw.cwd)
        self.cwd = raw.cwd or self.cwd
        return SessionRun(raw.exit_code, _head(box, f"{ct.RUN_STATE}/out"), None, raw.cwd)

    def run_direct(self, command: str, timeout: float) -> SessionRun:
        """Run one command as the sandbox user with its output captured directly (up to the output cap).

        For a task's tests: their status line comes last, so the output must not be cut at its head.
        """
        box = self._live()
        raw = ct.shell_run(
            box, self.spec, self.backend.limits, command, src=self._state, dst=ct.RUN_STATE, timeout=timeout
        )
        self._state = ct.RUN_STATE
        output = (raw.stdout + raw.stderr).decode(errors="replace")
        return SessionRun(raw.exit_code, output, raw.killed, raw.cwd or self.cwd)

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
            self.backend._discard(box)

    @property
    def container_id(self) -> str | None:
        """The live container's id (None once closed)."""
        return self._box.id if self._box is not None else None

    def _live(self) -> ct.Box:
        if self._box is None:
            raise RuntimeError("the session is closed")
        return self._box


def _head(box: ct.Box, path: str) -> str:
    """The first `OUTPUT_HEAD` bytes of a file (a flood of output is cut, never dropped whole)."""
    raw = ct.run(box, ["head", "-c", str(OUTPUT_HEAD), path], user="0", timeout=10, output_cap=OUTPUT_HEAD + 1024)
    return raw.stdout.decode(errors="replace") if raw.exit_code == 0 else ""


def open_session(backend: Any, spec: SandboxSpec, history: Sequence[str]) -> Session:
    """A `Session` at the state after `history` (what episode envs call)."""
    return Session(backend, spec, history)
