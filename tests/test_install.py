"""What a newcomer meets: the minimal install, and a test suite without the shared data."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_minimal_install_checks_hold_with_the_extras_blocked():
    # .ci/run runs the same script in a real bare venv (pip install . without extras); here the
    # extras' modules are blocked in-process, so a hard import of docker/torch/h11 fails this test.
    run = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "check_minimal_install.py"), "--simulate-bare"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd="/",
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "pip install 'pivot-gym[sandbox]'" in run.stdout


def test_docker_backend_without_the_sdk_says_what_to_install(monkeypatch):
    from pivot_sandbox import SandboxUnavailable, docker_backend

    for name in [m for m in sys.modules if m == "docker" or m.startswith(("docker.", "pivot_sandbox.docker.backend"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "docker", None)  # `import docker` now fails as when it is not installed
    with pytest.raises(SandboxUnavailable, match=r"pip install 'pivot-gym\[sandbox\]'.*Docker engine"):
        docker_backend(pool_size=0, probe="no-sdk")


def test_namespace_backend_without_the_sdk_says_what_to_install(monkeypatch):
    # the namespace backend is the default where it runs, and takes its images from Docker
    from pivot_sandbox import SandboxUnavailable, namespace_backend, usable_backends

    monkeypatch.delitem(sys.modules, "docker", raising=False)
    monkeypatch.setitem(sys.modules, "docker", None)  # `import docker` now fails as when it is not installed
    runs_here = usable_backends()["namespace"] is None
    expected = r"pip install 'pivot-gym\[sandbox\]'.*Docker engine" if runs_here else "cannot run here"
    with pytest.raises(SandboxUnavailable, match=expected):
        namespace_backend(max_snapshots=7)  # a configuration of its own: no backend made before


def _pytest(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    test = tmp_path / "test_needs_data.py"
    test.write_text(
        "def test_a(shared_data):\n    assert shared_data.is_dir()\n\n"
        "def test_b(shared_data):\n    assert shared_data.is_dir()\n\n"
        "def test_c():\n    pass\n"
    )
    # the suite's conftest, copied beside the probe test: the same fixture and hooks, no other test
    (tmp_path / "conftest.py").write_text((REPO / "tests" / "conftest.py").read_text())
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PIVOT_")} | env
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), *args, str(test)],
        capture_output=True,
        text=True,
        timeout=300,
        env=environ,
        cwd=tmp_path,
    )


def test_without_the_shared_data_its_tests_skip_with_one_line_saying_how_to_get_it(tmp_path):
    run = _pytest(tmp_path, "-rs", PIVOT_NO_SHARED_DATA="1")
    assert run.returncode == 0, run.stdout + run.stderr
    lines = [line for line in run.stdout.splitlines() if "needs the shared data" in line]
    assert len(lines) == 1 and lines[0].startswith("SKIPPED [2]"), run.stdout
    assert "pivot data fetch" in lines[0] and "PIVOT_SHARED_DATA" in lines[0]
    assert "1 passed, 2 skipped" in run.stdout
    # without -r s, the conftest's own summary line says the same in one line
    quiet = _pytest(tmp_path, "-rN", PIVOT_NO_SHARED_DATA="1")
    assert (
        [line for line in quiet.stdout.splitlines() if "shared data" in line]
        == [line for line in quiet.stdout.splitlines() if line.startswith("2 tests skipped: needs the shared data")]
        != []
    )


def test_where_the_data_is_required_a_skip_for_want_of_it_fails(tmp_path):
    run = _pytest(tmp_path, PIVOT_NO_SHARED_DATA="1", PIVOT_REQUIRE_SHARED_DATA="1")
    assert run.returncode == 1 and "2 errors" in run.stdout, run.stdout
    assert "PIVOT_REQUIRE_SHARED_DATA is set" in run.stdout


def test_shared_data_roots_honour_the_opt_out(monkeypatch, tmp_path):
    from pivot_core import shared_data_file, shared_data_roots

    monkeypatch.delenv("PIVOT_NO_SHARED_DATA", raising=False)
    monkeypatch.setenv("PIVOT_SHARED_DATA", str(tmp_path))
    (tmp_path / "x.json").write_text("{}")
    assert shared_data_roots()[0] == tmp_path and shared_data_file("x.json") == tmp_path / "x.json"
    monkeypatch.setenv("PIVOT_NO_SHARED_DATA", "1")
    assert shared_data_roots() == [] and shared_data_file("x.json") is None


def test_a_partial_copy_is_named_and_a_complete_one_later_is_still_found(monkeypatch, tmp_path):
    import importlib.util
    import json
    from importlib import resources

    import pivot_core

    spec = importlib.util.spec_from_file_location("suite_conftest", REPO / "tests" / "conftest.py")
    suite_conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(suite_conftest)
    find_shared_data = suite_conftest.find_shared_data
    manifest = json.loads((resources.files("pivot_core") / "data" / "shared_sources.json").read_text())
    paths = [e["path"] for e in manifest["files"] + manifest["derived"]]
    partial, complete = tmp_path / "fetched", tmp_path / "copy"
    for root, names in ((partial, paths[:3]), (complete, paths)):
        for name in names:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).touch()
    monkeypatch.setattr(pivot_core, "shared_data_roots", lambda: [partial, complete])
    assert find_shared_data() == (complete, "")
    monkeypatch.setattr(pivot_core, "shared_data_roots", lambda: [partial])
    root, why = find_shared_data()
    assert root is None and f"lacks {len(paths) - 3} of its {len(paths)} files" in why
