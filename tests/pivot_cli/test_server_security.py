"""`pivot serve` under hostile clients: auth, caps, quotas, 4xx for bad input, slow clients (loopback only)."""

from __future__ import annotations

import json
import random
import socket
import subprocess
import sys
import threading

import gymnasium as gym
import httpx
import pytest
import uvicorn

import pivot_envs  # noqa: F401  (registers the ids)
from pivot_cli._server import ServerConfig, create_app, uvicorn_config
from pivot_cli._server_guard import is_loopback, resolve_tokens
from pivot_cli._server_sessions import Sessions
from pivot_cli.errors import SessionNotFound, SessionRefused
from pivot_core.errors import ServeRefused
from pivot_envs.remote import RemoteEnv, RemoteError

ENV_ID = "pivot/tool-use-v0"
TOKEN_A = "a" * 32
TOKEN_B = "b" * 32
MAX_CHARS = 2000  # small, so an over-long completion is cheap to send


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    """A uvicorn server on loopback in a thread, configured as `pivot serve` configures it (`uvicorn_config`)."""

    def __init__(self, app, request_timeout_s: float = 30.0, config: ServerConfig | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = config or ServerConfig(request_timeout_s=request_timeout_s)
        self.server = uvicorn.Server(uvicorn_config(app, "127.0.0.1", self.port, config))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        for _ in range(300):
            if self.server.started:
                return self
            threading.Event().wait(0.05)
        raise TimeoutError("server did not start")

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)


@pytest.fixture(scope="module")
def env():
    return gym.make(ENV_ID, max_completion_chars=MAX_CHARS).unwrapped


@pytest.fixture(scope="module")
def served(env):
    """A server with two client tokens and small quotas and caps."""
    config = ServerConfig(
        concurrency=2, max_sessions=6, max_sessions_per_client=3, max_body_bytes=64 * 1024, request_timeout_s=1.0
    )
    with LiveServer(create_app(env, ENV_ID, config, tokens=(TOKEN_A, TOKEN_B)), config=config) as live:
        yield live


