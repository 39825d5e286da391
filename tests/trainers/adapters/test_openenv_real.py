"""Pivot envs served by openenv-core's server, driven by openenv-core's own client on loopback."""

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import gymnasium as gym
import pytest
import uvicorn

# openenv-core is a CI install (.ci/run): a missing one fails here, it is never skipped.
from openenv.core import GenericEnvClient

import pivot_envs  # noqa: F401
from trainers.adapters._common import expert_text
from trainers.adapters.openenv import openenv_app


@pytest.fixture(scope="module")
def server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = uvicorn.Config(openenv_app("pivot/tool-use-v0"), host="127.0.0.1", port=port, log_level="warning")
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    for _ in range(200):  # bounded wait for the socket (not a timing assertion)
        if srv.started:
            break
        time.sleep(0.05)
    assert srv.started, "uvicorn did not start"
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(10)


def test_openenv_client_rewards_equal_in_process(server):
    env = gym.make("pivot/tool-use-v0").unwrapped
    pivots = [env.pivots[0], next(p for p in env.pivots if p.expert.tool_calls and p.context.get("world"))]
    with GenericEnvClient(base_url=server).sync() as client:
        for pivot in pivots:
            for completion in (expert_text(pivot), "I cannot help.", '<tool_call>{"name": "x"'):
                first = client.reset(pivot_id=pivot.id)
                assert first.observation["pivot_id"] == pivot.id and not first.done
                assert first.observation["messages"] == env.reset(options={"pivot_id": pivot.id})[0]["messages"]
                result = client.step({"completion": completion})
                (expected,) = env.score(pivot, [completion])
                assert result.reward == expected.reward and result.done
                assert result.observation["verdict"]["accepted"] == expected.accepted
        # the expert action scores 1 through the protocol too
        client.reset(pivot_id=pivots[1].id)
        assert client.step({"completion": expert_text(pivots[1])}).reward == 1.0


def test_unknown_pivot_is_reported_to_the_client(server):
    with GenericEnvClient(base_url=server).sync() as client:
        with pytest.raises(Exception, match="nope"):
            client.reset(pivot_id="nope")


def _start_cli(*args):
    """`pivot serve --protocol openenv ARGS` as users start it (the console script); its port, once it listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = str(Path(sys.executable).with_name("pivot"))
    cmd = [script, "serve", "--protocol", "openenv", *args, "--port", str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for _ in range(600):  # bounded: up to ~60 s for the CLI to import and bind
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return proc, f"http://127.0.0.1:{port}"
        if proc.poll() is not None:
            raise AssertionError(proc.stderr.read())
        time.sleep(0.1)
    proc.terminate()
    raise AssertionError("pivot serve did not listen within 60 s")


def test_pivot_serve_protocol_openenv():
    script = str(Path(sys.executable).with_name("pivot"))  # the console script users run
    cmd = [script, "serve", "--env", "pivot/tool-use-v0", "--protocol", "openenv"]
    refused = subprocess.run([*cmd, "--host", "0.0.0.0"], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1 and "loopback only" in refused.stdout + refused.stderr
    proc, url = _start_cli("--env", "pivot/tool-use-v0")
    try:
        env = gym.make("pivot/tool-use-v0").unwrapped
        pivot = next(p for p in env.pivots if p.expert.tool_calls)
        with GenericEnvClient(base_url=url).sync() as client:
            client.reset(pivot_id=pivot.id)
            assert client.step({"completion": expert_text(pivot)}).reward == 1.0
    finally:
        proc.terminate()
        proc.wait(30)


def _serve_in_thread(app):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    for _ in range(200):  # bounded wait for the socket (not a timing assertion)
        if srv.started:
            break
        time.sleep(0.05)
    assert srv.started, "uvicorn did not start"
    return srv, thread, f"http://127.0.0.1:{port}"


def test_a_whole_episode_in_one_openenv_session():
    from pivot_core import render_completion

    env_id = "pivot/tool-use-episode-v0"
    episodes = gym.make(env_id).unwrapped
    firsts = {}
    for p in episodes.pivots:
        firsts.setdefault(p.context["trajectory_id"], p)
    srv, thread, url = _serve_in_thread(openenv_app(env_id))
    rewards = []
    try:
        with GenericEnvClient(base_url=url).sync() as client:
            for pivot in list(firsts.values())[:3]:
                recorded = episodes.recorded_messages(pivot)
                turns = [
                    render_completion(m, "tool-use") for m in recorded[len(pivot.history) :] if m.role == "assistant"
                ]
                first = client.reset(pivot_id=pivot.id)
                episodes.reset(options={"pivot_id": pivot.id})
                assert first.observation["messages"] == [m for m in first.observation["messages"]] and not first.done
                steps = 0
                for text in turns:
                    result = client.step({"completion": text})
                    _, reward, terminated, truncated, info = episodes.step(text)
                    steps += 1
                    assert result.done is bool(terminated or truncated)  # done only at the episode's end
                    assert result.observation["verdict"]["new_messages"] == info["new_messages"]
                    if result.done:
                        assert result.reward == (None if info["outcome"]["error"] else reward)
                        assert result.observation["verdict"]["outcome"] == info["outcome"]
                        break
                    assert result.reward == 0.0
                assert result.done and steps > 1
                rewards.append(result.reward)
    finally:
        srv.should_exit = True
        thread.join(10)
    assert 1.0 in rewards


def _play(client, episodes, pivot_id, turns):
    """One episode through the client and in process, step by step; the client's last result."""
    first = client.reset(pivot_id=pivot_id)
    obs, _ = episodes.reset(options={"pivot_id": pivot_id})
    assert first.observation["messages"] == obs["messages"] and first.observation["tools"] == obs["tools"]
    for k, text in enumerate(turns):
        result = client.step({"completion": text})
        _, reward, terminated, truncated, info = episodes.step(text)
        assert result.done is bool(terminated or truncated)  # done only at the episode's end
        assert result.observation["verdict"]["new_messages"] == info["new_messages"]
        if result.done:
            assert result.reward == (None if info["outcome"]["error"] else reward)
            assert result.observation["verdict"]["outcome"] == info["outcome"]
            return result, k + 1
        assert result.reward == 0.0
    raise AssertionError("the script ran out before the episode ended")


