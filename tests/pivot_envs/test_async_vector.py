"""`gym.make_vec(..., vectorization_mode="async")` with default arguments (shared memory on)."""

import copy

import gymnasium as gym
import pytest

import pivot_envs  # noqa: F401
from pivot_core._render import render_completion
from pivot_envs._spaces import ChatSpace, SharedChats


@pytest.mark.parametrize("env_id", ["pivot/tool-use-v0", "pivot/terminal-v0"])
def test_async_vector_env_with_default_arguments_equals_sync(env_id):
    sync = gym.make_vec(env_id, num_envs=2, vectorization_mode="sync")
    venv = gym.make_vec(env_id, num_envs=2, vectorization_mode="async")  # shared_memory=True by default
    try:
        obs, info = venv.reset(seed=3)
        expected_obs, expected_info = sync.reset(seed=3)
        assert obs == expected_obs and list(info["pivot_id"]) == list(expected_info["pivot_id"])
        target = sync.unwrapped.envs[0].unwrapped.pivots[1]
        # a pinned GRPO group: every copy at one pivot
        obs, info = venv.reset(options={"pivot_id": target.id})
        assert [o["pivot_id"] for o in obs] == [target.id] * 2
        good = render_completion(target.expert, target.domain)
        _, rewards, terminated, _, _ = venv.step((good, "nonsense"))
        assert list(rewards) == [1.0, 0.0] and all(terminated)
    finally:
        venv.close()
        sync.close()


def test_shared_chats_view_and_overflow():
    space = ChatSpace(shared_memory_bytes=64)
    buffer = gym.vector.utils.create_shared_memory(space, n=2)
    view = gym.vector.utils.read_from_shared_memory(space, buffer, n=2)
    assert isinstance(view, SharedChats) and len(view) == 2
    small = {"pivot_id": "p", "messages": [], "tools": []}
    gym.vector.utils.write_to_shared_memory(space, 1, small, buffer)
    assert view[1] == small and copy.deepcopy(view)[1] == small  # a live view; deepcopy gives a tuple
    with pytest.raises(ValueError, match="shared_memory_bytes"):
        gym.vector.utils.write_to_shared_memory(space, 0, {**small, "pivot_id": "x" * 100}, buffer)
    with pytest.raises(IndexError):
        view[2]