def client(url: str, token: str | None = TOKEN_A, source: str | None = None) -> httpx.Client:
    """A client of `url`; `source` is the loopback address it connects from (127.0.0.2: another peer)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    transport = httpx.HTTPTransport(local_address=source) if source else None
    return httpx.Client(base_url=f"{url}/v1", headers=headers, timeout=30, transport=transport)


# -- item 12: a token off loopback ------------------------------------------------------------


def test_requests_without_the_token_get_401(served):
    with client(served.url, token=None) as anon, client(served.url, token="x" * 32) as wrong:
        for c in (anon, wrong):
            assert c.get("/health").status_code == 401
            answer = c.post("/verify-batch", json={"pivot_id": "p", "completions": ["x"]})
            assert answer.status_code == 401 and "token" in answer.json()["error"]
    with client(served.url) as good:
        assert good.get("/health").status_code == 200


def test_remote_env_sends_its_token(served, env, monkeypatch):
    remote = RemoteEnv(served.url, token=TOKEN_B)
    try:
        _, info = remote.reset(seed=3)
        assert info["pivot_id"] in env._index
    finally:
        remote.close()
    monkeypatch.setenv("PIVOT_SERVE_TOKEN", f"{TOKEN_A},{TOKEN_B}")
    remote = RemoteEnv(served.url)  # the first token of the variable
    remote.close()
    monkeypatch.delenv("PIVOT_SERVE_TOKEN")
    with pytest.raises(RemoteError, match="401"):
        RemoteEnv(served.url)


def test_no_token_off_loopback_refuses_to_start(monkeypatch):
    monkeypatch.delenv("PIVOT_SERVE_TOKEN", raising=False)
    assert resolve_tokens("127.0.0.1", None) == () and resolve_tokens("::1", None) == ()
    for host in ("0.0.0.0", "::", "10.1.2.3", "gpu-box.example"):
        assert not is_loopback(host)
        with pytest.raises(ServeRefused, match="without a token"):
            resolve_tokens(host, None)
    with pytest.raises(ServeRefused, match="at least 16"):
        resolve_tokens("0.0.0.0", "short")
    monkeypatch.setenv("PIVOT_SERVE_TOKEN", TOKEN_A)
    assert resolve_tokens("0.0.0.0", None) == (TOKEN_A,)


def test_cli_serve_refuses_a_public_bind_without_a_token_and_prints_no_traceback(monkeypatch):
    monkeypatch.delenv("PIVOT_SERVE_TOKEN", raising=False)
    cmd = [sys.executable, "-m", "pivot_cli", "serve", "--env", ENV_ID, "--host", "0.0.0.0", "--port", "1"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert "without a token" in out.stderr and "Traceback" not in out.stderr


# -- item 13: body cap, max_completion_chars, no echo -----------------------------------------


def test_bodies_over_the_cap_get_413_before_being_read(served):
    big = json.dumps({"pivot_id": "p", "completions": ["x" * (128 * 1024)]})
    with client(served.url) as c:
        assert c.post("/verify-batch", content=big, headers={"Content-Type": "application/json"}).status_code == 413

        def chunks():  # no Content-Length: the cap has to count what it reads
            for _ in range(128):
                yield b"x" * 1024

        assert c.post("/verify-batch", content=chunks()).status_code == 413


def test_completions_over_max_completion_chars_get_413_in_step_and_verify_batch(served, env):
    pivot = env.pivots[0]
    long = "y" * (MAX_CHARS + 1)
    with client(served.url) as c:
        sid = c.post("/sessions").json()["session_id"]
        c.post(f"/sessions/{sid}/reset", json={"options": {"pivot_id": pivot.id}})
        step = c.post(f"/sessions/{sid}/step", json={"action": long})
        batch = c.post("/verify-batch", json={"pivot_id": pivot.id, "completions": ["ok", long]})
        c.delete(f"/sessions/{sid}")
    assert step.status_code == 413 and "max_completion_chars" in step.json()["error"]
    assert batch.status_code == 413 and "completion 1" in batch.json()["error"]


def test_a_step_answer_never_echoes_the_completion(served, env):
    pivot = env.pivots[0]
    marker = "echo-marker-" + "z" * 1500
    text = "I will not call a tool. " + marker
    call = '<tool_call>{"name": "no_such_tool", "arguments": {"x": "' + marker + '"}}</tool_call>'
    with client(served.url) as c:
        sid = c.post("/sessions").json()["session_id"]
        c.post(f"/sessions/{sid}/reset", json={"options": {"pivot_id": pivot.id}})
        answers = [c.post(f"/sessions/{sid}/step", json={"action": a}) for a in (text, call)]
        batch = c.post("/verify-batch", json={"pivot_id": pivot.id, "completions": [text, call]})
        c.delete(f"/sessions/{sid}")
    for answer in (*answers, batch):
        assert answer.status_code == 200 and marker not in answer.text
    assert answers[0].json()["info"]["action"]["content_chars"] == len(text)
    assert answers[1].json()["info"]["action"]["tool_calls"][0]["name"] == "no_such_tool"


# -- item 14: sessions per client ---------------------------------------------------------------


def test_a_client_flooding_sessions_cannot_evict_another_clients_session(served):
    with client(served.url, TOKEN_A) as a, client(served.url, TOKEN_B) as b:
        mine = b.post("/sessions").json()["session_id"]
        assert b.post(f"/sessions/{mine}/reset", json={"seed": 1}).status_code == 200
        flood = [a.post("/sessions") for _ in range(50)]
        assert [r.status_code for r in flood].count(200) == 3  # A's quota
        assert all(r.status_code == 429 and "quota" in r.json()["error"] for r in flood[3:])
        assert b.post(f"/sessions/{mine}/reset", json={"seed": 1}).status_code == 200  # still live
        # Another client's session id is as good as unknown: no use, no drop.
        assert a.post(f"/sessions/{mine}/reset", json={}).status_code == 404
        assert a.delete(f"/sessions/{mine}").json()["dropped"] is False
        for r in flood[:3]:
            a.delete(f"/sessions/{r.json()['session_id']}")
        b.delete(f"/sessions/{mine}")


def test_sessions_expire_after_their_ttl_and_a_full_server_refuses_rather_than_evicts(env):
    now = [0.0]
    sessions = Sessions(env, limit=2, per_client=2, ttl_s=10.0, clock=lambda: now[0])
    a1 = sessions.create("a")
    sessions.create("b")
    with pytest.raises(SessionRefused, match="server holds 2"):
        sessions.create("c")  # full, nothing expired: refused, nobody's live session taken
    assert sessions.get(a1, "a") is not None
    now[0] = 5.0
    sessions.get(a1, "a")  # used: stays live
    now[0] = 12.0  # b's session idled past the TTL, a's did not
    sessions.create("c")
    assert sessions.get(a1, "a") is not None and len(sessions) == 2
    with pytest.raises(SessionNotFound):
        sessions.get(a1, "c")


# -- item 15: 4xx with a message, never 500 ---------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("reset", {"options": {"pivot_id": ["a", "b"]}}),
        ("reset", {"seed": -1}),
        ("reset", {"seed": "5"}),
        ("reset", {"seed": True}),
        ("reset", {"seed": 2**70}),
        ("reset", {"options": {"pivot_id": "x" * 5000}}),
        ("reset", {"options": "x"}),
        ("step", {"action": ["x"]}),
        ("step", {"action": None}),
        ("step", {}),
        ("verify-batch", {"pivot_id": 1, "completions": ["x"]}),
        ("verify-batch", {"pivot_id": "p", "completions": "x"}),
        ("verify-batch", {"pivot_id": "p", "completions": []}),
        ("verify-batch", {"pivot_id": "p", "completions": ["x"], "extra": 1}),
        ("verify-batch", {"pivot_id": "x" * 5000, "completions": ["x"]}),
    ],
)
def test_wrong_types_get_422_with_a_message(served, path, body):
    with client(served.url) as c:
        sid = c.post("/sessions").json()["session_id"]
        c.post(f"/sessions/{sid}/reset", json={"seed": 0})
        url = "/verify-batch" if path == "verify-batch" else f"/sessions/{sid}/{path}"
        answer = c.post(url, json=body)
        c.delete(f"/sessions/{sid}")
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"].startswith("expected ")


@pytest.mark.parametrize(
    "raw",
    [
        b'{"action": "\\ud800"}',  # a lone surrogate (an escape)
        b'{"action": "\xed\xa0\x80"}',  # a lone surrogate (its UTF-8-style bytes)
        b'{"action": "x", "n": ' + b"9" * 5000 + b"}",  # past the 4,300-digit int limit
        b'{"action": ' + b"[" * 5000 + b"]" * 5000 + b"}",  # past the recursion limit
        b'{"action": NaN}',
        b'{"action": "\xff\xfe"}',  # not UTF-8
        b'{"action": ',  # not JSON
    ],
)
def test_hostile_bodies_get_4xx_with_a_message(served, env, raw):
    with client(served.url) as c:
        sid = c.post("/sessions").json()["session_id"]
        c.post(f"/sessions/{sid}/reset", json={"seed": 0})
        step = c.post(f"/sessions/{sid}/step", content=raw, headers={"Content-Type": "application/json"})
        c.delete(f"/sessions/{sid}")
    assert step.status_code in (400, 422), step.text
    assert step.json()["error"]


def test_remote_env_with_a_lone_surrogate_gets_a_remote_error_not_a_client_crash(served, env):
    remote = RemoteEnv(served.url, token=TOKEN_A)
    try:
        remote.reset(seed=0)
        with pytest.raises(RemoteError, match="422"):
            remote.step("ls \ud800")
    finally:
        remote.close()


def random_json(rng: random.Random, depth: int = 0):
    kinds = ["int", "neg", "float", "str", "bool", "null", "list", "dict"] if depth < 4 else ["int", "str", "null"]
    kind = rng.choice(kinds)
    if kind == "int":
        return rng.choice([0, 1, 7, 2**31, 2**64, 10**30])
    if kind == "neg":
        return -rng.randint(1, 10**6)
    if kind == "float":
        return rng.choice([0.5, -1.5, 1e300])
    if kind == "str":
        return rng.choice(["", "x", "pivot", "\x00", "é" * 10, "<tool_call>{}</tool_call>"])
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "null":
        return None
    if kind == "list":
        return [random_json(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    keys = ["seed", "options", "pivot_id", "action", "completions", "x"]
    return {rng.choice(keys): random_json(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def test_random_json_shapes_never_get_a_500(served, env):
    """Fuzz: random JSON (and random shapes of the right keys) posted to every endpoint."""
    rng = random.Random(15)
    seen: set[int] = set()
    with client(served.url) as c:
        sid = c.post("/sessions").json()["session_id"]
        paths = [f"/sessions/{sid}/reset", f"/sessions/{sid}/step", "/verify-batch", "/sessions"]
        for i in range(400):
            body = random_json(rng)
            if i % 2 and isinstance(body, dict):  # half the time, a plausible request with one wrong field
                body = {"pivot_id": env.pivots[0].id, "completions": ["x"], **body}
            answer = c.post(rng.choice(paths), json=body)
            seen.add(answer.status_code)
            assert answer.status_code < 500, (body, answer.text)
            if answer.status_code >= 400:
                assert answer.json()["error"], answer.text
        c.delete(f"/sessions/{sid}")
    assert 200 in seen and 422 in seen


# -- item 15: slow clients ----------------------------------------------------------------------


def test_a_client_that_never_finishes_its_headers_is_cut_off(served):
    with socket.create_connection(("127.0.0.1", served.port), timeout=20) as sock:
        sock.sendall(b"POST /v1/verify-batch HTTP/1.1\r\nHost: x\r\n")  # and nothing more
        assert sock.recv(1024) == b""  # the server closed the connection (request_timeout_s = 1)


def test_a_client_that_never_finishes_its_body_is_cut_off(served):
    head = (
        b"POST /v1/verify-batch HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN_A.encode() + b"\r\n"
        b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
    )
    with socket.create_connection(("127.0.0.1", served.port), timeout=20) as sock:
        sock.sendall(head)
        assert sock.recv(1024) == b""


def test_pivot_serve_with_a_token_requires_it(monkeypatch):
    """The CLI wiring: `--token` reaches the app, and the server answers 401 without it."""
    monkeypatch.delenv("PIVOT_SERVE_TOKEN", raising=False)
    port = free_port()
    cmd = [sys.executable, "-m", "pivot_cli", "serve", "--env", ENV_ID, "--port", str(port), "--token", TOKEN_A]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            if proc.poll() is not None:
                pytest.fail(f"server exited: {proc.stderr.read()}")
            try:
                status = httpx.get(f"{url}/v1/health", timeout=2).status_code
                break
            except httpx.TransportError:
                threading.Event().wait(0.1)
        else:
            pytest.fail("server did not answer")
        assert status == 401
        with client(url, TOKEN_A) as c:
            assert c.get("/health").status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=15)


# -- issue 30 item 12: forwarding headers and whose session it is -------------------------------

VICTIM = "127.0.0.2"  # another loopback address: another peer, as far as the server can tell


@pytest.fixture(scope="module")
def tokenless(env):
    """A loopback server without tokens: clients are told apart by their peer address alone."""
    config = ServerConfig(concurrency=2, max_sessions=8, max_sessions_per_client=2, request_timeout_s=5.0)
    with LiveServer(create_app(env, ENV_ID, config), config=config) as live:
        yield live


def test_a_forwarded_for_header_from_loopback_names_no_other_client(tokenless):
    """A local client claiming another address reaches neither that address's sessions nor a fresh quota."""
    with client(tokenless.url, None, source=VICTIM) as victim, client(tokenless.url, None) as attacker:
        mine = victim.post("/sessions").json()["session_id"]
        assert victim.post(f"/sessions/{mine}/reset", json={"seed": 1}).status_code == 200
        posing = {"X-Forwarded-For": VICTIM, "Forwarded": f"for={VICTIM}"}
        assert attacker.post(f"/sessions/{mine}/reset", json={}, headers=posing).status_code == 404
        assert attacker.delete(f"/sessions/{mine}", headers=posing).json()["dropped"] is False
        # Every request claims a new address: the quota still counts the one peer.
        flood = [attacker.post("/sessions", headers={"X-Forwarded-For": f"10.0.0.{i}"}) for i in range(6)]
        assert [r.status_code for r in flood] == [200, 200, 429, 429, 429, 429]
        assert "quota" in flood[-1].json()["error"]
        assert victim.post(f"/sessions/{mine}/reset", json={"seed": 2}).status_code == 200  # untouched
        assert victim.post("/sessions").status_code == 200  # the server is not full either
        for r in flood[:2]:
            attacker.delete(f"/sessions/{r.json()['session_id']}")