def test_pivot_serve_protocol_openenv_plays_whole_episodes():
    """`pivot serve --protocol openenv --env pivot/tool-use-episode-v0 --dataset PATH`, as users run it."""
    from pivot_core import render_completion
    from pivot_envs._env import bundled_paths

    env_id, dataset = "pivot/tool-use-episode-v0", str(bundled_paths(["tool_use_tau_airline.jsonl"])[0])
    episodes = gym.make(env_id, dataset=dataset).unwrapped
    firsts = {}
    for p in episodes.pivots:
        firsts.setdefault(p.context["trajectory_id"], p)
    # a certificate no task asks for changes the database: tau-bench's rule fails the episode
    call = {"name": "send_certificate", "arguments": {"user_id": "raj_sanchez_7340", "amount": 500}}
    wrong = f"<tool_call>\n{json.dumps(call)}\n</tool_call>"
    proc, url = _start_cli("--env", env_id, "--dataset", dataset)
    rewards = []
    try:
        with GenericEnvClient(base_url=url).sync() as client:
            for pivot in list(firsts.values())[:3]:
                recorded = episodes.recorded_messages(pivot)[len(pivot.history) :]
                turns = [render_completion(m, "tool-use") for m in recorded if m.role == "assistant"]
                for script in (turns, [wrong, *turns]):
                    result, steps = _play(client, episodes, pivot.id, script)
                    assert steps > 1
                    rewards.append(result.reward)
    finally:
        proc.terminate()
        proc.wait(30)
    assert 1.0 in rewards and 0.0 in rewards  # recorded successes, and runs the env scores as failed


def test_pivot_serve_protocol_openenv_refuses_verifiers_for_an_episode_env():
    """An episode ends with the task's outcome: `--verifiers` is a one-line refusal, not a traceback."""
    script = str(Path(sys.executable).with_name("pivot"))
    cmd = [script, "serve", "--protocol", "openenv", "--env", "pivot/tool-use-episode-v0", "--verifiers", "tool_args"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    said = done.stdout + done.stderr
    assert done.returncode == 1 and "Traceback" not in said and "--verifiers" in said, said[-2000:]


def test_pivot_serve_protocol_openenv_max_sessions_bounds_live_episodes():
    """Each openenv session holds a live env: `--max-sessions` caps them (openenv-core's CAPACITY_REACHED)."""
    env_id = "pivot/tool-use-episode-v0"
    pivot_id = gym.make(env_id).unwrapped.pivots[0].id
    proc, url = _start_cli("--env", env_id, "--max-sessions", "2")
    try:
        with GenericEnvClient(base_url=url).sync() as a, GenericEnvClient(base_url=url).sync() as b:
            a.reset(pivot_id=pivot_id), b.reset(pivot_id=pivot_id)  # two live episodes
            with pytest.raises(Exception):  # noqa: B017  openenv-core answers CAPACITY_REACHED and closes the socket
                with GenericEnvClient(base_url=url).sync() as c:
                    c.reset(pivot_id=pivot_id)
            assert a.step({"completion": "Could you give me your user id?"}).done is False  # the others go on
        with GenericEnvClient(base_url=url).sync() as again:  # closed sessions free their places
            assert again.reset(pivot_id=pivot_id).observation["pivot_id"] == pivot_id
    finally:
        proc.terminate()
        proc.wait(30)
