"""Built-in tool worlds: `tau-airline` (the tau-bench airline database and its 14 tools)."""

from __future__ import annotations

from collections.abc import Callable

from verifiers_plugins.hookspecs import hookimpl
from verifiers_plugins.worlds import tau_airline


@hookimpl
def register_tool_worlds(register: Callable[..., None]) -> None:
    """Register `tau-airline`; its factory takes an optional `db_path`."""
    register("tau-airline", tau_airline)
