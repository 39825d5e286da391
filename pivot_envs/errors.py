"""Errors raised by the envs: registration and the remote-env client."""

from __future__ import annotations

from pivot_core import PivotGymError


class RegistrationError(PivotGymError):
    """Raised by `register` when an id is registered twice."""


class RemoteError(PivotGymError):
    """Raised by the remote clients when the server answers an error or stays busy past the retries."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