def test_forwarded_for_is_believed_only_from_configured_proxies(env):
    """`forwarded_allow_ips` names the proxy: its X-Forwarded-For is the client; anyone else's is ignored."""
    config = ServerConfig(max_sessions_per_client=1, forwarded_allow_ips=("127.0.0.1",))
    with LiveServer(create_app(env, ENV_ID, config), config=config) as live:
        with client(live.url, None) as proxy, client(live.url, None, source=VICTIM) as other:
            first = proxy.post("/sessions", headers={"X-Forwarded-For": "10.0.0.1"})
            second = proxy.post("/sessions", headers={"X-Forwarded-For": "10.0.0.2"})
            assert first.status_code == second.status_code == 200  # two clients behind the proxy
            sid = first.json()["session_id"]
            assert (
                proxy.post(f"/sessions/{sid}/reset", json={}, headers={"X-Forwarded-For": "10.0.0.2"}).status_code
                == 404
            )
            assert (
                proxy.post(f"/sessions/{sid}/reset", json={}, headers={"X-Forwarded-For": "10.0.0.1"}).status_code
                == 200
            )
            # 127.0.0.2 is no configured proxy: its claim to be 10.0.0.1 is not believed.
            assert (
                other.post(f"/sessions/{sid}/reset", json={}, headers={"X-Forwarded-For": "10.0.0.1"}).status_code
                == 404
            )


