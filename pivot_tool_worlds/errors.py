"""Errors raised by the tool worlds."""

from __future__ import annotations

from pivot_core.errors import PivotGymError


class ToolWorldError(PivotGymError):
    """Base of the tool worlds' errors."""


class WorldDataError(ToolWorldError):
    """Raised by a tool world whose initial state cannot be found or read (path, env var, bundled subset)."""


class ToolFailure(ToolWorldError):
    """Raised by a tool implementation for a failed call; the message is the error text after `Error: `."""
