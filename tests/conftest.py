"""Test isolation and shared fixtures.

- No entry-point plugin loads unless a test asks (`PIVOT_PLUGINS=""`), and every test gets a
  fresh plugin host, so plugins registered inline never leak into other tests.
- `shared_data` is the folder of real public trajectories that sits beside the repository
  (`../shared/data`, or `$PIVOT_SHARED_DATA`); CI always has it, so its absence fails loudly.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ["PIVOT_PLUGINS"] = ""  # an allow-list that admits no third-party plugin

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def fresh_host():
    """Each test gets its own plugin host."""
    from verifiers_plugins import reset_host

    host = reset_host(load_entrypoints=True)
    yield host
    reset_host(load_entrypoints=True)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path of ../shared/data (the real public trajectories)."""
    path = Path(os.environ.get("PIVOT_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))
    if not (path / "nemo_gym_pivot_rows").is_dir():
        pytest.fail(f"shared data not found at {path}: set PIVOT_SHARED_DATA or place shared/ beside the repo")
    return path


@pytest.fixture(scope="session")
def pip_install_plugins(tmp_path_factory):
    """Factory: build plugin distributions from source files and pip-install them, as a user would.

    `pip_install_plugins({dist: (version, files, entry_points)})` writes each distribution's
    `pyproject.toml` (entry points in the group `pivot`) beside its `files` (relative path ->
    text) and runs one `pip install` of all of them into a fresh target folder (no network, no
    change to the shared venv). It returns that folder; `use_plugin_site(folder)` puts it on the
    path. Loading stays subject to the allow-list, which each test sets itself.
    """
    import subprocess
    import sys

    def install(packages: dict[str, tuple[str, dict[str, str], dict[str, str]]]) -> Path:
        root = tmp_path_factory.mktemp("plugins")
        for dist, (version, files, entry_points) in packages.items():
            src = root / "src" / dist
            eps = "\n".join(f'{name} = "{value}"' for name, value in entry_points.items())
            py_modules = sorted({r.removesuffix(".py") for r in files if "/" not in r and r.endswith(".py")})
            packages_ = sorted({r.split("/")[0] for r in files if "/" in r})
            pyproject = (
                '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n\n'
                f'[project]\nname = "{dist}"\nversion = "{version}"\n\n[project.entry-points.pivot]\n{eps}\n\n'
                f"[tool.setuptools]\npy-modules = {py_modules!r}\npackages = {packages_!r}\n".replace("'", '"')
            )
            for rel, text in {"pyproject.toml": pyproject, **files}.items():
                (src / rel).parent.mkdir(parents=True, exist_ok=True)
                (src / rel).write_text(text)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--no-build-isolation",
                "--no-index",
                "--target",
                str(root / "site"),
                *(str(root / "src" / d) for d in packages),
            ],
            check=True,
            capture_output=True,
        )
        return root / "site"

    return install


@pytest.fixture
def use_plugin_site(monkeypatch):
    """Put a folder of installed distributions on `sys.path` and `PYTHONPATH` (for subprocesses).

    `importlib.metadata` then finds them like any installed distribution. Modules imported from
    the folder are dropped from `sys.modules` at teardown.
    """
    import importlib
    import sys

    sites: list[str] = []

    def use(site: Path) -> None:
        sites.append(str(site))
        monkeypatch.syspath_prepend(str(site))
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p))
        importlib.invalidate_caches()

    yield use
    for name, module in list(sys.modules.items()):
        if any(str(getattr(module, "__file__", None) or "").startswith(s) for s in sites):
            del sys.modules[name]


@pytest.fixture(scope="session")
def tiny_policy(tmp_path_factory):
    """A ~170k-parameter model SFT'd briefly on the bundled tool-use pivots, built once per session.

    Returns a `trainers.demo.tiny_model.TinyPolicy` (`.path`, the prompt cuts it was trained with, and
    `.backend_config()`). Set `PIVOT_TINY_POLICY_DIR` to reuse one build across sessions locally.
    """
    from trainers.demo.tiny_model import build_test_policy

    folder = os.environ.get("PIVOT_TINY_POLICY_DIR") or tmp_path_factory.mktemp("tiny_policy")
    return build_test_policy(folder)


@pytest.fixture(scope="session")
def ray_cluster():
    """A local 2-CPU Ray cluster shared by the executor tests (starting one costs ~10-20 s)."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()
