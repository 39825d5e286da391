"""Executors: the Ray pool scores exactly like the in-process env, routed by sandbox state."""

from __future__ import annotations

import dataclasses
import json
import sys

import gymnasium as gym
import pytest

import pivot_envs
from pivot_envs import Message
from trainers.executors import EnvSpec, InProcessExecutor, VerifyTask, make_executor, route_key, worker_for

ENV_IDS = ("pivot/tool-use-v0", "pivot/swe-v0", "pivot/terminal-v0", "pivot/browse-v0")


def tasks_for(env_id: str) -> list[VerifyTask]:
    env = gym.make(env_id).unwrapped
    tasks = []
    for pivot in env.pivots:
        expert = pivot_envs.render_completion(pivot.expert, pivot.domain)
        tasks.append(VerifyTask(pivot, (expert, expert[: len(expert) // 2], "ls -la", "")))
    return tasks


def test_in_process_executor_equals_env_score():
    env = gym.make("pivot/tool-use-v0").unwrapped
    tasks = tasks_for("pivot/tool-use-v0")
    results = InProcessExecutor(EnvSpec("pivot/tool-use-v0")).verify(tasks)
    assert results == [env.score(t.pivot, t.completions) for t in tasks]
    assert any(r.accepted for rs in results for r in rs) and any(not r.accepted for rs in results for r in rs)
    with pytest.raises(ValueError, match="expected an executor in"):
        make_executor("dask", EnvSpec("pivot/tool-use-v0"))


def test_route_key_groups_pivots_by_sandbox_state():
    # a pivot without a sandbox (the bundled terminal data also holds synthesized, sandboxed pivots)
    pivot = next(t.pivot for t in tasks_for("pivot/terminal-v0") if not t.pivot.context.get("sandbox"))
    sandbox = {"image": "pivot-gym/busybox", "setup": ["mkdir -p /app"], "workdir": "/app"}
    a = dataclasses.replace(pivot, id="a", context={**pivot.context, "sandbox": sandbox})
    # Same state (image, set-up, replayed history) but another expert action: same key.
    b = dataclasses.replace(a, id="b", expert=Message("assistant", "something else"))
    c = dataclasses.replace(a, id="c", context={**a.context, "sandbox": {**sandbox, "image": "other"}})
    assert route_key(a) == route_key(b) != route_key(c)
    assert route_key(pivot).startswith("pivot:") and route_key(a).startswith("sandbox:")
    assert route_key(pivot) != route_key(dataclasses.replace(pivot, expert=Message("assistant", "x")))
    assert all(worker_for(route_key(a), 3) == worker_for(route_key(b), 3) for _ in range(3))


def test_importing_executors_leaves_ray_out():
    import subprocess

    code = "import sys, trainers.executors, pivot_envs; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.slow
def test_ray_executor_equals_in_process_on_bundled_pivots(ray_cluster):
    for env_id in ENV_IDS:
        tasks = tasks_for(env_id)
        # Sandbox pivots route by state: give pairs of terminal pivots a shared sandbox context.
        if env_id == "pivot/terminal-v0":
            tasks = tasks + [
                dataclasses.replace(
                    t,
                    pivot=dataclasses.replace(
                        t.pivot, id=t.pivot.id + "/sb", context={**t.pivot.context, "sandbox": {"image": f"img{k % 2}"}}
                    ),
                )
                for k, t in enumerate(tasks[:4])
            ]
        expected = InProcessExecutor(EnvSpec(env_id)).verify(tasks)
        executor = make_executor("ray", EnvSpec(env_id), num_workers=2, chunk_size=3)
        try:
            assert executor.verify(tasks) == expected, env_id
            stats = executor.stats()
        finally:
            executor.close()
        # Each route key was scored by exactly one worker, the one `worker_for` names.
        seen = [set(s["keys"]) for s in stats]
        assert not seen[0] & seen[1] and seen[0] | seen[1] == {route_key(t.pivot) for t in tasks}
        for w, keys in enumerate(seen):
            assert all(worker_for(k, 2) == w for k in keys)
        assert len({s["pid"] for s in stats}) == 2  # two worker processes, not the driver


@pytest.mark.slow
def test_pivot_profile_executor_ray_equals_in_process(ray_cluster, tiny_policy, tmp_path):
    from typer.testing import CliRunner

    from pivot_cli import app

    def args(out, cache, *extra):
        # K=2 on 4 pivots, chunks of 2: groups spread over both workers, small enough for 2 shared cores.
        return [
            "profile",
            "--env",
            "pivot/tool-use-v0",
            "--model",
            str(tiny_policy.path),
            "--k",
            "2",
            "--limit",
            "4",
            "--chunk-size",
            "2",
            "--out",
            str(out),
            "--cache",
            str(cache),
            "--max-history",
            str(tiny_policy.max_history_messages),
            "--max-prompt-tokens",
            str(tiny_policy.max_prompt_tokens),
            "--max-new-tokens",
            str(tiny_policy.max_new_tokens),
            "--seed",
            "3",
            "--json",
            *extra,
        ]

    runner = CliRunner()
    local = runner.invoke(app, args(tmp_path / "local.jsonl", tmp_path / "local.sqlite"))
    assert local.exit_code == 0, local.output
    remote = runner.invoke(app, args(tmp_path / "ray.jsonl", tmp_path / "ray.sqlite", "--executor", "ray"))
    assert remote.exit_code == 0, remote.output
    assert pivot_envs.load_pivots(tmp_path / "local.jsonl") == pivot_envs.load_pivots(tmp_path / "ray.jsonl")
    summary = json.loads(remote.stdout)
    # counted on the workers; identical samples in a group may already hit on the first run
    assert summary["profiled"] == 4 and summary["cache_hits"] + summary["cache_misses"] == 8 and summary["cache_misses"]
    again = runner.invoke(app, args(tmp_path / "ray2.jsonl", tmp_path / "ray.sqlite", "--executor", "ray"))
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["cache_hits"] == 8  # the workers read the shared cache file


@pytest.mark.slow
def test_http_server_scores_through_ray_workers(ray_cluster):
    import socket
    import threading
    import time

    import httpx
    import uvicorn

    from pivot_cli._server import create_app
    from pivot_envs.remote import RemoteEnv

    env = gym.make("pivot/swe-v0").unwrapped
    executor = make_executor("ray", EnvSpec("pivot/swe-v0"), num_workers=2)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(env, "pivot/swe-v0", executor=executor), host="127.0.0.1", port=port, log_level="warning"
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        for _ in range(100):
            try:
                httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=2)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        remote = RemoteEnv(f"http://127.0.0.1:{port}")
        tasks = tasks_for("pivot/swe-v0")
        answers = [remote.verify_batch(t.pivot.id, list(t.completions)) for t in tasks]
        remote.close()
        expected = [[r.to_json() for r in env.score(t.pivot, t.completions)] for t in tasks]
        assert answers == json.loads(json.dumps(expected))
        assert sum(s["tasks"] for s in executor.stats()) == len(tasks)
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        executor.close()
