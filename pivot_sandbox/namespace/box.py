"""What holds a namespace sandbox's runner (`namespace/backend.py`): its channel, its process tree, the task's user.

The runner (`runner.c`) is the Docker backend's; only its transport differs: its stdin and stdout
are one end of a socket pair instead of a container's attached streams.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pivot_sandbox.errors import RunnerLost, SandboxError
from pivot_sandbox.namespace import root as nr
from pivot_sandbox.replay import runner as rn
from pivot_sandbox.replay.box import RawRun


class Channel(rn.Channel):
    """The runner's channel over a socket pair (no multiplexed attach stream to unpack)."""

    def __init__(self, sock: socket.socket, errors: Path) -> None:  # noqa: D107 - no docker attach: own fields
        self._sock = sock
        self._pending = bytearray()
        self._diagnostics = bytearray()
        self._deadline = 0.0
        self._errors = errors

    def _fill(self) -> None:
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("past the reply's deadline")
        self._sock.settimeout(remaining)
        chunk = self._sock.recv(1 << 16)
        if not chunk:
            raise RunnerLost(f"the runner's stream ended{self._tail()}")
        self._pending += chunk

    def _tail(self) -> str:
        try:
            text = self._errors.read_text(errors="replace").strip()[-200:]
        except OSError:
            text = ""
        return f" ({text})" if text else ""

    def close(self) -> None:
        """Close the host's end of the socket pair."""
        self._sock.close()


class Sandbox:
    """A namespace sandbox as a box's `Sandbox` (`replay/box.py`): bwrap's process tree, its cgroups, its folder.

    Its commands always go through the runner: there is no engine to `exec` through, list processes
    or diff files (the overlay upper folder is always readable here), so those answer so.
    """

    def __init__(self, name: str, proc: subprocess.Popen[bytes], cgroups: nr.Cgroups, folder: Path) -> None:
        self.name, self.proc, self.cgroups, self.folder = name, proc, cgroups, folder

    @property
    def id(self) -> str:
        """The sandbox's name (its folder's)."""
        return self.name

    def kill(self) -> None:
        """Kill bwrap: its pid namespace, and everything in it, goes with it."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def oom_kills(self) -> int:
        """How many processes the OOM killer ended in the sandbox's cgroups."""
        for folder in self.cgroups.joined:
            for name in ("memory.events", "memory.oom_control"):
                try:
                    for line in (folder / name).read_text().splitlines():
                        key, _, value = line.partition(" ")
                        if key == "oom_kill" and value.strip().isdigit():
                            return int(value)
                except OSError:
                    continue
        return 0

    def oom_killed(self) -> bool:
        """Whether the OOM killer ended something in it."""
        return self.oom_kills() > 0

    def exec(self, argv: Sequence[str], *, user: str, timeout: float, output_cap: int, marked: bool) -> RawRun:
        """Never: a namespace sandbox's commands go through its runner, as a numeric user (`_numeric`)."""
        raise SandboxError(f"the namespace sandbox runs commands through its runner only (user {user!r})")

    def processes(self) -> bytes:
        """Nothing to ask: the runner lists the processes."""
        return b""

    def changes(self) -> list[tuple[str, int]]:
        """Nothing to ask: the change set is read from the overlay upper folder."""
        return []

    def put_archive(self, path: str, data: bytes) -> None:
        """Never: the namespace backend runs no session (`live_sessions` is False)."""
        raise SandboxError("the namespace sandbox takes no archive (it runs no session)")


@dataclass(frozen=True)
class Root:
    """An image's exported root file system, its environment, and the image's layers (`RootFS.Layers`)."""

    path: Path
    env: dict[str, str]
    layers: tuple[str, ...] = ()  # empty when unknown: no Docker snapshot is taken over on it
    # a state taken over from Docker (`_nslayer.take_over`): a copy of a container's init layer, then
    # the image's layer folders as the daemon stores them (below the snapshot's upper folder)
    stack: tuple[Path, ...] = ()


def resolve_user(root: Path, user: str) -> str:
    """`uid:gid` for a task's user (the runner switches by number; Docker reads the image's /etc/passwd)."""
    if rn.parse_user(user) is not None:
        return user
    name, _, group = user.partition(":")
    ids = {}
    for line in (root / "etc/passwd").read_text(errors="replace").splitlines():
        fields = line.split(":")
        if len(fields) > 3:
            ids[fields[0]] = (fields[2], fields[3])
    if name not in ids and not name.isdigit():
        raise SandboxError(f"user {name!r} is not in the image's /etc/passwd")
    uid, gid = ids.get(name, (name, "0"))
    if group:
        gids = {
            f[0]: f[2] for f in (ln.split(":") for ln in (root / "etc/group").read_text().splitlines()) if len(f) > 2
        }
        gid = group if group.isdigit() else gids.get(group, "")
        if not gid:
            raise SandboxError(f"group {group!r} is not in the image's /etc/group")
    return f"{uid}:{gid}"


def spawn(command: list[str], errors: Path, pass_fd: int | None) -> tuple[subprocess.Popen[bytes], socket.socket]:
    """Start a sandbox: `command` with its stdin and stdout on one end of a socket pair, stderr to `errors`.

    Returns the process and the other end (the runner's channel). `pass_fd` (the seccomp program)
    is handed to the process and closed here either way.
    """
    mine, theirs = socket.socketpair()
    try:
        with errors.open("wb") as err:
            fds = () if pass_fd is None else (pass_fd,)
            proc = subprocess.Popen(command, stdin=theirs, stdout=theirs, stderr=err, pass_fds=fds)
    except BaseException:
        mine.close()
        raise
    finally:
        theirs.close()
        if pass_fd is not None:
            os.close(pass_fd)
    return proc, mine


__all__ = ["Channel", "Root", "Sandbox", "resolve_user", "spawn"]
