"""`pivot serve --protocol nemo-gym`: NeMo Gym's /verify and /seed_session on recorded NeMo Gym requests.

The requests are NeMo Gym's own: the `example_rollouts.jsonl` files of its four PivotRL resources
servers (github.com/NVIDIA-NeMo/Gym at 07d6b0d07b22fcf530b4c211dae2ee23100428e4, copied verbatim
under the shared data's `nemo_gym_pivot_rows/`, see its SOURCES.md): each row is a verify request
(the dataset row plus the policy's `response`), and each answer must equal the in-process reward.
"""

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import gymnasium as gym
import pytest
from fastapi.testclient import TestClient

import pivot_envs  # noqa: F401
from pivot_cli._server import ServerConfig
from pivot_cli._server_nemo_gym import create_nemo_gym_app
from trainers.adapters import nemo_rl
from trainers.adapters._common import PivotScorer

SERVERS = ("single_step_tool_use_with_argument_comparison", "swe_pivot", "terminal_multi_harness", "terminus_judge")
TOKEN = "a-test-token-of-enough-length"


def recorded_requests(shared_data, server):
    path = shared_data / "nemo_gym_pivot_rows" / f"{server}.example_rollouts.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [{k: v for k, v in row.items() if k != "reward"} for row in rows]


@pytest.fixture(scope="module")
def client():
    env = gym.make("pivot/tool-use-v0").unwrapped
    return TestClient(create_nemo_gym_app(env, "pivot/tool-use-v0", ServerConfig(max_body_bytes=4 * 1024 * 1024)))


@pytest.mark.parametrize("server", SERVERS)
def test_recorded_nemo_gym_requests_get_the_in_process_rewards(shared_data, client, server):
    requests = recorded_requests(shared_data, server)
    assert requests
    in_process = PivotScorer("pivot/tool-use-v0")
    assert client.post("/seed_session", json={k: v for k, v in requests[0].items() if k != "response"}).json() == {}
    for request in requests:
        answer = client.post("/verify", json=request)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        want = nemo_rl.verify_payload(request, in_process)
        assert body["reward"] == want["reward"] and body["pivot_verdict"]["error"] == want["pivot_verdict"]["error"]
        assert body["pivot_verdict"]["decided_by"] == want["pivot_verdict"]["decided_by"]
        assert {k: body[k] for k in request} == request  # NeMo Gym's verify response: the request plus reward


def test_rows_written_by_write_nemo_gym_rows_score_the_expert_1_and_a_wrong_call_0(client, tmp_path):
    env = gym.make("pivot/tool-use-v0").unwrapped
    pivots = [p for p in env.pivots if p.expert.tool_calls and p.context.get("world")][:3]
    path = tmp_path / "rows.jsonl"
    nemo_rl.write_nemo_gym_rows(pivots, path)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row, pivot in zip(rows, pivots, strict=True):
        call = pivot.expert.tool_calls[0]
        for name, arguments, reward in (
            (call.name, call.arguments, 1.0),
            ("get_user_details", '{"user_id": "x"}', 0.0),
        ):
            item = {"type": "function_call", "name": name, "arguments": arguments, "call_id": "c1"}
            body = client.post("/verify", json={**row, "response": {"output": [item]}}).json()
            assert body["reward"] == reward, (pivot.id, body["pivot_verdict"])


def test_malformed_and_oversized_requests(shared_data, client):
    assert client.post("/verify", content=b"{not json").status_code == 400
    assert client.post("/verify", json={"response": {}}).status_code == 422  # no responses_create_params
    row = {k: v for k, v in recorded_requests(shared_data, SERVERS[0])[0].items() if k != "response"}
    huge = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "x" * 70000}]}
    body = client.post("/verify", json={**row, "response": {"output": [huge]}}).json()
    assert body["reward"] == 0.0 and "max_completion_chars" in body["pivot_verdict"]["error"]
    small = TestClient(
        create_nemo_gym_app(gym.make("pivot/tool-use-v0").unwrapped, "x", ServerConfig(max_body_bytes=64))
    )
    assert small.post("/verify", json={**row, "response": {"output": [huge]}}).status_code == 413


