"""The CPU limit a container gets: what the limits ask, at most the CPUs the daemon's machine has."""

from __future__ import annotations

import docker
import docker.errors

_NCPU: dict[str, int] = {}  # the daemon's CPU count, by its address


def nano_cpus(api: docker.APIClient, cpus: float) -> int:
    """Docker's `nano_cpus` for `cpus`, at most the daemon's CPU count.

    A Harbor task may ask for more CPUs than this machine has (rstan-to-pystan's `cpus = 4` on 2 cores):
    Docker refuses such a container outright; all the CPUs there are is what the limit means here.
    """
    base = str(getattr(api, "base_url", ""))
    if base not in _NCPU:
        try:
            _NCPU[base] = int(api.info().get("NCPU") or 0)
        except docker.errors.APIError:
            _NCPU[base] = 0  # unknown: the limit as asked
    most = _NCPU[base]
    return int((min(cpus, most) if most else cpus) * 1e9)


__all__ = ["nano_cpus"]
