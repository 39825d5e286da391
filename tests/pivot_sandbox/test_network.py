"""`needs_network`: a fetch of the sandbox's own loopback needs no network; anything doubtful does."""

from __future__ import annotations

import pytest

from pivot_sandbox import needs_network

LOCAL = [
    'curl "http://localhost:3000/fib?n=10"',
    'curl -s -w "\\nHTTP Status: %{http_code}\\n" "http://localhost:3000/fib"',
    "curl -X POST -H 'Content-Type: application/json' -d '{\"a\": 1}' http://127.0.0.1:8080/api | python3 -m json.tool",
    "wget -q -O- http://127.0.0.1:8080/index.html && echo ok",
    "sleep 2 && curl localhost:3000/fib?n=5; curl -o out.json http://[::1]:3000/",
]
REMOTE = [
    "curl https://example.com/x",
    "curl http://localhost:3000/ https://example.com/x",
    "curl -x http://proxy.example:3128 http://localhost:3000/",  # a proxy is a host too
    "curl -K urls.txt",  # a config file may name any host
    "curl example.com",
    "curl",  # no URL: not understood
    "echo curl; wget http://localhost/ 'and curl'",  # a mention this does not read as a fetch
    "curl http://localhost:3000/ && pip install requests",
    "curl 'http://localhost:3000/",  # unbalanced quote
    "curl http://localhost.evil.com/",
    "curl http://127.0.0.1.nip.io/",
]


@pytest.mark.parametrize("command", LOCAL)
def test_a_fetch_of_the_loopback_needs_no_network(command):
    assert not needs_network([command])


@pytest.mark.parametrize("command", REMOTE)
def test_a_fetch_that_may_leave_the_sandbox_needs_the_network(command):
    assert needs_network([command])


def test_other_network_commands_are_unchanged():
    assert needs_network(["pip install requests"]) and needs_network(["ls", "git clone https://x/y"])
    assert not needs_network(["ls -la", "cat curl_notes.txt"])


def test_a_compose_tasks_own_service_is_local_and_other_bare_hosts_are_not():
    services = ["server", "Db"]
    assert not needs_network(["curl -s http://server:8000/greeting"], services)
    assert not needs_network(["wget -qO- server:8000 && curl http://db/health"], services)
    assert needs_network(["curl -s http://server:8000/greeting"])  # no service of that name
    assert needs_network(["curl http://server.example.com/"], services)  # a dotted host is no service name
    assert needs_network(["curl http://server:8000/ http://other:9000/"], services)
    assert needs_network(["curl -x http://server:3128 https://example.com/"], services)  # a proxy to the world
