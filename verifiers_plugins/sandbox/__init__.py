"""Shell sandboxes: restore a pivot's state in a container and capture what an action does.

The Docker backend (`verifiers_plugins.sandbox._docker.DockerBackend`) is loaded lazily through
the `register_sandboxes` hook, so importing this package never imports docker.
"""

import importlib

from verifiers_plugins.errors import SandboxError, SandboxUnavailable
from verifiers_plugins.sandbox._effects import Comparison, Unstable, compare_effects, normalize_output, unstable_parts
from verifiers_plugins.sandbox._plugin import docker_backend
from verifiers_plugins.sandbox._spec import LABEL, Effect, Limits, SandboxSpec

# What needs the Docker SDK (sessions, task images, synthesis, clean-up) is imported when first asked
# for: every verifier module of this package imports the package, and the static chains must not pay
# for docker.
_LAZY = {
    "BUILDERS": "_images",
    "image_exists": "_images",
    "gc": "_cleanup",
    "removed_in_this_process": "_cleanup",
    "open_session": "_session",
    "synthesize_file": "_synthesize",
    "build_tasks": "_tasks",
    "task_dirs": "_tasks",
    "load_task": "_tasks",
    "test_commands": "_tasks",
    "test_outcome": "_tasks",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return getattr(importlib.import_module(f"verifiers_plugins.sandbox.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BUILDERS",
    "build_tasks",
    "gc",
    "image_exists",
    "open_session",
    "removed_in_this_process",
    "synthesize_file",
    "task_dirs",
    "load_task",
    "test_commands",
    "test_outcome",
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
