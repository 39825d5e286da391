"""The SkyRL adapter through skyrl-gym and SkyRL themselves: PromptDataset rows, skyrl_gym.make, BaseTextEnv."""

import json

import gymnasium as gym
import pytest
import skyrl_gym
from skyrl.train.dataset.dataset import PromptDataset

# skyrl-gym and skyrl are CI installs (.ci/run): a missing one fails here, it is never skipped.
from skyrl_gym.envs.base_text_env import BaseTextEnv

import pivot_envs  # noqa: F401
from trainers.adapters import skyrl
from trainers.adapters._common import expert_text, with_tools_in_system


@pytest.fixture(scope="module")
def env():
    return gym.make("pivot/tool-use-v0").unwrapped


@pytest.fixture(scope="module")
def tokenizer(env):
    from pivot_demo.tiny_model import _bootstrap_tokenizer, build_tokenizer, corpus_texts

    return build_tokenizer(corpus_texts(env.pivots, _bootstrap_tokenizer()), 1024)


def test_prompt_dataset_rows_made_into_envs_by_skyrl_gym(env, tokenizer, tmp_path):
    pivots = [env.pivots[0], next(p for p in env.pivots if p.expert.tool_calls and p.context.get("world"))]
    path = tmp_path / "train.parquet"
    assert skyrl.write_skyrl_parquet(pivots, path) == 2
    dataset = PromptDataset(str(path), tokenizer, max_prompt_length=100_000, num_workers=1)
    assert len(dataset) == 2
    skyrl.register()
    skyrl.register()  # idempotent
    assert skyrl_gym.registry[skyrl.ENV_CLASS].entry_point == skyrl.ENTRY_POINT
    for i, pivot in enumerate(pivots):
        messages, env_class, extras, _ = dataset[i]
        assert env_class == skyrl.ENV_CLASS and extras["extra_info"]["pivot_id"] == pivot.id
        for completion, reward in ((expert_text(pivot), 1.0), ("I cannot help with that.", 0.0)):
            # what SkyRL's generator does per trajectory
            text_env = skyrl_gym.make(env_class, env_config={}, extras=extras)
            assert isinstance(text_env, BaseTextEnv)
            prompt, _ = text_env.init(messages)
            assert prompt == with_tools_in_system(messages, pivot.tools)
            out = text_env.step(completion)
            (expected,) = env.score(pivot, [completion])
            assert out["reward"] == expected.reward == reward and out["done"] and out["observations"] == []
            text_env.close()


def test_row_without_a_readable_pivot_is_an_error_verdict():
    text_env = skyrl.PivotTextEnv({}, {"extra_info": {"pivot_json": "{not json"}})
    out = text_env.step("anything")
    assert out["reward"] == 0.0 and out["metadata"]["error"]


def test_episode_rows_play_whole_episodes_with_done_only_at_the_end(tokenizer, tmp_path):
    from pivot_core import render_completion

    episodes = gym.make("pivot/tool-use-episode-v0").unwrapped
    firsts = {}
    for p in episodes.pivots:
        firsts.setdefault(p.context["trajectory_id"], p)
    pivots = list(firsts.values())[:3]
    path = tmp_path / "episodes.parquet"
    skyrl.write_skyrl_parquet(pivots, path, env_id="pivot/tool-use-episode-v0")
    dataset = PromptDataset(str(path), tokenizer, max_prompt_length=100_000, num_workers=1)
    skyrl.register()
    rewards = []
    for i, pivot in enumerate(pivots):
        messages, env_class, extras, _ = dataset[i]
        recorded = episodes.recorded_messages(pivot)
        turns = [render_completion(m, "tool-use") for m in recorded[len(pivot.history) :] if m.role == "assistant"]
        # the same turns in process, for the expected outcome and observations
        episodes.reset(options={"pivot_id": pivot.id})
        expected = []
        for t in turns:
            expected.append(episodes.step(t))
            if episodes.ended:
                break
        text_env = skyrl_gym.make(env_class, env_config={}, extras={**extras, "max_turns": 1})
        prompt, meta = text_env.init(messages)
        assert prompt == with_tools_in_system(messages, pivot.tools) and meta["pivot_id"] == pivot.id
        for k, (_, reward, terminated, truncated, info) in enumerate(expected):
            out = text_env.step(turns[k])
            last = k == len(expected) - 1
            assert out["done"] is last and (terminated or truncated) is last  # done only at the episode's end
            if not last:
                assert out["reward"] == 0.0
                assert [o["content"] for o in out["observations"]] == [m["content"] for m in info["new_messages"]]
            else:
                assert out["reward"] == (0.0 if info["outcome"]["error"] else reward)
                assert out["metadata"]["outcome"] == info["outcome"]
        rewards.append(out["reward"])
        assert text_env.episode is None  # given back at the end
    assert len(expected) > 1 and 1.0 in rewards


def test_a_tool_use_pivots_prompt_as_skyrl_renders_it_holds_its_schemas(env, tokenizer, tmp_path):
    pivot = next(p for p in env.pivots if p.tools)
    path = tmp_path / "train.parquet"
    skyrl.write_skyrl_parquet([pivot], path)
    messages, env_class, extras, _ = PromptDataset(str(path), tokenizer, max_prompt_length=100_000, num_workers=1)[0]
    skyrl.register()
    chat_history, _ = skyrl_gym.make(env_class, env_config={}, extras=extras).init(messages)
    # what SkyRL's generator does with init's chat history (skyrl_gym_generator.py, agent_loop)
    ids = tokenizer.apply_chat_template(chat_history, add_generation_prompt=True, tokenize=True, return_dict=False)
    rendered = tokenizer.decode(ids)
    for tool in pivot.tools:
        assert json.dumps(dict(tool), ensure_ascii=False) in rendered  # each schema, whole
    assert rendered.count("# Tools") == 1 and "<tool_call>" in rendered
