"""Built-in tool worlds: `tau-airline` (the tau-bench airline database and its 14 tools) and its demo slice."""

from __future__ import annotations

from collections.abc import Callable

from pivot_tool_worlds import DEMO_WORLD_NAME, tau_airline, tau_airline_demo
from verifiers_plugins.hookspecs import hookimpl


@hookimpl
def register_tool_worlds(register: Callable[..., None]) -> None:
    """Register `tau-airline` (its factory takes an optional `db_path`) and `tau-airline-demo` (fixed data)."""
    register("tau-airline", tau_airline)
    register(DEMO_WORLD_NAME, tau_airline_demo)
