"""One container in the host's network at a time on this machine: the host-network turn.

A replay with registry access (`SandboxSpec.replay_access`) runs in the host's network namespace,
so a server its history starts (`node server.js &`) listens on a port of the host. Two such replays
at once, threads of one scorer or two processes, would meet on that port: the second server fails
to bind, and its state silently lacks the server every candidate at it is then judged without.
So each such container holds the turn from before its creation to its removal: an exclusive
`flock` on one file of the cache folder (each taking opens the file anew, so threads of one process
wait for each other as other processes do; the kernel releases it if the process dies).
"""

from __future__ import annotations

import fcntl
import os
import threading
import time

from pivot_core import cache_dir
from pivot_sandbox.errors import SandboxError

WAIT = 1800.0  # seconds a replay waits for the turn (others' installs take minutes) before it is an error
_held: dict[str, int] = {}  # container id -> the descriptor whose lock it holds
_lock = threading.Lock()


def take_turn(wait: float = WAIT) -> int:
    """Wait for the turn; the descriptor that holds it (give it to `hold`, or to `give_back` on failure).

    Raises:
        SandboxError: the turn did not come within `wait` seconds (a container that holds it was
            never removed: a leak, said rather than waited for forever).
    """
    folder = cache_dir("sandbox")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "host-network.lock"
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                raise SandboxError(
                    f"waited {wait:.0f} s for the host-network turn ({path}): a replay holds it"
                ) from None
            time.sleep(0.1)
        except BaseException:
            os.close(fd)
            raise


def hold(container_id: str, fd: int) -> None:
    """The container `container_id` holds the turn until `release(container_id)`."""
    with _lock:
        _held[container_id] = fd


def release(container_id: str) -> None:
    """The turn a removed container held, if any, goes to the next one waiting."""
    with _lock:
        fd = _held.pop(container_id, None)
    if fd is not None:
        give_back(fd)


def give_back(fd: int) -> None:
    """Give a turn back: closing the descriptor releases its lock."""
    os.close(fd)
