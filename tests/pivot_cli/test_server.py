"""`pivot serve` and its clients, against live servers on loopback."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time

import gymnasium as gym
import httpx
import pytest
import uvicorn
from gymnasium.utils.env_checker import check_env

import pivot_envs
from pivot_cli._server import ServerConfig, action_summary, create_app
from pivot_envs._checker import check_info_keys, check_random_actions_score_zero, check_reset_pivot_determinism
from pivot_envs.remote import AsyncVerifyClient, RemoteEnv, RemoteError
from verifiers_plugins import Verdict
from verifiers_plugins.hookspecs import hookimpl

ENV_ID = "pivot/tool-use-v0"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, proc: subprocess.Popen | None = None, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}: {proc.stderr.read()}")
        try:
            if httpx.get(f"{url}/v1/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{url} did not answer /v1/health in {timeout} s")


@pytest.fixture(scope="module")
def server_url():
    """`pivot serve` in a subprocess, small queue so backpressure really happens."""
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "pivot_cli",
        "serve",
        "--env",
        ENV_ID,
        "--port",
        str(port),
        "--json",
        "--concurrency",
        "4",
        "--max-queue",
        "32",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def normalized(payload):
    return json.loads(json.dumps(payload))


def test_remote_env_passes_check_env_and_matches_in_process(server_url):
    remote = RemoteEnv(server_url)
    local = gym.make(ENV_ID)
    try:
        check_env(remote, skip_render_check=True)
        check_reset_pivot_determinism(remote)
        check_info_keys(remote)
        check_random_actions_score_zero(remote)
        # Seeded pivot draws and step answers equal the in-process env's.
        remote_ids = [remote.reset(seed=11)[1]["pivot_id"]] + [remote.reset()[1]["pivot_id"] for _ in range(5)]
        local_ids = [local.reset(seed=11)[1]["pivot_id"]] + [local.reset()[1]["pivot_id"] for _ in range(5)]
        assert remote_ids == local_ids
        pivot = local.unwrapped.pivot(local_ids[-1])
        completion = pivot_envs.render_completion(pivot.expert, pivot.domain)
        r_obs, r_reward, _, _, r_info = remote.step(completion)
        l_obs, l_reward, _, _, l_info = local.step(completion)
        # The server never echoes the completion: info["action"] is a summary of the parsed action.
        l_action = l_info.pop("action")
        r_action = r_info.pop("action")
        assert [r_obs, r_reward, r_info] == normalized([l_obs, l_reward, l_info]) and r_reward == 1.0
        assert r_action == action_summary(l_action) and completion not in json.dumps(r_action)
        with pytest.raises(pivot_envs.UnknownPivot, match="expected a pivot id"):
            remote.reset(options={"pivot_id": "no-such-pivot"})
    finally:
        remote.close()
        local.close()


def _cases(env) -> list[tuple[str, list[str]]]:
    cases = []
    for pivot in env.unwrapped.pivots:
        expert = pivot_envs.render_completion(pivot.expert, pivot.domain)
        wrong = expert.replace('"', "'", 3)  # breaks the JSON of a tool call
        cases.append((pivot.id, [expert, wrong]))
        cases.append((pivot.id, ["I cannot help with that.", expert[: len(expert) // 2]]))
    return cases


@pytest.mark.slow
def test_thousand_concurrent_verify_requests(server_url):
    env = gym.make(ENV_ID)
    cases = _cases(env)
    expected = {
        i: normalized([r.to_json() for r in env.unwrapped.score(env.unwrapped.pivot(pid), comps)])
        for i, (pid, comps) in enumerate(cases)
    }
    n = 1000
    assignment = [k % len(cases) for k in range(n)]

    async def run_all():
        # More open connections than the server admits (4 running + 32 queued): some get 503 and retry.
        async with AsyncVerifyClient(server_url, max_connections=100) as client:
            before = await client.health()
            answers = await asyncio.wait_for(
                asyncio.gather(*(client.verify_batch(*cases[i]) for i in assignment)), timeout=240
            )
            after = await client.health()
        return before, answers, after

    before, answers, after = asyncio.run(run_all())
    assert len(answers) == n
    mismatches = [k for k, i in enumerate(assignment) if answers[k] != expected[i]]
    assert not mismatches, f"{len(mismatches)} answers differ from in-process answers, e.g. request {mismatches[0]}"
    assert after["served"] - before["served"] >= n  # every request was served (a 503 is not "served")
    assert after["in_flight"] == 0 and after["queued"] == 0
    print(f"\n1000 verify requests: {after['rejected'] - before['rejected']} answered 503 and retried")


class Blocker:
    """A verifier that waits for the test to release it, so the queue fills deterministically."""

    role = "acceptor"
    cost = "cheap"
    deterministic = True
    version = "1"
    release = threading.Event()
    started = threading.Semaphore(0)

    def verify(self, pivot, action):
        Blocker.started.release()
        assert Blocker.release.wait(30), "test never released the blocker"
        return Verdict.accept("released")


class BlockerPlugin:
    @hookimpl
    def register_verifiers(self, register):
        register("blocker", Blocker)


@pytest.fixture
def blocking_server(fresh_host):
    fresh_host.register_plugin(BlockerPlugin(), name="blocker-test")
    Blocker.release.clear()
    env = gym.make(ENV_ID, verifiers=["blocker"]).unwrapped
    port = free_port()
    app = create_app(env, ENV_ID, ServerConfig(concurrency=1, max_queue=1))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url)
        yield url, env
    finally:
        Blocker.release.set()
        server.should_exit = True
        thread.join(timeout=15)


def test_full_queue_answers_503_with_retry_after_and_clients_retry(blocking_server):
    url, env = blocking_server
    pivot_id = env.pivots[0].id
    body = {"pivot_id": pivot_id, "completions": ["x"]}
    with (
        httpx.Client(base_url=f"{url}/v1", timeout=30) as raw,
        __import__("concurrent.futures").futures.ThreadPoolExecutor(2) as pool,
    ):
        running = pool.submit(raw.post, "/verify-batch", json=body)
        assert Blocker.started.acquire(timeout=10)  # one request holds the only worker
        while raw.get("/health").json()["in_flight"] != 1:
            time.sleep(0.01)
        queued = pool.submit(raw.post, "/verify-batch", json=body)
        while raw.get("/health").json()["queued"] != 1:
            time.sleep(0.01)
        refused = raw.post("/verify-batch", json=body)  # capacity 1 running + 1 queued: full
        assert refused.status_code == 503
        assert int(refused.headers["Retry-After"]) >= 1 and refused.json()["retry_after_s"] > 0

        # A retrying client waits the queue out instead of failing.
        remote = RemoteEnv(url)
        retried = pool.submit(remote.verify_batch, pivot_id, ["x"])
        time.sleep(0.3)
        Blocker.release.set()
        assert running.result(10).status_code == 200 and queued.result(10).status_code == 200
        assert retried.result(30)[0]["accepted"] is True
        assert raw.get("/health").json()["rejected"] >= 1
        remote.close()


def test_bad_requests_get_clear_errors(blocking_server):
    url, _ = blocking_server
    Blocker.release.set()
    remote = RemoteEnv(url)
    try:
        with pytest.raises(RemoteError, match="409"):
            remote.step("x")  # step before reset
        with pytest.raises(pivot_envs.UnknownPivot):
            remote.verify_batch("no-such-pivot", ["x"])
        too_many = httpx.post(f"{url}/v1/verify-batch", json={"pivot_id": "p", "completions": ["x"] * 300})
        assert too_many.status_code == 413
        assert httpx.post(f"{url}/v1/sessions/nope/reset", json={}).status_code == 404
    finally:
        remote.close()


def test_unreachable_server_fails_after_retries():
    from pivot_envs.remote import RetryPolicy

    with pytest.raises(RemoteError, match="after 2 attempts"):
        RemoteEnv(f"http://127.0.0.1:{free_port()}", retry=RetryPolicy(max_attempts=2, base_delay_s=0.01))
