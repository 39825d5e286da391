"""Test isolation: only this distribution's plugin loads, and every test gets a fresh host."""

import os

import pytest

# The allow-list admits this distribution and no other installed plugin (read when the host loads).
os.environ["PIVOT_PLUGINS"] = "pivot-verifier-ast"


@pytest.fixture(autouse=True)
def fresh_host():
    """A fresh plugin host per test."""
    from verifiers_plugins import reset_host

    yield reset_host()
    reset_host()
