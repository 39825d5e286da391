"""Errors raised by the verifier host."""

from __future__ import annotations

from pivot_core.errors import PivotGymError


class PluginError(PivotGymError):
    """Raised by the plugin host when a plugin registers something invalid."""


class DuplicateName(PluginError):
    """Raised by `register` when two plugins register the same verifier, parser or sandbox name."""


class UnknownVerifier(PluginError, KeyError):
    """Raised by `get_verifier` / `VerifierChain.from_names` for a name no plugin registered."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown verifier"


class WorldDataError(PluginError):
    """Raised by a tool world whose initial state cannot be found or read (path, env var, bundled subset)."""


class VerifierTimeout(PluginError, TimeoutError):
    """Raised by the host's async runner when a coroutine verifier misses its per-call timeout."""


class RewardCacheError(PluginError):
    """Raised when the reward cache file cannot be opened as one (corrupt, or not SQLite): the message names it."""


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


class ToolFailure(Exception):
    """Raised by a tool implementation for a failed call; the message is the error text after `Error: `."""


class JudgeAnswerError(ValueError):
    """The judge's reply is not one JSON object with a valid verdict."""


class BrokenPluginWarning(UserWarning):
    """Warned by the plugin host when it leaves a broken installed plugin out."""