def test_server_config_refuses_a_blank_proxy_address():
    with pytest.raises(ValueError, match="forwarded_allow_ips"):
        ServerConfig(forwarded_allow_ips=(" ",))


def test_pivot_serve_believes_no_forwarded_for_by_default(monkeypatch):
    """The CLI wiring: `pivot serve` itself (not a test's server) ignores X-Forwarded-For from loopback."""
    monkeypatch.delenv("PIVOT_SERVE_TOKEN", raising=False)
    monkeypatch.setenv("FORWARDED_ALLOW_IPS", "*")  # uvicorn's own switch must not turn trust back on
    port = free_port()
    cmd = [sys.executable, "-m", "pivot_cli", "serve", "--env", ENV_ID, "--port", str(port)]
    proc = subprocess.Popen(
        [*cmd, "--max-sessions-per-client", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            if proc.poll() is not None:
                pytest.fail(f"server exited: {proc.stderr.read()}")
            try:
                httpx.get(f"{url}/v1/health", timeout=2)
                break
            except httpx.TransportError:
                threading.Event().wait(0.1)
        else:
            pytest.fail("server did not answer")
        with client(url, None) as c:
            codes = [c.post("/sessions", headers={"X-Forwarded-For": f"10.0.0.{i}"}).status_code for i in range(3)]
        assert codes == [200, 429, 429]
    finally:
        proc.terminate()
        proc.wait(timeout=15)
