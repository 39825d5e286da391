import gymnasium as gym
import pytest

import pivot_envs
from pivot_core.errors import UnknownPivot
from pivot_envs import check_pivot_env, render_completion


@pytest.mark.parametrize("env_id", pivot_envs.ENV_IDS)
def test_check_pivot_env(env_id):
    check_pivot_env(gym.make(env_id))


@pytest.mark.parametrize("env_id", pivot_envs.ENV_IDS)
def test_namespaced_make_imports_the_package(env_id):
    env = gym.make(f"pivot_envs:{env_id}")
    obs, info = env.reset(seed=0)
    assert info["pivot_id"] == obs["pivot_id"]


@pytest.mark.parametrize("env_id", pivot_envs.ENV_IDS)
def test_empty_and_wrong_tool_completions_score_zero(env_id):
    env = gym.make(env_id)
    for pivot in env.unwrapped.pivots:
        env.reset(options={"pivot_id": pivot.id})
        assert env.step("")[1] == 0.0, pivot.id
        if pivot.expert.tool_calls:
            other = next((n for n in pivot.tool_names if n != pivot.expert.tool_calls[0].name), "no_such_tool")
            wrong = f'<tool_call>\n{{"name": "{other}", "arguments": {{}}}}\n</tool_call>'
            reward, info = env.step(wrong)[1], env.step(wrong)[4]
            assert reward == 0.0, (pivot.id, info["decided_by"])


def test_seeded_reset_is_deterministic_and_pivot_id_option_pins():
    env = gym.make("pivot/tool-use-v0")
    a = [env.reset(seed=7)[1]["pivot_id"] for _ in range(3)]
    b = [env.reset(seed=7)[1]["pivot_id"] for _ in range(3)]
    assert a == b
    target = env.unwrapped.pivots[3].id
    assert env.reset(options={"pivot_id": target})[1]["pivot_id"] == target


def test_unknown_pivot_id_suggests_close_match():
    env = gym.make("pivot/swe-v0")
    real = env.unwrapped.pivots[0].id
    with pytest.raises(UnknownPivot, match="Did you mean"):
        env.reset(options={"pivot_id": real[:-1] + "9"})


def test_step_info_reports_verdicts_per_verifier():
    env = gym.make("pivot/tool-use-v0")
    pivot = next(p for p in env.unwrapped.pivots if p.expert.tool_calls)
    env.reset(options={"pivot_id": pivot.id})
    _, reward, terminated, truncated, info = env.step(render_completion(pivot.expert, pivot.domain))
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["verdicts"]["turn_kind"]["accepted"] is True
    assert info["verdicts"][info["decided_by"]]["accepted"] is True
    assert set(info["verdicts"]["turn_kind"]) >= {"accepted", "reward", "reason", "error"}


def test_verifiers_override_by_name():
    env = gym.make("pivot/tool-use-v0", verifiers=["tool_name"], verifier_config={"tool_name": {"by_category": False}})
    assert env.unwrapped.chain.names == ["tool_name"]
    pivot = next(p for p in env.unwrapped.pivots if p.expert.tool_calls)
    env.reset(options={"pivot_id": pivot.id})
    call = pivot.expert.tool_calls[0]
    # same tool, junk arguments: tool_name alone accepts what tool_args would reject
    assert env.step(f'<tool_call>{{"name": "{call.name}", "arguments": {{"x": 1}}}}</tool_call>')[1] == 1.0


def test_make_vec_pins_all_copies_to_one_pivot():
    venv = gym.make_vec("pivot/tool-use-v0", num_envs=4, vectorization_mode="sync")
    target = venv.unwrapped.envs[0].unwrapped.pivots[2]
    obs, info = venv.reset(seed=0, options={"pivot_id": target.id})
    assert list(info["pivot_id"]) == [target.id] * 4
    good = render_completion(target.expert, target.domain)
    _, rewards, terminated, _, _ = venv.step((good, "", good, "nonsense"))
    assert list(rewards) == [1.0, 0.0, 1.0, 0.0]
    assert all(terminated)


def test_dataset_argument_loads_a_file(tmp_path, shared_data):
    src = shared_data / "nemo_gym_pivot_rows" / "swe_pivot.example.jsonl"
    env = gym.make("pivot/swe-v0", dataset=str(src))
    assert len(env.unwrapped.pivots) == 5
    check_pivot_env(env)


def test_score_batches_a_group():
    env = gym.make("pivot/terminal-v0")
    pivot = env.unwrapped.pivots[0]
    good = render_completion(pivot.expert, pivot.domain)
    results = env.unwrapped.score(pivot, [good, "", "{}", good])
    assert [r.reward for r in results] == [1.0, 0.0, 0.0, 1.0]


def test_a_completion_past_max_completion_chars_scores_zero_unparsed_in_step_and_score():
    env = gym.make("pivot/tool-use-v0", max_completion_chars=1000).unwrapped
    pivot = env.pivots[3]
    expert = render_completion(pivot.expert, pivot.domain)
    huge = expert + " " * 2000  # the expert's own action, padded past the limit
    env.reset(options={"pivot_id": pivot.id})
    _, reward, terminated, _, info = env.step(huge)
    assert reward == 0.0 and terminated and info["decided_by"] == "max_completion_chars"
    assert "allows 1000" in info["verdicts"]["max_completion_chars"]["reason"]
    assert [r.reward for r in env.score(pivot, [huge, expert])] == [0.0, 1.0]


def test_a_huge_unknown_pivot_id_fails_fast_without_a_suggestion():
    from pivot_core.errors import UnknownPivot

    env = gym.make("pivot/tool-use-v0").unwrapped
    with pytest.raises(UnknownPivot, match="expected a pivot id of this env"):
        env.pivot("x" * 1_000_000)
