"""Shell sandboxes: restore a pivot's state in a container and capture what an action does.

The Docker backend (`pivot_sandbox.docker.backend.DockerBackend`) is loaded lazily through
the `register_sandboxes` hook, so importing this package never imports docker.
"""

import importlib

from pivot_sandbox._bounds import action_bound, limits_of, state_bound, tests_bound
from pivot_sandbox._plugin import (
    BACKEND_NAMES,
    chosen_backend,
    default_backend,
    docker_backend,
    namespace_backend,
    namespace_details,
    namespace_gc,
    usable_backends,
    verification_backend,
)
from pivot_sandbox.contract.backend import SandboxBackend
from pivot_sandbox.contract.check import check_backend
from pivot_sandbox.contract.effects import (
    STDERR_MODES,
    Comparison,
    compare_effects,
    is_racy,
    mask_durations,
    normalize_output,
    reason_for,
)
from pivot_sandbox.contract.equivalents import registry_equivalent
from pivot_sandbox.contract.marks import ReplayMark, RunFacts, SandboxContext, unsandbox
from pivot_sandbox.contract.network import NETWORK, needs_network
from pivot_sandbox.contract.spec import LABEL, Effect, Limits, SandboxSpec
from pivot_sandbox.contract.unstable import Unstable, path_shape, unstable_parts
from pivot_sandbox.errors import (
    BackendContractError,
    DockerfileError,
    ProcessesNotRestored,
    RunnerLost,
    SandboxError,
    SandboxUnavailable,
    TaskError,
)

# What needs the Docker SDK (sessions, task images, synthesis, clean-up) is imported when first asked
# for: every verifier module of this package imports the package, and the static chains must not pay
# for docker.
_LAZY = {
    "BUILDERS": "images.stock",
    "image_exists": "images.stock",
    "image_id": "images.stock",
    "gc": "docker.cleanup",
    "removed_in_this_process": "docker.cleanup",
    "open_session": "replay.session",
    "SESSION_NETWORKS": "replay.session",
    "task_image": "tasks.terminal_bench",
    "registry_hosts": "images.access",
    "HUB_DOWNLOADS": "images.dockerfile",
    "hosts_in": "images.dockerfile",
    "build_tasks": "tasks.terminal_bench",
    "task_dirs": "tasks.terminal_bench",
    "is_harbor_task": "tasks.harbor",
    "load_task": "tasks.terminal_bench",
    "test_outcome": "tasks.harness",
    "TestOutcome": "tasks.harness",
    "TESTS_VENV": "tasks.harness",
    "TEST_LIMITS": "tasks.verification",
    "run_tests": "tasks.verification",
    "run_task_tests": "tasks.verification",
    "oracle_check": "tasks.verification",
    "task_dir_digest": "tasks.verification",
    "task_limits": "tasks.verification",
    "task_context": "tasks.verification",
    "resolve_task_dir": "tasks.folders",
    "bundled_task_dir": "tasks.folders",
    "SWEInstance": "tasks.swe",
    "load_instances": "tasks.swe",
    "swe_image": "tasks.swe_image",
    "SWE_LIMITS": "tasks.swe_tests",
    "SWE_STATE_LIMITS": "tasks.swe_tests",
    "SWEOutcome": "tasks.swe_tests",
    "run_swe_tests": "tasks.swe_tests",
    "swe_spec": "tasks.swe_tests",
    "validate_instance": "tasks.swe_tests",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return getattr(importlib.import_module(f"pivot_sandbox.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "SWEInstance",
    "SWEOutcome",
    "SWE_LIMITS",
    "SWE_STATE_LIMITS",
    "load_instances",
    "run_swe_tests",
    "swe_image",
    "swe_spec",
    "validate_instance",
    "TEST_LIMITS",
    "bundled_task_dir",
    "oracle_check",
    "resolve_task_dir",
    "run_task_tests",
    "run_tests",
    "verification_backend",
    "task_dir_digest",
    "task_limits",
    "task_context",
    "BackendContractError",
    "SandboxBackend",
    "check_backend",
    "BUILDERS",
    "build_tasks",
    "gc",
    "image_exists",
    "image_id",
    "open_session",
    "SESSION_NETWORKS",
    "removed_in_this_process",
    "HUB_DOWNLOADS",
    "NETWORK",
    "hosts_in",
    "needs_network",
    "registry_equivalent",
    "registry_hosts",
    "task_image",
    "task_dirs",
    "is_harbor_task",
    "load_task",
    "test_outcome",
    "LABEL",
    "STDERR_MODES",
    "TESTS_VENV",
    "TestOutcome",
    "path_shape",
    "reason_for",
    "Comparison",
    "Effect",
    "Limits",
    "DockerfileError",
    "RunnerLost",
    "SandboxError",
    "ProcessesNotRestored",
    "TaskError",
    "SandboxSpec",
    "SandboxContext",
    "ReplayMark",
    "RunFacts",
    "unsandbox",
    "SandboxUnavailable",
    "Unstable",
    "compare_effects",
    "is_racy",
    "docker_backend",
    "namespace_backend",
    "namespace_details",
    "namespace_gc",
    "chosen_backend",
    "default_backend",
    "usable_backends",
    "BACKEND_NAMES",
    "mask_durations",
    "normalize_output",
    "unstable_parts",
    "action_bound",
    "limits_of",
    "state_bound",
    "tests_bound",
]
