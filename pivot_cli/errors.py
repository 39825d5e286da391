"""Errors raised by the CLI and the server (turned into exit codes and 4xx answers)."""

from __future__ import annotations

from pivot_core import PivotGymError


class CLIError(PivotGymError):
    """Base of the errors of the command line and the server."""


class Busy(CLIError):
    """Raised by `Admission.run` when the queue is full (becomes a 503)."""

    def __init__(self, retry_after_s: float) -> None:
        super().__init__("server busy")
        self.retry_after_s = retry_after_s


class SessionRefused(CLIError):
    """Raised by `Sessions.create` when a quota leaves no room (becomes a 429)."""


class SessionNotFound(CLIError):
    """Raised by `Sessions.get` for an unknown, expired or foreign session id (becomes a 404)."""


class BadRequest(CLIError):
    """Raised while reading a request body that is not what the endpoint takes (becomes a 4xx)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class FetchError(CLIError):
    """Raised by `fetch_shared_data` when the source cannot be reached (no file was written)."""
