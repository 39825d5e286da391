"""Errors raised by the sandbox: engines, images, Dockerfile builds, Terminal-Bench task folders."""

from __future__ import annotations

from pivot_core.errors import PivotGymError


class SandboxError(PivotGymError):
    """Raised by a sandbox backend when a container cannot be prepared (bad image, set-up failed)."""


class SandboxUnavailable(SandboxError):
    """Raised by a sandbox backend whose engine cannot be reached (no Docker daemon)."""


class RunnerLost(SandboxError):
    """The runner stopped answering (killed, out of memory, or its container stopped)."""

    def __init__(self, message: str, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


class DockerfileError(SandboxError):
    """A Dockerfile this builder cannot read or run; the message names the file and line."""


class TaskError(SandboxError):
    """A task that cannot be built or tested here; the message is the one precise reason."""


class StateRefused(SandboxError):
    """A Docker-built state the namespace backend cannot take over exactly (`_nslayer.import_layer` says why)."""
