"""`tool_exec` acceptor: execute the expert's and the candidate's calls on the pivot's world state.

For a pivot whose context names a tool world (`context["world"]`, e.g. "tau-airline"), the
state at the pivot is rebuilt by replaying the history's tool calls (cached per prefix), then
the expert turn and each candidate turn run on their own copy-on-write fork of it. The
candidate is accepted when the effects match (see `pivot_tool_worlds._effects`): equal
outputs after canonical JSON, equal state changes, parallel calls as a set. Pivots with no
world, and text turns, are not applicable (the chain moves on).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pivot_core import Message, Pivot
from pivot_tool_worlds import Effect, PivotState, PrefixStateCache, ToolWorld, compare_effects, execute_turn
from verifiers_plugins._host import get_host
from verifiers_plugins._verdict import Verdict
from verifiers_plugins.hookspecs import hookimpl


class ToolExec:
    """Accepts a tool-call turn whose execution has the expert turn's effect.

    Args:
        world_config: keyword arguments per world factory, e.g. `{"tau-airline": {"db_path": ...}}`.
        note_threshold: text similarity (0-1) at which free-text effects (a `think` thought, a
            hand-off summary) match.
        max_cached_states: prefix states kept per world.
    """

    role = "acceptor"
    cost = "cheap"
    deterministic = True
    version = "2"

    def __init__(
        self,
        world_config: Mapping[str, Mapping[str, Any]] | None = None,
        note_threshold: float = 0.6,
        max_cached_states: int = 4096,
    ) -> None:
        if not 0.0 <= note_threshold <= 1.0:
            raise ValueError(f"tool_exec: expected note_threshold in [0, 1], got {note_threshold!r}")
        self.world_config = {k: dict(v) for k, v in (world_config or {}).items()}
        self.note_threshold = note_threshold
        self.max_cached_states = max_cached_states
        self._caches: dict[str, PrefixStateCache] = {}
        self._experts: OrderedDict[tuple[str, str], Effect] = OrderedDict()
        self._lock = threading.Lock()

    def cache(self, world_name: str) -> PrefixStateCache:
        """The prefix-state cache of a world (the world is built on first use)."""
        with self._lock:
            if world_name not in self._caches:
                factory = get_host().get("tool_worlds", world_name)
                world = factory(**self.world_config.get(world_name, {}))
                if not isinstance(world, ToolWorld):
                    raise TypeError(f"tool world {world_name!r}: expected a ToolWorld, got {type(world).__name__}")
                self._caches[world_name] = PrefixStateCache(world, self.max_cached_states)
            return self._caches[world_name]

    def fingerprint(self, pivot: Pivot) -> str:
        """The world's name and the content hash of its database: a verdict here depends on both.

        The world is the one this verifier runs on (built on first use, as `verify` builds it),
        so the key names exactly the data the verdict was made on.
        """
        world_name = pivot.context.get("world")
        if not world_name or not pivot.expert.tool_calls:
            return ""  # not applicable: the verdict is a skip whatever the database holds
        world = self.cache(str(world_name)).world
        return f"{world.name}:{world.fingerprint}"

    def verify(self, pivot: Pivot, action: Message) -> Verdict:
        """Score one candidate turn."""
        return self.verify_batch(pivot, [action])[0]

    def verify_batch(self, pivot: Pivot, actions: Sequence[Message]) -> list[Verdict]:
        """Score a group: the pivot state and the expert's effect are computed once for all."""
        world_name = pivot.context.get("world")
        if not world_name:
            return [Verdict.skip("pivot carries no tool world")] * len(actions)
        if not pivot.expert.tool_calls:
            return [Verdict.skip("expert turn calls no tool")] * len(actions)
        cache = self.cache(str(world_name))
        at = cache.state_at(pivot.history)
        expert = self._expert_effect(pivot, cache.world, at)
        context = {"world": cache.world.name, "db": cache.world.description}
        if at.diverged:
            context["history_diverged_at_calls"] = list(at.diverged)
        # Identical candidates (common in a GRPO group) are executed once: the world is deterministic.
        judged: dict[tuple[tuple[str, str], ...], Verdict] = {}
        out = []
        for action in actions:
            key = _call_key(action)
            if key not in judged:
                judged[key] = self._judge(cache.world, at, expert, action, context)
            out.append(judged[key])
        return out

    def _expert_effect(self, pivot: Pivot, world: ToolWorld, at: PivotState) -> Effect:
        key = (world.name, pivot.content_hash())
        with self._lock:
            if key in self._experts:
                self._experts.move_to_end(key)
                return self._experts[key]
        effect = execute_turn(world, at.state, pivot.expert.tool_calls)
        with self._lock:
            self._experts[key] = effect
            while len(self._experts) > self.max_cached_states:
                self._experts.popitem(last=False)
        return effect

    def _judge(
        self, world: ToolWorld, at: PivotState, expert: Effect, action: Message, context: Mapping[str, Any]
    ) -> Verdict:
        if not action.tool_calls:
            return Verdict.reject("expected a tool call, got none", **context)
        got = execute_turn(world, at.state, action.tool_calls)
        problem = compare_effects(world, expert, got, self.note_threshold)
        outputs = [o.output[:200] for o in got.outcomes]
        if problem is None:
            return Verdict.accept(
                f"{len(got.outcomes)} call(s) with the expert's effect",
                changes=sorted(got.changes),
                outputs=outputs,
                **context,
            )
        reason = problem.pop("reason")
        return Verdict.reject(reason, outputs=outputs, **problem, **context)


def _call_key(action: Message) -> tuple[tuple[str, str], ...]:
    """The candidate's calls as (name, canonical arguments), in order."""
    out = []
    for call in action.tool_calls:
        try:
            args = json.dumps(json.loads(call.arguments or "{}"), sort_keys=True)
        except ValueError:
            args = call.arguments
        out.append((call.name, args))
    return tuple(out)


@hookimpl
def register_verifiers(register: Callable[..., None]) -> None:
    """Register `tool_exec`."""
    register("tool_exec", ToolExec)
