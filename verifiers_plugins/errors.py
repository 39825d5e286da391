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


class VerifierTimeout(PluginError, TimeoutError):
    """Raised by the host's async runner when a coroutine verifier misses its per-call timeout."""


class RewardCacheError(PluginError):
    """Raised when the reward cache file cannot be opened as one (corrupt, or not SQLite): the message names it."""


class JudgeAnswerError(PluginError, ValueError):
    """The judge's reply is not one JSON object with a valid verdict."""


class BrokenPluginWarning(UserWarning):
    """Warned by the plugin host when it leaves a broken installed plugin out."""
