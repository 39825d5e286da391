"""Shell sandboxes: restore a pivot's state in a container and capture what an action does.

The Docker backend (`verifiers_plugins.sandbox._docker.DockerBackend`) is loaded lazily through
the `register_sandboxes` hook, so importing this package never imports docker.
"""

from verifiers_plugins.sandbox._effects import Comparison, Unstable, compare_effects, normalize_output, unstable_parts
from verifiers_plugins.sandbox._plugin import docker_backend
from verifiers_plugins.sandbox._spec import (
    LABEL,
    Effect,
    Limits,
    SandboxError,
    SandboxSpec,
    SandboxUnavailable,
)

__all__ = [
    "LABEL",
    "Comparison",
    "Effect",
    "Limits",
    "SandboxError",
    "SandboxSpec",
    "SandboxUnavailable",
    "Unstable",
    "compare_effects",
    "docker_backend",
    "normalize_output",
    "unstable_parts",
]
