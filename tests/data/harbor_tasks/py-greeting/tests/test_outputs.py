"""Checks of the py-greeting CI task."""

from pathlib import Path


def test_greeting_written():
    assert Path("/app/greeting.txt").read_text() == "hello, harbor\n"


def test_seed_untouched():
    assert Path("/app/seed.txt").read_text() == "seed: do not change\n"
