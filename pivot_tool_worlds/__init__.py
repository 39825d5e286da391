"""Tool worlds: an initial state, tool implementations and their schemas, executed copy-on-write."""

from pivot_tool_worlds._cache import CacheStats, PivotState, PrefixStateCache
from pivot_tool_worlds._effects import Effect, compare_effects, execute_turn
from pivot_tool_worlds._replay import (
    Mismatch,
    RecordedCall,
    ReplayReport,
    outputs_match,
    recorded_calls,
    replay_messages,
    replay_trajectories,
)
from pivot_tool_worlds._state import DELETED, WorldState, clone_json
from pivot_tool_worlds._tau_airline import DEMO_WORLD_NAME, locate_db, tau_airline, tau_airline_demo
from pivot_tool_worlds._tau_airline_tools import AIRPORTS
from pivot_tool_worlds._world import Outcome, Tool, ToolWorld, canonical_output, same_output
from pivot_tool_worlds.errors import ToolFailure, ToolWorldError, WorldDataError

__all__ = [
    "AIRPORTS",
    "DEMO_WORLD_NAME",
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
    "ToolWorldError",
    "WorldDataError",
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
    "tau_airline_demo",
]
