"""Tool worlds: an initial state, tool implementations and their schemas, executed copy-on-write."""

from verifiers_plugins.worlds._replay import (
    Mismatch,
    RecordedCall,
    ReplayReport,
    outputs_match,
    recorded_calls,
    replay_messages,
    replay_trajectories,
)
from verifiers_plugins.worlds._state import DELETED, WorldState, clone_json
from verifiers_plugins.worlds._tau_airline import locate_db, tau_airline
from verifiers_plugins.worlds._world import Outcome, Tool, ToolFailure, ToolWorld, canonical_output

__all__ = [
    "DELETED",
    "Mismatch",
    "Outcome",
    "RecordedCall",
    "ReplayReport",
    "Tool",
    "ToolFailure",
    "ToolWorld",
    "WorldState",
    "canonical_output",
    "clone_json",
    "locate_db",
    "outputs_match",
    "recorded_calls",
    "replay_messages",
    "replay_trajectories",
    "tau_airline",
]
