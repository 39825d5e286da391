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
