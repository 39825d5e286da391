"""Network namespaces lent from retired containers, so that a replacement does not build its own.

Creating the network namespace of `--network none` is about half of a container's start (about
230 ms to start here, 110 ms when joining an existing namespace). A candidate that writes a file
leaves its container unfit for reuse, so each such candidate costs a fresh container. When the
retired container was started with its own namespace and nothing runs in it any more (the runner
killed what the action left), it is kept, idle, as a *holder*: the next container joins its
namespace instead of creating one. A holder lends its namespace to one container at a time, so
two live containers never share a loopback (a port one candidate binds cannot collide with
another's), and gets it back once that container is retired. Holders stay alive while they lend,
since a joined container's `/etc/hosts` and `/etc/resolv.conf` are the holder's files.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

from pivot_sandbox.replay.box import Box


class NetnsHolders:
    """The free holders (idle retired containers whose namespaces nobody uses).

    Args:
        remove: removes a container (the holders this keeps no longer).
        keep: free holders kept; one more retired container is removed instead.
    """

    def __init__(self, remove: Callable[[Box], None], keep: int) -> None:
        self.remove, self.keep = remove, keep
        self._free: deque[Box] = deque()
        self._lock = threading.Lock()

    def lend(self) -> Box | None:
        """A free holder for a new container (None: the container builds its own namespace)."""
        with self._lock:
            return self._free.popleft() if self._free else None

    def offer(self, box: Box) -> bool:
        """Keep a retired container that owns its namespace as a holder; False when enough are free."""
        with self._lock:
            if len(self._free) >= self.keep:
                return False
            self._free.append(box)
            return True

    def give_back(self, holder: Box) -> None:
        """The container that joined `holder` is gone: the namespace is free again."""
        if not self.offer(holder):
            self.remove(holder)

    def close(self) -> list[Box]:
        """Stop lending; the free holders, for the caller to remove."""
        with self._lock:
            free, self._free, self.keep = list(self._free), deque(), 0
        return free
