"""The in-container command runner (`runner.c`) and the host's end of its channel.

A `docker exec` starts a process through runc: about 60 ms of daemon and kernel work per command,
the floor of a verification. Instead, each sandbox container's main process is a small static
binary that reads commands from the container's attached stdin and answers on its stdout, so a
command costs one round trip on a socket the host keeps open (about 1.5 ms measured here).

The runner runs as root with only CAP_KILL, CAP_SETUID and CAP_SETGID; each command runs in a
child that switches to the action's uid/gid (which drops those capabilities) and the runner is not
dumpable, so a candidate can neither signal, trace nor write to it. After an action it kills every
process but itself and init; what it could not kill is reported and the container is not reused.

The binary is compiled once per source version with the host's C compiler (`cc -static`) and
bind-mounted read-only into each container, so it needs a local daemon and a compiler; without
either the backend falls back to `docker exec` (`runner_for()` says why).
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pivot_core import cache_dir
from pivot_sandbox.errors import RunnerLost

SOURCE = Path(__file__).with_name("runner.c")
MOUNT_POINT = "/.pivot-runner"
CAPABILITIES = ["KILL", "SETUID", "SETGID"]  # the runner's, to switch to a non-root user and kill what it left
# Docker's default capabilities: what the task's own environment gives its (root) agent, and what the
# replay of set-up and history has
DOCKER_DEFAULT_CAPABILITIES = (
    "CHOWN DAC_OVERRIDE FSETID FOWNER MKNOD NET_RAW SETGID SETUID SETFCAP SETPCAP NET_BIND_SERVICE SYS_CHROOT KILL "
    "AUDIT_WRITE"
).split()
# A root candidate's: those of a root agent in the task's environment, so that what root may do there
# (write a read-only file, chown, switch users) has the same effect here; creating device nodes is
# left out, since the namespace backend has no device cgroup to make a node of a host disk harmless.
ROOT_CANDIDATE_CAPABILITIES = [c for c in DOCKER_DEFAULT_CAPABILITIES if c != "MKNOD"]
FLAG_CLEAN_IPC, FLAG_KEEP, FLAG_LIST = 1, 2, 4
KILLED = {0: None, 1: "timeout", 2: "output cap"}
GRACE = 10.0  # seconds past a command's own timeout before the host stops waiting for the runner

_built: dict[str, Path | str] = {}  # source digest -> the binary, or why it could not be built
_build_lock = threading.Lock()


def build_runner() -> Path | str:
    """The runner binary for this machine (compiled on first use and cached), or why there is none."""
    source = SOURCE.read_bytes()
    digest = hashlib.sha256(source).hexdigest()[:16]
    with _build_lock:
        if digest in _built:
            return _built[digest]
        target = cache_dir("sandbox-runner") / f"pivot-runner-{digest}-{platform.machine()}"
        result: Path | str = target
        if not target.exists():
            compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
            if not compiler:
                result = "no C compiler (cc) on this machine to build the sandbox runner"
            else:
                partial = target.with_suffix(f".{os.getpid()}.tmp")
                try:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    proc = subprocess.run(
                        [compiler, "-O2", "-static", "-o", str(partial), str(SOURCE)], capture_output=True, text=True
                    )
                    if proc.returncode != 0:
                        result = f"the sandbox runner did not compile ({compiler}): {proc.stderr.strip()[-300:]}"
                    else:
                        partial.chmod(0o755)
                        partial.replace(target)  # atomic: concurrent processes build the same bytes
                except OSError as e:
                    result = f"the sandbox runner could not be built in {target.parent}: {e}"
        _built[digest] = result
        return result


def runner_for(base_url: str | None) -> Path | str:
    """The runner binary containers of this daemon can use, or why there is none.

    The binary is bind-mounted from this machine, so the daemon must run here: a DOCKER_HOST that
    is not a local socket gets `docker exec` instead. `PIVOT_SANDBOX_RUNNER=0` turns it off.
    """
    if os.environ.get("PIVOT_SANDBOX_RUNNER", "1") in ("0", "false", "no"):
        return "turned off by PIVOT_SANDBOX_RUNNER=0"
    where = base_url or os.environ.get("DOCKER_HOST") or "unix://"
    if not where.startswith(("unix://", "/")):
        return f"the Docker daemon at {where} is not local: the runner binary cannot be mounted from here"
    return build_runner()


def parse_user(user: str) -> tuple[int, int] | None:
    """(uid, gid) the runner switches to; (-1, -1) keeps root; None when the runner cannot resolve it.

    A user name goes through `docker exec`, which reads the image's /etc/passwd.
    """
    if user in ("root", "0", "0:0"):
        return -1, -1
    uid, _, gid = user.partition(":")
    if uid.isdigit() and gid.isdigit():
        return int(uid), int(gid)
    return None


@dataclass(frozen=True)
class Reply:
    """The runner's answer to one command."""

    exit_code: int | None  # None when a signal ended the command
    signal: int
    killed: str | None
    oom: bool
    # processes still alive after the clean-up plus non-file state left (System V IPC objects, POSIX
    # shm and queues, a changed mount table); None when not counted (background kept)
    left: int | None
    stdout: bytes
    stderr: bytes
    cwd: str | None = None  # the command's cwd when it parked (`runner.c --park`); None when it never did
    state: bytes = b""  # the parked process's state, NUL-delimited key/value records (`runner.c read_state`)
    procs: bytes = b""  # command lines of the processes the action left (args joined by 0x1f, NUL-ended)
    fork_failures: int = 0  # forks the pids limit refused during the command


