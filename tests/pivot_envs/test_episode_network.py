"""Package installs in episodes: `network="registries"` reaches the package registries and nothing else.

An episode opened with the option reaches the registries this machine is configured for through
the Docker backend's registry proxy (`pivot_sandbox/docker/registries.py`), loses them before the
task's tests, and says so in `info`; a single-step candidate (`docker_shell`) never has any network.
"""

import json
import socket
import threading

import gymnasium as gym
import pytest

import pivot_envs  # noqa: F401  (registers the env ids)
from pivot_core import Message, Pivot
from pivot_envs import write_pivots

PYTHON_ROOT = "pivot-gym/root:trixie"  # a Debian root with python3 and pip (CI builds it for the task images)
# pip as the agent runs it, quick to give up where nothing answers
PIP = "python3 -m pip download six --no-deps --no-cache-dir --retries 0 --timeout 10"
CONFIG = {"action_timeout": 90.0, "pool_size": 0}


def terminus(*commands, complete=False):
    keys = [{"keystrokes": c + "\n", "duration": 0.1} for c in commands]
    return json.dumps({"analysis": "a", "plan": "p", "commands": keys, "task_complete": complete})


# -- the proxy alone (no engine) ---------------------------------------------------------------


def _upstream():
    """A one-request-at-a-time server on loopback that answers with what it was sent."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                got = conn.recv(65536)
                if got.startswith(b"GET"):
                    conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + got)
                else:  # a tunnel: echo once
                    conn.sendall(b"echo:" + got)

    threading.Thread(target=serve, daemon=True).start()
    return server


def _ask(port, data):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(data)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
            if data.startswith(b"CONNECT") and out.startswith(b"HTTP/1.1 200") and b"\r\n\r\n" in out:
                s.sendall(b"ping")
                return out + s.recv(65536)
        return out


def test_the_proxy_lets_through_the_registries_only():
    from pivot_sandbox.docker.registries import RegistryProxy

    upstream = _upstream()
    port = upstream.getsockname()[1]
    proxy = RegistryProxy("127.0.0.1", frozenset({("127.0.0.1", port)}))
    try:
        # plain HTTP (apt): sent on alone, its Host set to the URL's, the answer relayed
        got = _ask(proxy.port, f"GET http://127.0.0.1:{port}/dists/x HTTP/1.1\r\nHost: other.example\r\n\r\n".encode())
        assert got.startswith(b"HTTP/1.1 200"), got
        assert b"GET /dists/x HTTP/1.1\r\nHost: 127.0.0.1:" in got and b"other.example" not in got, got
        assert b"Connection: close" in got
        # CONNECT (pip over TLS): a tunnel
        got = _ask(proxy.port, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
        assert got.startswith(b"HTTP/1.1 200") and got.endswith(b"echo:ping"), got
        # any other host, or another port of a registry's host: refused
        for request in (
            b"CONNECT example.com:443 HTTP/1.1\r\n\r\n",
            f"CONNECT 127.0.0.1:{port + 1} HTTP/1.1\r\n\r\n".encode(),
            f"GET http://localhost:{port}/ HTTP/1.1\r\n\r\n".encode(),
            f"GET https://127.0.0.1:{port}/ HTTP/1.1\r\n\r\n".encode(),
        ):
            got = _ask(proxy.port, request)
            assert got.startswith(b"HTTP/1.1 403") and b"not a package registry" in got, (request, got)
        assert "example.com:443" in proxy.refused
    finally:
        proxy.close()
        upstream.close()


# -- the option at make ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """One pivot on the python root: the tests want six's wheel and must find no registry themselves."""
    tests = {
        "commands": ["ls /app/dl/six-*.whl", f"! {PIP} -d /tmp/again"],
        "timeout": 60.0,
    }
    context = {"sandbox": {"image": PYTHON_ROOT}, "task_tests": tests}
    pivot = Pivot(
        "registries#0",
        "terminal",
        (Message("user", "Download six's wheel into /app/dl."),),
        Message("assistant", terminus("ls")),
        (),
        context,
    )
    path = tmp_path_factory.mktemp("network") / "pivots.jsonl"
    write_pivots([pivot], path)
    return path