def test_pivot_serve_protocol_nemo_gym_with_a_token(shared_data):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = str(Path(sys.executable).with_name("pivot"))  # the console script users run
    cmd = [script, "serve", "--protocol", "nemo-gym", "--env", "pivot/terminal-v0", "--host", "127.0.0.1"]
    proc = subprocess.Popen([*cmd, "--port", str(port), "--token", TOKEN], stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(600):  # bounded: up to ~60 s for the CLI to import and bind
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.1)
        request = recorded_requests(shared_data, "terminus_judge")[0]
        data = json.dumps(request).encode()
        url = f"http://127.0.0.1:{port}/verify"
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(urllib.request.Request(url, data, {"Content-Type": "application/json"}), timeout=60)
        assert refused.value.code == 401
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"}
        with urllib.request.urlopen(urllib.request.Request(url, data, headers), timeout=120) as answer:
            body = json.loads(answer.read())
        want = nemo_rl.verify_payload(request, PivotScorer("pivot/terminal-v0"))
        assert body["reward"] == want["reward"]
    finally:
        proc.terminate()
        proc.wait(30)


def text_item(text):
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


@pytest.mark.parametrize("env_id", ["pivot/tool-use-v0", "pivot/swe-v0", "pivot/terminal-v0", "pivot/browse-v0"])
def test_every_domain_rows_scored_at_the_served_pivots(env_id, tmp_path):
    env = gym.make(env_id).unwrapped
    pivots = env.pivots[:3]
    path = tmp_path / "rows.jsonl"
    nemo_rl.write_nemo_gym_rows(pivots, path)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    client = TestClient(create_nemo_gym_app(env, env_id))
    for row, pivot in zip(rows, pivots, strict=True):
        assert row["pivot_id"] == pivot.id
        call = pivot.expert.tool_calls[0] if pivot.expert.tool_calls else None
        expert = (
            {"type": "function_call", "name": call.name, "arguments": call.arguments, "call_id": "c1"}
            if call
            else text_item(pivot.expert.text)
        )
        for item in (expert, text_item("I cannot help.")):
            body = client.post("/verify", json={**row, "response": {"output": [item]}}).json()
            (want,) = env.score(pivot, [nemo_rl.response_text({"output": [item]}, pivot.domain)])
            assert body["reward"] == want.reward and body["pivot_verdict"]["decided_by"] == want.decided_by, pivot.id
        assert body["reward"] == 0.0  # the refusal


TASK = {
    "task_id": "nemo-notes",
    "instruction": "In /app, write the TODO lines of notes.txt into todo.txt.",
    "setup": ["printf 'a TODO one\\nb draft\\n' > notes.txt"],
    "solution_commands": ["grep TODO notes.txt > todo.txt"],
}


@pytest.mark.docker
def test_terminal_rows_are_verified_in_the_sandbox(tmp_path):
    from pivot_envs import extract_pivots, write_pivots
    from pivot_sandbox import docker_backend
    from pivot_sandbox.images.stock import build_busybox_image
    from pivot_tasks import synthesize_task, task_spec

    image = build_busybox_image(docker_backend().client, "pivot-gym/busybox:1")
    traj, reason = synthesize_task(TASK, task_spec(TASK, image), docker_backend())
    assert traj is not None, reason
    pivots = list(extract_pivots(traj))
    write_pivots(pivots, tmp_path / "pivots.jsonl")
    env = gym.make("pivot/terminal-v0", dataset=str(tmp_path / "pivots.jsonl")).unwrapped
    nemo_rl.write_nemo_gym_rows(pivots, tmp_path / "rows.jsonl")
    row = json.loads((tmp_path / "rows.jsonl").read_text().splitlines()[0])
    client = TestClient(create_nemo_gym_app(env, "pivot/terminal-v0"))
    pivot = env.pivot(row["pivot_id"])
    wrong = pivot.expert.text.replace("grep TODO notes.txt", "grep draft notes.txt")
    assert wrong != pivot.expert.text
    for text in (pivot.expert.text, wrong):
        body = client.post("/verify", json={**row, "response": {"output": [text_item(text)]}}).json()
        (want,) = env.score(pivot, [text])
        assert body["reward"] == want.reward and body["pivot_verdict"]["decided_by"] == want.decided_by
    # the expert's text is accepted by string similarity; the wrong command is run in the sandbox and fails
    assert body["reward"] == 0.0 and body["pivot_verdict"]["decided_by"] == "docker_shell"
