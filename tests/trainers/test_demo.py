"""`pivot demo pivotrl --quick`: every stage runs and the JSON has one row per method."""

import json
import math

import pytest
from typer.testing import CliRunner

from pivot_envs.cli import app
from trainers.demo import split_pivots, trajectory_of


def test_split_keeps_trajectories_whole():
    import gymnasium as gym

    import pivot_envs  # noqa: F401

    pivots = gym.make("pivot/tool-use-v0").unwrapped.pivots
    train, held = split_pivots(pivots, 3)
    assert len(train) + len(held) == len(pivots) and held and train
    assert not {trajectory_of(p) for p in train} & {trajectory_of(p) for p in held}
    assert split_pivots(pivots, 3) == (train, held)  # fixed, not drawn


@pytest.mark.slow
def test_demo_quick_writes_the_table(tmp_path):
    # --quick: the CI configuration (4 GRPO steps per method, P=2, G=4, 48-token completions)
    out = tmp_path / "results.json"
    result = CliRunner().invoke(
        app, ["demo", "pivotrl", "--quick", "--out", str(tmp_path / "demo"), "--json", str(out)]
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(out.read_text())["rows"]
    assert [r["method"] for r in rows] == ["sft", "pivotrl", "no_filter", "strict"]
    for r in rows:
        assert 0.0 <= r["heldout_accept"] <= 1.0 and 0.0 <= r["zero_var_share"] <= 1.0
        assert math.isfinite(r["reward_std"])
    assert (tmp_path / "demo" / "reward_std.png").stat().st_size > 0
