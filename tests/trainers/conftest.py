"""Fixtures for trainer tests: a tiny random-init model built once per session (no download)."""

import pytest


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    from trainers.tiny_model import build_tiny_model

    out = tmp_path_factory.mktemp("tiny")
    build_tiny_model(out)
    return out
