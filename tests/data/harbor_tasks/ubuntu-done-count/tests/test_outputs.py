"""Checks of the ubuntu-done-count CI task (bc is installed by test.sh)."""

import subprocess
from pathlib import Path


def test_done_count():
    expected = subprocess.run(["bc"], input="1 + 1 + 1\n", capture_output=True, text=True, check=True).stdout
    assert Path("/app/done.txt").read_text().strip() == expected.strip()
