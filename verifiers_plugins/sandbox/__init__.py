"""Shell sandboxes: restore a pivot's state in a container and capture what an action does.

The Docker backend (`verifiers_plugins.sandbox._docker.DockerBackend`) is loaded lazily through
the `register_sandboxes` hook, so importing this package never imports docker.
"""

from verifiers_plugins.errors import SandboxError, SandboxUnavailable
from verifiers_plugins.sandbox._cleanup import gc, removed_in_this_process
from verifiers_plugins.sandbox._effects import Comparison, Unstable, compare_effects, normalize_output, unstable_parts
from verifiers_plugins.sandbox._images import BUILDERS, image_exists
from verifiers_plugins.sandbox._plugin import docker_backend
from verifiers_plugins.sandbox._session import open_session
from verifiers_plugins.sandbox._spec import LABEL, Effect, Limits, SandboxSpec
from verifiers_plugins.sandbox._synthesize import synthesize_file
from verifiers_plugins.sandbox._tasks import build_tasks, task_dirs

__all__ = [
    "BUILDERS",
    "build_tasks",
    "gc",
    "image_exists",
    "open_session",
    "removed_in_this_process",
    "synthesize_file",
    "task_dirs",
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
