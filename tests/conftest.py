"""Test isolation and shared fixtures.

- No entry-point plugin loads unless a test asks (`PIVOT_PLUGINS=""`), and every test gets a
  fresh plugin host, so plugins registered inline never leak into other tests.
- `shared_data` is the folder of real public trajectories (`$PIVOT_SHARED_DATA`, `../shared/data`
  beside the checkout, or where `pivot data fetch` put it: `pivot_core.shared_data_roots()`).
  Without it, the tests that need it are skipped and one summary line says how to get it; with
  `PIVOT_REQUIRE_SHARED_DATA=1` (set by `.ci/run` where the data is present) they fail instead.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ["PIVOT_PLUGINS"] = ""  # an allow-list that admits no third-party plugin
# task folders written for the tests carry their own pytest files: the sandbox runs those, not this suite
collect_ignore_glob = ["data/*"]

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def fresh_host():
    """Each test gets its own plugin host."""
    from verifiers_plugins import reset_host

    host = reset_host(load_entrypoints=True)
    yield host
    reset_host(load_entrypoints=True)


SHARED_DATA_SKIP = "needs the shared data"
HOW_TO_GET_SHARED_DATA = (
    "the real public trajectories, about 60 MB: set PIVOT_SHARED_DATA=DIR to a copy of the shared data folder, "
    "or run `pivot data fetch` for its public files"
)


def find_shared_data() -> tuple[Path | None, str]:
    """The first shared-data folder holding every file of the shipped manifest, else (None, what is missing)."""
    import json
    from importlib import resources

    from pivot_core import shared_data_roots

    manifest = json.loads((resources.files("pivot_core") / "data" / "shared_sources.json").read_text())
    wanted = [e["path"] for e in manifest["files"] + manifest["derived"]]
    roots = shared_data_roots()
    partial = []
    for root in roots:
        missing = [p for p in wanted if not (root / p).is_file()]
        if not missing:
            return root, ""
        if len(missing) < len(wanted):  # a partial copy (a fetch without the converted files): say what lacks
            partial.append(f"{root} lacks {len(missing)} of its {len(wanted)} files, e.g. {missing[0]}")
    searched = "searched " + (", ".join(map(str, roots)) or "nothing (PIVOT_NO_SHARED_DATA is set)")
    return None, "; ".join(partial) or searched


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared data folder (the real public trajectories); skips the test when there is none."""
    root, why = find_shared_data()
    if root is not None:
        return root
    message = f"{SHARED_DATA_SKIP} ({HOW_TO_GET_SHARED_DATA}); {why}"
    if os.environ.get("PIVOT_REQUIRE_SHARED_DATA", "") not in ("", "0"):
        pytest.fail(f"PIVOT_REQUIRE_SHARED_DATA is set but the data is not usable: {message}")
    pytest.skip(message)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Report every shared-data skip at one place, so that `-ra` folds them into one line."""
    report = yield
    if report.skipped and isinstance(report.longrepr, tuple) and SHARED_DATA_SKIP in report.longrepr[2]:
        report.longrepr = (str(Path(__file__).relative_to(REPO_ROOT)), 1, report.longrepr[2])
    return report


def pytest_terminal_summary(terminalreporter) -> None:
    """One line for the tests skipped for want of the shared data (`-ra` prints it itself when on)."""
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if SHARED_DATA_SKIP in str(r.longrepr)]
    if skipped and not {"s", "a", "A"} & set(terminalreporter.reportchars):
        terminalreporter.write_line(f"{len(skipped)} tests skipped: {SHARED_DATA_SKIP} ({HOW_TO_GET_SHARED_DATA})")


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

    Returns a `pivot_demo.tiny_model.TinyPolicy` (`.path`, the prompt cuts it was trained with, and
    `.backend_config()`). Set `PIVOT_TINY_POLICY_DIR` to reuse one build across sessions locally.
    """
    from pivot_demo.tiny_model import build_test_policy

    folder = os.environ.get("PIVOT_TINY_POLICY_DIR") or tmp_path_factory.mktemp("tiny_policy")
    return build_test_policy(folder)


@pytest.fixture(scope="session")
def ray_cluster():
    """A local 2-CPU Ray cluster shared by the executor tests (starting one costs ~10-20 s)."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def hello_world_agent_runs(shared_data: Path, tmp_path_factory) -> tuple[Path, list]:
    """The real OpenHands and mini-swe-agent runs on hello-world, converted and sandboxed in the CI task's image.

    Returns the pivot file and its pivots (every one sandboxed).
    """
    from importlib import resources

    from pivot_core import convert_runs, write_pivots
    from pivot_tasks import sandbox_pivots

    tasks = Path(str(resources.files("pivot_core") / "data" / "terminal_tasks"))
    pivots = []
    for agent in ("openhands-claude-4-sonnet", "mini-swe-agent-claude-4-sonnet"):
        pivots.extend(convert_runs(shared_data / "terminal" / "agent_runs" / agent / "hello-world")[0])
    sandboxed, report = sandbox_pivots(pivots, tasks)
    assert report["sandboxed"] == len(pivots), report
    path = tmp_path_factory.mktemp("agent-runs") / "pivots.jsonl"
    write_pivots(sandboxed, path)
    return path, sandboxed
