"""`PrefixStateCache`: the world state at a pivot, cached per prefix of the history's tool calls.

The state at a pivot is the initial state with every tool call of the history replayed in
order. Pivots of one trajectory share prefixes, so the cache keys each prefix by a hash chain
over its calls (tool name + canonical arguments) and derives the state at a longer prefix from
the longest cached shorter one: the pivot at turn k+1 replays only the calls made since turn k.
States are copy-on-write, so handing the same cached state to K candidates costs K forks.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from pivot_core import Message
from pivot_tool_worlds._replay import outputs_match, recorded_calls
from pivot_tool_worlds._state import WorldState
from pivot_tool_worlds._world import ToolWorld

ROOT_KEY = "root"


def call_key(parent: str, name: str, arguments: str) -> str:
    """The key of a prefix: its parent's key chained with one call (arguments canonicalised)."""
    try:
        args = json.dumps(json.loads(arguments or "{}"), sort_keys=True, separators=(",", ":"))
    except ValueError:
        args = arguments
    return hashlib.blake2b(f"{parent}\x00{name}\x00{args}".encode(), digest_size=16).hexdigest()


@dataclass(frozen=True)
class PivotState:
    """The state at a pivot and how faithfully the history replayed.

    Attributes:
        state: the world state after the history's calls (share it only through `fork`).
        calls: number of tool calls in the history.
        diverged: 0-based indexes of history calls whose replayed output differs from the recorded one.
    """

    state: WorldState
    calls: int
    diverged: tuple[int, ...] = ()


@dataclass
class CacheStats:
    """Counters (tests assert on them; the benchmark reports them).

    Attributes:
        lookups: `state_at` calls.
        hits: lookups served entirely from the cache (no call replayed).
        extended: lookups derived from a cached shorter prefix.
        from_scratch: lookups that replayed from the initial state.
        replayed: tool calls executed to build states.
        last_base: prefix length (in calls) of the cached state the last lookup started from.
    """

    lookups: int = 0
    hits: int = 0
    extended: int = 0
    from_scratch: int = 0
    replayed: int = 0
    last_base: int = 0


class PrefixStateCache:
    """An LRU cache of world states keyed by tool-call prefix.

    Args:
        world: the world whose states are cached.
        max_entries: prefixes kept (each is a small overlay over the shared initial tables).
    """

    def __init__(self, world: ToolWorld, max_entries: int = 4096) -> None:
        self.world = world
        self.max_entries = max_entries
        self.stats = CacheStats()
        self._entries: OrderedDict[str, PivotState] = OrderedDict()
        self._lock = threading.Lock()

    def state_at(self, history: Sequence[Message]) -> PivotState:
        """The state after every tool call in `history`, derived from the longest cached prefix."""
        calls = recorded_calls(history)
        keys = [ROOT_KEY]
        for rc in calls:
            keys.append(call_key(keys[-1], rc.call.name, rc.call.arguments))
        with self._lock:
            self.stats.lookups += 1
            start = next((n for n in range(len(calls), -1, -1) if keys[n] in self._entries), None)
            if start is None:
                base = PivotState(self.world.initial_state(), 0)
                start = 0
                self._put(ROOT_KEY, base)
                self.stats.from_scratch += 1
            else:
                base = self._entries[keys[start]]
                self._entries.move_to_end(keys[start])
                if start == len(calls):
                    self.stats.hits += 1
                else:
                    self.stats.extended += 1
            self.stats.last_base = start
            state, diverged = base.state, list(base.diverged)
            for n in range(start, len(calls)):
                rc = calls[n]
                outcome, state = self.world.step(state, rc.call.name, rc.call.arguments)
                self.stats.replayed += 1
                if rc.recorded is not None and not outputs_match(rc.recorded, outcome.output):
                    diverged.append(n)
                self._put(keys[n + 1], PivotState(state, n + 1, tuple(diverged)))
            if start == len(calls):
                return base
            return PivotState(state, len(calls), tuple(diverged))

    def _put(self, key: str, entry: PivotState) -> None:
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Drop every cached state (counters are kept)."""
        with self._lock:
            self._entries.clear()
