"""Tool worlds: an initial state, tool implementations and their schemas, executed copy-on-write."""

from verifiers_plugins.errors import ToolFailure
from verifiers_plugins.worlds._cache import CacheStats, PivotState, PrefixStateCache
from verifiers_plugins.worlds._effects import Effect, compare_effects, execute_turn
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
from verifiers_plugins.worlds._tau_airline_tools import AIRPORTS
from verifiers_plugins.worlds._world import Outcome, Tool, ToolWorld, canonical_output, same_output

__all__ = [
    "AIRPORTS",
    "DELETED",
    "CacheStats",
    "Effect",
    "Mismatch",
    "Outcome",
    "PivotState",
    "PrefixStateCache",
    "RecordedCall",
    "ReplayReport",
    "Tool",
    "ToolFailure",
    "ToolWorld",
    "WorldState",
    "canonical_output",
    "clone_json",
    "compare_effects",
    "execute_turn",
    "locate_db",
    "outputs_match",
    "recorded_calls",
    "replay_messages",
    "replay_trajectories",
    "same_output",
    "tau_airline",
]
