"""The live reset/step sessions of `pivot serve`, each owned by one client, under quotas.

A client is its token when the server has one per client, else its address (see
`_server.client_of`). A client may hold `per_client` live sessions; the server holds `limit` in
all. A session idle for `ttl_s` has expired and may be reclaimed for anyone. A live session is
never taken from its owner to make room for someone else: a client over its quota, or a new
session on a full server with nothing expired, is refused (429) with a message saying why.
Another client's session id answers 404, exactly like an unknown one.
"""

from __future__ import annotations

import copy
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from pivot_cli.errors import SessionNotFound, SessionRefused
from pivot_envs import PivotEnv


@dataclass
class _Session:
    env: PivotEnv
    owner: str
    last_used: float = field(default=0.0)


class Sessions:
    """Live sessions, least recently used first.

    Args:
        base: the loaded env; a session is a shallow copy with its own RNG and current pivot.
        limit: sessions held in all.
        per_client: sessions one client may hold.
        ttl_s: idle seconds after which a session has expired.
        clock: the time source (tests pass a fake one).
    """

    def __init__(
        self,
        base: PivotEnv,
        limit: int,
        per_client: int,
        ttl_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base = base
        self.limit = limit
        self.per_client = per_client
        self.ttl_s = ttl_s
        self.clock = clock
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._counts: dict[str, int] = {}

    def create(self, owner: str) -> str:
        """A new session for `owner`.

        Raises:
            SessionRefused: `owner` holds `per_client` live sessions, or the server holds `limit`
                and none has expired.
        """
        self._expire()
        if self._counts.get(owner, 0) >= self.per_client:
            raise SessionRefused(
                f"this client holds {self.per_client} live sessions, its quota: close some "
                f"(DELETE /v1/sessions/ID) or let them expire ({self.ttl_s:g} s idle)"
            )
        if len(self._sessions) >= self.limit:
            raise SessionRefused(
                f"the server holds {self.limit} live sessions: retry after some close or expire ({self.ttl_s:g} s idle)"
            )
        env = copy.copy(self.base)
        env._np_random = None
        env._np_random_seed = None
        env.current = None
        env.action_space = copy.deepcopy(self.base.action_space)
        sid = uuid.uuid4().hex
        self._sessions[sid] = _Session(env, owner, self.clock())
        self._counts[owner] = self._counts.get(owner, 0) + 1
        return sid

    def get(self, sid: str, owner: str) -> PivotEnv:
        """The env of `owner`'s session `sid` (marked used now)."""
        self._expire()
        session = self._sessions.get(sid)
        if session is None or session.owner != owner:
            raise SessionNotFound(f"unknown session {sid[:64]!r} (expired or never created): create a new one")
        session.last_used = self.clock()
        self._sessions.move_to_end(sid)
        return session.env

    def drop(self, sid: str, owner: str) -> bool:
        """Forget `owner`'s session `sid`; True when it existed."""
        session = self._sessions.get(sid)
        if session is None or session.owner != owner:
            return False
        self._remove(sid)
        return True

    def _expire(self) -> None:
        # Least recently used first: stop at the first session still live.
        horizon = self.clock() - self.ttl_s
        while self._sessions:
            sid, session = next(iter(self._sessions.items()))
            if session.last_used > horizon:
                break
            self._remove(sid)

    def _remove(self, sid: str) -> None:
        session = self._sessions.pop(sid)
        left = self._counts[session.owner] - 1
        if left:
            self._counts[session.owner] = left
        else:
            del self._counts[session.owner]

    def __len__(self) -> int:
        return len(self._sessions)


__all__ = ["SessionNotFound", "SessionRefused", "Sessions"]
