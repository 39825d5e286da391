"""Leftover removal by label and owner.

Every container and snapshot image carries `pivot-gym` and an owner label (`host:pid`), as does the
private network of a sandbox's services (`docker/services.py`); anything whose owner process is gone
is garbage.

Removal runs when a backend starts, at interpreter exit, on SIGINT/SIGTERM, and from
`pivot sandbox gc`. A process killed with SIGKILL cannot clean up after itself: the next start or
`pivot sandbox gc` removes what it left.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType

import docker.errors

from pivot_sandbox.contract.spec import LABEL

_HOST = socket.gethostname()


@dataclass(frozen=True)
class GcReport:
    """What `gc` removed."""

    containers: int
    images: int

    def to_json(self) -> dict[str, int]:
        """JSON-ready dict."""
        return {"containers": self.containers, "images": self.images}


def owner_alive(owner: str) -> bool:
    """True when the `host:pid` owner is a live process on this host (other or unknown owners count as alive)."""
    host, _, pid = owner.rpartition(":")
    if host != _HOST or not pid.isdigit():
        return True  # another machine's, or made by a tool that does not label owners: not ours to judge
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# What every `gc` of this process removed. A backend sweeps dead owners' leftovers when it first
# connects, so `pivot sandbox gc`, which connects through one, finds nothing left to remove: what
# the command really removed is the sweep's count plus its own, which this total holds.
_REMOVED = [0, 0]
# Reentrant: an exit signal may run a gc on the thread that is updating the total.
_TALLY = threading.RLock()


def removed_in_this_process() -> GcReport:
    """Everything `gc` removed in this process so far (the start-up sweep of a backend included)."""
    with _TALLY:
        return GcReport(*_REMOVED)


def gc(client: docker.DockerClient, *, everything: bool = False, owner: str | None = None) -> GcReport:
    """Remove pivot-gym containers and snapshot images whose owner is gone.

    Counts only what the daemon confirmed removed (an image it only untagged is not removed).

    Args:
        client: a docker client.
        everything: remove every pivot-gym container and snapshot image, live owner or not
            (base images are kept).
        owner: remove only what this owner (`host:pid`) made.
    """
    n_containers = n_images = 0
    # the low-level list needs no inspect per container, so one removed meanwhile cannot break it
    for c in client.api.containers(all=True, filters={"label": LABEL}):
        who = (c.get("Labels") or {}).get(f"{LABEL}.owner", "")
        if everything or (owner is not None and who == owner) or (owner is None and not owner_alive(who)):
            try:
                client.api.remove_container(c["Id"], force=True)
                n_containers += 1
            except docker.errors.APIError:
                pass
    # the same for images: `client.images.list` inspects each one, and a snapshot another process (or a
    # backend's background removal) deleted meanwhile raised ImageNotFound out of a backend's start
    for img in client.api.images(filters={"label": f"{LABEL}=snapshot"}):
        who = (img.get("Labels") or {}).get(f"{LABEL}.owner", "")
        if everything or (owner is not None and who == owner) or (owner is None and not owner_alive(who)):
            try:
                answer = client.api.remove_image(img["Id"], force=True)
            except docker.errors.APIError:
                continue
            # The daemon lists what it untagged and what it deleted; only a deletion frees the image.
            n_images += any("Deleted" in row for row in answer or ())
    _gc_networks(client, everything, owner)
    with _TALLY:
        _REMOVED[0] += n_containers
        _REMOVED[1] += n_images
    return GcReport(n_containers, n_images)


def _gc_networks(client: docker.DockerClient, everything: bool, owner: str | None) -> None:
    """Remove the private networks of services (`docker/services.py`) whose owner is gone, as `gc` chooses.

    After the containers: a network is removed only once nothing is attached to it. Not counted in
    `GcReport`, whose two counts are what `pivot sandbox gc --json` has always printed.
    """
    try:
        rows = client.api.networks(filters={"label": f"{LABEL}=services"})
    except docker.errors.APIError:
        return
    for row in rows:
        who = (row.get("Labels") or {}).get(f"{LABEL}.owner", "")
        if everything or (owner is not None and who == owner) or (owner is None and not owner_alive(who)):
            try:
                client.api.remove_network(row["Id"])
            except docker.errors.APIError:
                pass  # still in use (a container being removed): the next sweep takes it


_CLOSERS: list[Callable[[], None]] = []
_INSTALLED = False
_LOCK = threading.Lock()


def _close_all() -> None:
    while _CLOSERS:
        try:
            _CLOSERS.pop()()
        except Exception:  # exit-time cleanup must go on with the next backend
            pass


# what `signal.getsignal` returns: a handler, SIG_DFL or SIG_IGN, or None (one not set from Python)
_Handler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None


def _on_signal(signum: int, frame: FrameType | None, previous: _Handler) -> None:
    _close_all()
    if callable(previous):
        previous(signum, frame)
    elif previous == signal.SIG_IGN:
        return
    else:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def on_exit(close: Callable[[], None]) -> None:
    """Run `close` at interpreter exit and on SIGINT/SIGTERM (previous handlers still run afterwards)."""
    global _INSTALLED
    with _LOCK:
        _CLOSERS.append(close)
        if _INSTALLED:
            return
        _INSTALLED = True
        atexit.register(_close_all)
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers can only be set from the main thread; atexit still runs
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous = signal.getsignal(signum)
            signal.signal(signum, lambda s, f, p=previous: _on_signal(s, f, p))


def forget(close: Callable[[], None]) -> None:
    """Stop running `close` at exit (the backend was closed explicitly)."""
    with _LOCK:
        if close in _CLOSERS:
            _CLOSERS.remove(close)
