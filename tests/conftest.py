"""Test isolation: no entry-point plugins unless a test asks, and a fresh plugin host per test."""

from __future__ import annotations

import os

import pytest

os.environ["PIVOT_PLUGINS"] = ""  # an allow-list that admits no third-party plugin


@pytest.fixture(autouse=True)
def fresh_host():
    """Each test gets its own plugin host, so plugins registered inline never leak."""
    from verifiers_plugins import reset_host

    host = reset_host(load_entrypoints=True)
    yield host
    reset_host(load_entrypoints=True)
