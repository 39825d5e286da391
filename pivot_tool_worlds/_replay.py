"""Replaying recorded tool calls: pair each call with its recorded output, execute, compare.

Tool messages are paired with calls by `tool_call_id` when the id is unique within the turn's
results, else by position: recorded trajectories reuse call ids across turns (72 duplicates in
the tau-bench airline file), so ids alone cannot be trusted across the whole conversation.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pivot_core import Message, ToolCall, Trajectory
from pivot_tool_worlds._state import WorldState
from pivot_tool_worlds._world import ToolWorld, same_output


@dataclass(frozen=True)
class RecordedCall:
    """One tool call of a conversation and the output recorded for it (None when none was recorded)."""

    turn: int
    call: ToolCall
    recorded: str | None


def recorded_calls(messages: Sequence[Message]) -> list[RecordedCall]:
    """Every tool call in `messages`, in order, with its recorded output."""
    out: list[RecordedCall] = []
    for i, msg in enumerate(messages):
        if msg.role != "assistant" or not msg.tool_calls:
            continue
        results: list[Message] = []
        for later in messages[i + 1 :]:
            if later.role != "tool":
                break
            results.append(later)
        by_id: dict[str, list[Message]] = {}
        for r in results:
            by_id.setdefault(r.tool_call_id or "", []).append(r)
        for j, call in enumerate(msg.tool_calls):
            same_id = by_id.get(call.id or "", [])
            result = same_id[0] if len(same_id) == 1 else (results[j] if j < len(results) else None)
            out.append(RecordedCall(i, call, None if result is None else (result.content or "")))
    return out


@dataclass(frozen=True)
class Mismatch:
    """A replayed call whose output differs from the recorded one."""

    trajectory: str
    turn: int
    tool: str
    arguments: str
    recorded: str
    replayed: str

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (outputs cut to 300 characters)."""
        return {
            "trajectory": self.trajectory,
            "turn": self.turn,
            "tool": self.tool,
            "arguments": self.arguments,
            "recorded": self.recorded[:300],
            "replayed": self.replayed[:300],
        }


@dataclass(frozen=True)
class ReplayReport:
    """How many recorded calls a world reproduced."""

    calls: int = 0
    matched: int = 0
    unrecorded: int = 0
    mismatches: tuple[Mismatch, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        """`{"calls", "matched", "unrecorded", "mismatches": [...]}`."""
        return {
            "calls": self.calls,
            "matched": self.matched,
            "unrecorded": self.unrecorded,
            "mismatches": [m.to_json() for m in self.mismatches],
        }


def outputs_match(recorded: str, replayed: str) -> bool:
    """Equal after canonical JSON (key order and spacing never matter)."""
    return same_output(recorded, replayed)


def replay_messages(
    world: ToolWorld, messages: Sequence[Message], trajectory_id: str = "", state: WorldState | None = None
) -> tuple[ReplayReport, WorldState]:
    """Execute every recorded call in order on `state` (a fresh initial state when None)."""
    state = world.initial_state() if state is None else state
    calls = matched = unrecorded = 0
    mismatches: list[Mismatch] = []
    for rc in recorded_calls(messages):
        outcome, state = world.step(state, rc.call.name, rc.call.arguments)
        calls += 1
        if rc.recorded is None:
            unrecorded += 1
        elif outputs_match(rc.recorded, outcome.output):
            matched += 1
        else:
            mismatches.append(
                Mismatch(trajectory_id, rc.turn, rc.call.name, rc.call.arguments, rc.recorded, outcome.output)
            )
    return ReplayReport(calls, matched, unrecorded, tuple(mismatches)), state


def replay_trajectories(world: ToolWorld, trajectories: Iterable[Trajectory]) -> ReplayReport:
    """Replay each trajectory on its own fresh initial state and add up the reports."""
    calls = matched = unrecorded = 0
    mismatches: list[Mismatch] = []
    for traj in trajectories:
        report, _ = replay_messages(world, traj.messages, traj.id)
        calls += report.calls
        matched += report.matched
        unrecorded += report.unrecorded
        mismatches.extend(report.mismatches)
    return ReplayReport(calls, matched, unrecorded, tuple(mismatches))
