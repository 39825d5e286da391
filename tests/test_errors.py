"""One error tree per package: every exception the project defines sits in its package's `errors.py`,
under `pivot_core.PivotGymError` (warnings aside), so `except PivotGymError` catches what we raise on purpose."""

import importlib
import inspect
import pkgutil
import tomllib
from pathlib import Path

import pytest

from pivot_core import PivotGymError

ROOT = Path(__file__).resolve().parent.parent
# the packages, bottom floor first, as the import-linter contract names them (one list for every check)
PACKAGES = tuple(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"])
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
