"""Errors raised by the trainers and their generation backends."""

from __future__ import annotations

from pivot_core import PivotGymError


class TrainerError(PivotGymError):
    """Base of the trainers' errors."""


class BackendError(TrainerError, RuntimeError):
    """A generation server failed for good (after retries) or answered something unreadable."""


class PretrainedError(TrainerError):
    """Raised by `trainers.pretrained.get_pretrained` when a packaged model can be neither found nor fetched."""
