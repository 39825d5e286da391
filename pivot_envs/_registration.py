"""Registration of the pivot env ids with Gymnasium (ids are `pivot/<domain>-v<N>`)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from pivot_envs.errors import RegistrationError


def register(id: str, entry_point: str, **kwargs: Any) -> None:
    """Register an env id; unlike Gymnasium's own `register`, a second registration raises."""
    if id in gym.registry:
        raise RegistrationError(f"env id {id!r} is already registered (by {gym.registry[id].entry_point})")
    gym.register(id=id, entry_point=entry_point, disable_env_checker=False, **kwargs)


def ensure_registered(id: str, entry_point: str, **kwargs: Any) -> None:
    """Register unless this exact id and entry point are already there (re-import safety)."""
    spec = gym.registry.get(id)
    if spec is not None and spec.entry_point == entry_point:
        return
    register(id, entry_point, **kwargs)
