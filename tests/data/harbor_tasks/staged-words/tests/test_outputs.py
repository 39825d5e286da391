"""Checks of the staged-words CI task: the words the builder stage wrote arrived, and gamma is counted."""

import random
from pathlib import Path


def _words():
    random.seed(39)  # as environment/make_words.py draws them
    return [random.choice(["alpha", "beta", "gamma", "delta", "epsilon"]) for _ in range(40)]


def test_words_untouched():
    assert Path("/app/words.txt").read_text().split("\n") == [*_words(), ""]


def test_gamma_counted():
    assert Path("/app/gamma.txt").read_text().strip() == str(_words().count("gamma"))
