"""`pivot plugins new`: the generated package installs, passes its own tests unchanged, and loads."""

import json
import os
import subprocess
import sys

import pytest

from verifiers_plugins import HOOK_API_VERSION, get_verifiers
from verifiers_plugins._scaffold import scaffold_names


def pivot_cli(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "pivot_cli", *args], capture_output=True, text=True, timeout=120, cwd=cwd
    )


@pytest.mark.slow
def test_scaffold_round_trip(tmp_path, monkeypatch, use_plugin_site):
    out = pivot_cli("plugins", "new", "api_call_check", "--out", str(tmp_path), "--json")
    assert out.returncode == 0, out.stderr
    created = json.loads(out.stdout)
    root = tmp_path / "pivot-verifier-api-call-check"
    assert created["path"] == str(root)
    assert {
        "pyproject.toml",
        "README.md",
        "src/pivot_verifier_api_call_check/plugin.py",
        "tests/test_api_call_check.py",
        "tests/conftest.py",
    } <= set(created["files"])

    # pip install, as a user would (into a private target: the shared venv is left alone).
    site = tmp_path / "site-packages"
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
            str(site),
            str(root),
        ],
        check=True,
        capture_output=True,
    )
    use_plugin_site(site)

    # Its own tests, unchanged, against the installed copy (they include the audit kit).
    env = {**os.environ, "PIVOT_PLUGINS": ""}  # its conftest sets its own allow-list
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "4 passed" in run.stdout

    # Discovered through its entry point like any installed plugin.
    monkeypatch.setenv("PIVOT_PLUGINS", "pivot-verifier-api-call-check")
    reg = get_verifiers()["api_call_check"]
    assert (reg.plugin, reg.distribution, reg.version) == ("api_call_check", "pivot-verifier-api-call-check", "0.1.0")
    check = pivot_cli("plugins", "--check", "--json")
    assert check.returncode == 0 and json.loads(check.stdout)["problems"] == []


def test_scaffold_refuses_to_overwrite_and_rejects_bad_names(tmp_path):
    assert pivot_cli("plugins", "new", "my-check", "--out", str(tmp_path)).returncode == 0
    again = pivot_cli("plugins", "new", "my_check", "--out", str(tmp_path))
    assert again.returncode == 1 and "already exists" in again.stderr
    bad = pivot_cli("plugins", "new", "9 lives", "--out", str(tmp_path))
    assert bad.returncode == 1 and "expected a lowercase verifier name" in bad.stderr


def test_scaffold_names():
    assert scaffold_names("api-call") == {
        "name": "api_call",
        "dist": "pivot-verifier-api-call",
        "package": "pivot_verifier_api_call",
        "cls": "ApiCall",
        "api": str(HOOK_API_VERSION),  # the scaffold pins the hook API it was written against
    }