def test_an_unknown_network_or_a_backend_without_sessions_is_refused_at_make(dataset):
    from pivot_sandbox import usable_backends

    with pytest.raises(ValueError, match="expected network in"):
        gym.make("pivot/terminal-episode-v0", dataset=str(dataset), network="host")
    if usable_backends().get("namespace", "not registered") is not None:
        pytest.skip("the namespace backend cannot run here")
    with pytest.raises(ValueError, match="cannot give an episode registry access"):
        gym.make("pivot/terminal-episode-v0", dataset=str(dataset), backend="namespace", network="registries")


# -- in the engine -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def python_root():
    from pivot_sandbox import SandboxUnavailable, docker_backend
    from pivot_sandbox.images.stock import build_root_image

    try:
        client = docker_backend().client
    except SandboxUnavailable as e:
        pytest.fail(f"these tests need the Docker engine: {e}")
    return build_root_image(client, PYTHON_ROOT)


def _registry_address():
    """The address of one of the registries this machine is configured for (resolved here)."""
    from pivot_sandbox import registry_hosts

    for host in sorted(registry_hosts()):
        try:
            return socket.gethostbyname(host)
        except OSError:
            continue
    pytest.fail("no registry host of this machine resolves")


@pytest.mark.docker
def test_an_episode_with_registries_downloads_a_package_and_its_tests_run_offline(dataset, python_root):
    from pivot_sandbox import docker_backend
    from pivot_sandbox.docker.registries import registry_network

    env = gym.make(
        "pivot/terminal-episode-v0", dataset=str(dataset), backend_config=CONFIG, network="registries"
    ).unwrapped
    try:
        _, info = env.reset(options={"pivot_id": "registries#0"})
        assert info["network"] == "registries"
        outside = f"{PIP} -d /tmp/outside --index-url https://example.com/simple"
        # no route but the proxy: a registry's own address is out of reach without it
        direct = f"python3 -c \"import socket; socket.create_connection(('{_registry_address()}', 443), timeout=5)\""
        turn = terminus(f"{PIP} -d /app/dl", outside, f"{direct}; echo direct=$?", complete=True)
        _, reward, terminated, _, info = env.step(turn)
    finally:
        env.close()
    shown = env.conversation[-1].content
    assert "Successfully downloaded six" in shown and "direct=1" in shown, shown
    # the tests found the wheel, and found no registry themselves: the network was gone before them
    assert (reward, terminated, info["outcome"]["error"]) == (1.0, True, None), info["outcome"]
    assert info["outcome"]["network"] == "registries"
    assert "example.com:443" in registry_network(docker_backend().client).proxy.refused


@pytest.mark.docker
def test_a_single_step_candidate_still_has_no_network(dataset, python_root):
    from pivot_envs import load_pivots
    from verifiers_plugins import get_verifier

    (pivot,) = load_pivots(str(dataset))
    verifier = get_verifier("docker_shell", backend="docker", action_timeout=60.0)
    (verdict,) = verifier.verify_batch(pivot, [Message("assistant", terminus(f"{PIP} -d /app/dl"))])
    candidate = verdict.details["candidate"]
    assert candidate["exit_code"] not in (0, None) and candidate["killed"] is None, verdict
    assert not any(p.endswith(".whl") for p in candidate["changed"]), verdict
    # and a default episode, like a candidate, has none either, nor says it has
    env = gym.make("pivot/terminal-episode-v0", dataset=str(dataset), backend_config=CONFIG).unwrapped
    try:
        _, info = env.reset(options={"pivot_id": "registries#0"})
        _, reward, *_, info = env.step(terminus(f"{PIP} -d /app/dl", complete=True))
    finally:
        env.close()
    assert "network" not in info["outcome"] and reward == 0.0, info["outcome"]
