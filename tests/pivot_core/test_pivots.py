import pytest

from pivot_envs import Message, Pivot, Profile, ToolCall, Trajectory, extract_pivots, select_pivots


def _traj(reward=1.0):
    return Trajectory(
        "t",
        "tool-use",
        (
            Message("system", "s"),
            Message("user", "u"),
            Message("assistant", None, (ToolCall("f", "{}", "1"),)),
            Message("tool", "out", tool_call_id="1"),
            Message("assistant", ""),
            Message("assistant", "done"),
        ),
        reward=reward,
    )


def test_extract_yields_each_nonempty_assistant_turn_with_history():
    pivots = list(extract_pivots(_traj()))
    assert [p.id for p in pivots] == ["t#2", "t#5"]
    assert len(pivots[1].history) == 5 and pivots[1].expert.content == "done"


def test_extract_successful_only_and_skip():
    assert list(extract_pivots(_traj(0.0), successful_only=True)) == []
    kept = list(extract_pivots(_traj(), skip=lambda t, i, m: m.tool_calls != ()))
    assert [p.id for p in kept] == ["t#5"]


def _profiled(i, rewards):
    return Pivot(f"p#{i}", "swe", (), Message("assistant", "x"), profile=Profile(len(rewards), rewards))


def test_select_keeps_mixed_pivots_under_lambda_and_explains_drops():
    pivots = [
        _profiled(0, (0, 0, 0, 0)),
        _profiled(1, (1, 1, 1, 1)),
        _profiled(2, (1, 0, 0, 0)),
        _profiled(3, (1, 1, 1, 0)),
        Pivot("p#4", "swe", (), Message("assistant", "x")),
    ]
    sel = select_pivots(pivots, lam=0.7)
    assert [p.id for p in sel.kept] == ["p#2"]
    assert sel.summary() == {
        "kept": 1,
        "zero_variance_all_fail": 1,
        "zero_variance_all_pass": 1,
        "mean_at_or_above_lambda": 1,
        "unprofiled": 1,
    }


def test_select_leaves_out_pivots_whose_answer_the_agent_can_read_unless_asked():
    import dataclasses

    leaky = dataclasses.replace(_profiled(5, (1, 0, 0, 0)), context={"oracle_readable": ["/protected/map.txt"]})
    pivots = [_profiled(2, (1, 0, 0, 0)), leaky]
    sel = select_pivots(pivots, lam=0.7)
    assert [p.id for p in sel.kept] == ["p#2"] and sel.summary() == {"kept": 1, "oracle_readable": 1}
    assert len(select_pivots(pivots, lam=0.7, keep_oracle_readable=True).kept) == 2


def test_the_bundled_blind_maze_pivots_are_marked_oracle_readable():
    import gymnasium as gym

    env = gym.make("pivot/terminal-v0").unwrapped
    maze = [p for p in env.pivots if p.context.get("task_id") == "blind-maze-explorer-5x5"]
    assert maze and all("/protected/ground_truth_map.txt" in p.context["oracle_readable"] for p in maze)


def test_select_rejects_bad_lambda():
    with pytest.raises(ValueError, match="lam in"):
        select_pivots([], lam=2)
