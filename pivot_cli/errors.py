"""Errors raised by the CLI and the server (turned into exit codes and 4xx answers)."""

from __future__ import annotations


class Busy(Exception):
    """Raised by `Admission.run` when the queue is full (becomes a 503)."""

    def __init__(self, retry_after_s: float) -> None:
        super().__init__("server busy")
        self.retry_after_s = retry_after_s


class SessionRefused(Exception):
    """Raised by `Sessions.create` when a quota leaves no room (becomes a 429)."""


class SessionNotFound(Exception):
    """Raised by `Sessions.get` for an unknown, expired or foreign session id (becomes a 404)."""
