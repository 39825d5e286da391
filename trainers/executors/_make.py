"""Executors by name: the one place that knows every executor, Ray's among them (imported on demand)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainers.executors._base import EnvSpec, Executor, InProcessExecutor

EXECUTORS: dict[str, Callable[..., Executor]] = {"in-process": InProcessExecutor}


def make_executor(name: str, spec: EnvSpec, **options: Any) -> Executor:
    """Build an executor by name: `in-process`, or `ray` (the `scale` extra; `options` go to it).

    Raises:
        ValueError: an unknown name (the valid names are listed).
    """
    if name == "ray":
        from trainers.executors._ray import RayExecutor  # ray is imported only here

        return RayExecutor(spec, **options)
    if name not in EXECUTORS:
        raise ValueError(f"expected an executor in {sorted([*EXECUTORS, 'ray'])}, got {name!r}")
    return EXECUTORS[name](spec)


EXECUTOR_NAMES = ("in-process", "ray")