class Channel:
    """The host's end of one container's runner: its attached stdin/stdout, one command at a time."""

    def __init__(self, api: Any, container_id: str) -> None:
        self._response = api.attach_socket(container_id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
        self._sock: socket.socket = self._response._sock
        self._pending = bytearray()
        self._diagnostics = bytearray()  # the runner's own stderr
        self._deadline = 0.0  # time.monotonic() by which the current reply must be complete

    def call(
        self,
        argv: Sequence[str],
        *,
        uid: int,
        gid: int,
        timeout: float,
        output_cap: int,
        clean_ipc: bool = False,
        keep: bool = False,
        list_left: bool = False,
    ) -> Reply:
        """Run `argv` as uid/gid; raises `RunnerLost` when the runner does not answer in time.

        `list_left`: the reply lists the processes left running even when they are kept.
        """
        flags = (FLAG_CLEAN_IPC if clean_ipc else 0) | (FLAG_KEEP if keep else 0) | (FLAG_LIST if list_left else 0)
        parts = [f"RUN {max(1, int(timeout * 1000))} {output_cap} {uid} {gid} {flags} {len(argv)}\n".encode()]
        for arg in argv:
            data = arg.encode(errors="replace")  # a completion may hold lone surrogates: they run as "?"
            parts += [f"{len(data)}\n".encode(), data]
        # one deadline for the whole exchange: a per-read timeout would restart with every frame
        self._deadline = time.monotonic() + timeout + GRACE
        try:
            self._sock.settimeout(timeout + GRACE)
            self._sock.sendall(b"".join(parts))
            head = self._line()
            if head[:1] == b"E":
                raise RunnerLost(f"the runner refused the request: {head[2:].decode(errors='replace')}")
            fields = head.split()
            if len(fields) != 12 or fields[0] != b"R":
                raise RunnerLost(f"unexpected reply from the runner: {bytes(head[:80])!r}")
            code, sig, killed, oom, left, n_out, n_err, n_cwd, n_state, n_procs, forks = (int(f) for f in fields[1:])
            body = self._read(n_out + n_err + max(n_cwd, 0) + n_state + n_procs)
        except TimeoutError as e:
            raise RunnerLost(f"the runner did not answer within {timeout + GRACE:.0f} s{self._tail()}", True) from e
        except OSError as e:
            raise RunnerLost(f"the runner's channel broke: {e or type(e).__name__}{self._tail()}") from e
        return Reply(
            None if code < 0 else code,
            sig,
            KILLED.get(killed, "killed"),
            oom > 0,
            None if left < 0 else left,
            body[:n_out],
            body[n_out : n_out + n_err],
            None if n_cwd < 0 else body[n_out + n_err : n_out + n_err + n_cwd].decode(errors="replace"),
            body[len(body) - n_state - n_procs : len(body) - n_procs],
            body[len(body) - n_procs :],
            forks,
        )

    def _fill(self) -> None:
        """Read one frame of the multiplexed attach stream: an 8-byte header (stream, size), then the data.

        Read here rather than with `docker.utils.socket`, whose reads wait without a timeout.
        """
        stream, size = struct.unpack(">BxxxL", self._exactly(8))
        (self._pending if stream == 1 else self._diagnostics).extend(self._exactly(size))

    def _exactly(self, n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            remaining = self._deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("past the reply's deadline")
            self._sock.settimeout(remaining)
            chunk = self._sock.recv(n - len(data))  # raises TimeoutError past the socket's timeout
            if not chunk:
                raise RunnerLost(f"the runner's stream ended{self._tail()}")
            data += chunk
        return bytes(data)

    def _line(self) -> bytes:
        while (end := self._pending.find(b"\n")) < 0:
            self._fill()
        line = bytes(self._pending[:end])
        del self._pending[: end + 1]
        return line

    def _read(self, n: int) -> bytes:
        while len(self._pending) < n:
            self._fill()
        data = bytes(self._pending[:n])
        del self._pending[:n]
        return data

    def _tail(self) -> str:
        text = self._diagnostics.decode(errors="replace").strip()[-200:]
        return f" ({text})" if text else ""

    def close(self) -> None:
        """Close the socket (the runner then sits idle until its container is removed)."""
        try:
            self._sock.close()
            self._response.close()
        except OSError:
            pass
