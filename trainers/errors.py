"""Errors raised by the trainers and their generation backends."""

from __future__ import annotations


class BackendError(RuntimeError):
    """A generation server failed for good (after retries) or answered something unreadable."""
