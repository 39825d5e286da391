"""examples/trl_grpo.py runs as its users run it: a script, given a model folder."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_trl_grpo_example_runs(tiny_policy, tmp_path):
    script = ROOT / "examples" / "trl_grpo.py"
    assert len(script.read_text().splitlines()) < 30  # the whole TRL run, short enough to read at a glance
    done = subprocess.run(
        [sys.executable, str(script), str(tiny_policy.path), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "rewards/pivot_reward/mean" in done.stdout
