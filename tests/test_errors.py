"""One error tree per package: every exception the project defines sits in its package's `errors.py`,
under `pivot_core.PivotGymError` (warnings aside), so `except PivotGymError` catches what we raise on purpose."""

import importlib
import inspect
import pkgutil

import pytest

from pivot_core import PivotGymError

PACKAGES = (
    "pivot_core",
    "pivot_sandbox",
    "pivot_tool_worlds",
    "verifiers_plugins",
    "pivot_tasks",
    "pivot_envs",
    "trainers",
    "pivot_cli",
)
# modules that need an optional engine to import are read where they are installed (CI installs all)
OPTIONAL = ("trainers.backends._vllm", "trainers._vllm_sync")


def _modules(package: str):
    root = importlib.import_module(package)
    yield root
    for info in pkgutil.walk_packages(root.__path__, package + "."):
        if ".data" in info.name or info.name.endswith("__main__") or info.name in OPTIONAL:
            continue
        yield importlib.import_module(info.name)


@pytest.mark.parametrize("package", PACKAGES)
def test_every_exception_is_a_pivot_gym_error_in_its_errors_module(package):
    offenders = []
    for module in _modules(package):
        for name, cls in inspect.getmembers(module, inspect.isclass):
            # warnings, and BaseException signals that `except Exception` must let pass, are not errors
            if cls.__module__ != module.__name__ or not issubclass(cls, Exception) or issubclass(cls, Warning):
                continue
            if not issubclass(cls, PivotGymError):
                offenders.append(f"{module.__name__}.{name} is not a PivotGymError")
            elif module.__name__ != f"{package}.errors":
                offenders.append(f"{module.__name__}.{name} is defined outside {package}.errors")
    assert not offenders, offenders
