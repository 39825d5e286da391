"""A docker-compose task whose second service is built from its own folder (tests/data/compose_tasks/two-service).

The client reaches the server by its service name, in the replay, in every candidate's container (each
with a server of its own, fresh: `/hits` counts the requests a server has had) and in the task's tests,
and reaches nothing else: not the host through the network's gateway, not another address, not a public
name. After the runs, nothing this module's backends made is left (containers nor networks). The
reading and the spec's checks run without Docker.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
from pathlib import Path

import pytest

from pivot_sandbox.contract.marks import SandboxContext
from pivot_sandbox.contract.services import ServiceSpec
from pivot_sandbox.contract.spec import LABEL, SandboxSpec
from pivot_sandbox.errors import SandboxError
from pivot_sandbox.tasks.compose import read_compose
from pivot_sandbox.tasks.terminal_bench import load_task

TASK = Path(__file__).resolve().parents[1] / "data" / "compose_tasks" / "two-service"
FETCH = (
    'python3 -c "import urllib.request;'
    " print(urllib.request.urlopen('http://server:8000/{}', timeout=5).read().decode(), end='')\""
)
# the client's attempts to reach anything but its services: the host on the network's gateway (where this
# test listens), the host's default bridge, an outside address, a public name; each prints what it got
PROBE = r"""python3 - <<'EOF'
import socket, struct
def reach(host, port):
    try:
        socket.create_connection((host, port), 1).close()
        return "open"
    except OSError:
        return "closed"
rows = [l.split() for l in open("/proc/net/route").read().splitlines()[1:]]
gateways = [socket.inet_ntoa(struct.pack("<L", int(r[2], 16))) for r in rows if r[1] == "00000000"]
for host in gateways + ["172.17.0.1", "1.1.1.1"]:
    print(host, reach(host, PORT))
try:
    socket.getaddrinfo("example.com", 80)
    print("dns resolved")
except OSError:
    print("dns failed")
EOF"""


def test_the_compose_file_is_read_with_its_built_service():
    task = load_task(TASK)
    assert task.compose == "" and task.context == TASK.resolve()
    (server,) = task.services
    assert server.name == "server" and server.context == (TASK / "server").resolve()
    assert server.env == {"GREETING": "hello from server"} and server.command == ()


@pytest.mark.parametrize(
    ("server", "said"),
    [
        ("{build: {context: 3}}", "services.server.build.context: expected a string"),
        ("{build: ../..}", "services.server.build.context: '../..' lies outside the task folder"),
        ("{build: ., environment: 7}", "services.server.environment: expected a mapping or a list"),
        ("{build: ., command: {a: 1}}", "services.server.command: expected a string or a list"),
        ("{image: vendor/minio:1}", "2 services; 'server' runs image 'vendor/minio:1', which no registry here serves"),
        ("{image: 'python:3.13-slim'}", "services.server.command: 'python:3.13-slim' runs as a local stand-in"),
        ("[1, 2]", "services.server: expected a mapping"),
    ],
)
def test_a_compose_file_that_cannot_run_names_the_file_and_the_key(tmp_path, server, said):
    (tmp_path / "Dockerfile").write_text("FROM debian:bookworm\n")
    (tmp_path / "docker-compose.yaml").write_text(f"services:\n  client: {{build: .}}\n  server: {server}\n")
    problem = read_compose(tmp_path).problem
    assert problem.startswith(str(tmp_path / "docker-compose.yaml")) and said in problem, problem


def test_a_stand_in_image_with_a_command_is_a_service(tmp_path):
    compose = "services:\n  client: {build: .}\n  cache: {image: 'python:3.13-slim', command: python3 -m http.server}\n"
    (tmp_path / "docker-compose.yaml").write_text(compose)
    (service,) = read_compose(tmp_path).services
    assert service.dockerfile == "FROM python:3.13-slim\n" and service.command == ("python3", "-m", "http.server")


def test_the_spec_checks_its_services_and_names_the_key():
    with pytest.raises(SandboxError, match=r"sandbox\.services\[0\]\.name"):
        SandboxSpec(image="x", services=[{"name": "no spaces", "image": "y"}])
    with pytest.raises(SandboxError, match=r"context\.sandbox\.services\[1\]\.image"):
        SandboxSpec.from_context({"sandbox": {"image": "x", "services": [{"name": "a", "image": "y"}, {"name": "b"}]}})
    with pytest.raises(SandboxError, match=r"context\.sandbox\.services\[0\]\.port: not a key"):
        SandboxSpec.from_context({"sandbox": {"image": "x", "services": [{"name": "a", "image": "y", "port": 1}]}})
    with pytest.raises(SandboxError, match="given twice"):
        SandboxSpec(image="x", services=[ServiceSpec("a", "y"), ServiceSpec("A", "z")])
    with pytest.raises(SandboxError, match=r"context\.sandbox\.services: expected a list"):
        SandboxSpec.from_context({"sandbox": {"image": "x", "services": "server"}})


def test_services_travel_in_the_context_and_leave_other_keys_as_they_were():
    spec = SandboxSpec(image="x", services=(ServiceSpec("server", "img", {"A": "1"}, ("python3", "s.py")),))
    context = SandboxContext(spec).into({})
    assert context["sandbox"]["services"] == [
        {"name": "server", "image": "img", "env": {"A": "1"}, "command": ["python3", "s.py"]}
    ]
    assert SandboxSpec.from_context(context) == spec
    plain = SandboxSpec(image="x")
    assert "services" not in SandboxContext(plain).into({})["sandbox"]
    # a spec without services keeps the snapshot key it had before the field
    old = {"image": "x", "setup": [], "workdir": "/app", "user": "1000:1000", "shell": "/bin/sh", "env": {}}
    old = {**old, "replay_access": False, "history": ["ls"]}
    assert plain.key(["ls"]) == hashlib.sha256(json.dumps(old, sort_keys=True).encode()).hexdigest()
    assert spec.key(["ls"]) != SandboxSpec(image="x").key(["ls"])


def test_the_namespace_backend_hands_a_spec_with_services_to_docker():
    from pivot_sandbox.namespace.backend import NamespaceBackend

    spec = SandboxSpec(image="x", services=(ServiceSpec("server", "img"),))
    # answered before anything of the backend is asked: the spec alone decides
    assert "services (server)" in NamespaceBackend.cannot_run(None, spec)  # type: ignore[arg-type]


# -- on the Docker engine ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def built(docker_client):
    """(report, spec) of the two-service task, built once (reused by content hash afterwards)."""
    from pivot_sandbox.tasks.terminal_bench import task_image

    report = task_image(docker_client, load_task(TASK))
    assert report.status in ("built", "cached"), report
    (server,) = report.services
    assert server.image.startswith("pivot-gym/task:two-service-server-") and server.command
    assert docker_client.images.get(server.image).labels[LABEL] == "task"  # evicted with the task images
    return report, SandboxSpec(
        image=report.image, workdir="/app", user="root", shell="/bin/bash", services=report.services
    )


@pytest.fixture(scope="module")
def backends(docker_client):
    """Every backend this module makes; after the module, none has left a container or a network."""
    made = []
    yield made
    for backend in made:
        backend.close()
    for backend in made:
        mine = {"label": f"{LABEL}.backend={backend.token}"}
        assert docker_client.api.containers(all=True, filters=mine) == []
        assert docker_client.api.networks(filters=mine) == []


@pytest.fixture(scope="module")
def backend(backends):
    from pivot_sandbox import docker_backend

    made = docker_backend(pool_size=1)
    backends.append(made)
    return made


def _listening() -> tuple[socket.socket, int]:
    server = socket.create_server(("0.0.0.0", 0))
    threading.Thread(target=lambda: [server.accept()[0].close() for _ in range(20)], daemon=True).start()
    return server, server.getsockname()[1]


@pytest.mark.docker
def test_each_container_gets_a_fresh_server_by_name_and_reaches_nothing_else(built, backend):
    _, spec = built
    history = [FETCH.format("hits") + " > /app/first.txt"]  # the replay's server: its first request
    listener, port = _listening()
    try:
        effects = backend.run_group(
            spec,
            history,
            [
                ["cat /app/first.txt; " + FETCH.format("hits")],
                [FETCH.format("hits")],
                [PROBE.replace("PORT", str(port))],
            ],
        )
    finally:
        listener.close()
    first, second, probe = effects
    assert first.exit_code == 0 and first.stdout == "1\n1", first  # the history's fetch, then a fresh server's
    assert second.stdout == "1" and second.files == {}, second
    lines = probe.stdout.splitlines()
    assert lines and lines[-1] == "dns failed", probe
    assert all(line.endswith(" closed") for line in lines[:-1]) and len(lines) >= 3, probe
    assert backend.run(spec, history, [FETCH.format("greeting")]).stdout.strip() == "hello from server"


@pytest.mark.docker
def test_the_tasks_tests_see_the_server(built, backends):
    from pivot_sandbox import docker_backend
    from pivot_sandbox.tasks.verification import TEST_LIMITS, run_tests

    _, spec = built
    backend = docker_backend(**TEST_LIMITS)
    backends.append(backend)
    solution = (TASK / "solution.sh").read_text().splitlines()[-1]
    assert run_tests(backend, TASK, spec, [], [solution], timeout=60).passed
    assert not run_tests(backend, TASK, spec, [], ["true"], timeout=60).passed  # nothing saved: a test fails


@pytest.mark.docker
def test_a_candidate_killed_at_its_timeout_leaves_no_service_behind(built, backends, docker_client):
    from pivot_sandbox import docker_backend

    _, spec = built
    backend = docker_backend(action_timeout=1.0, pool_size=0)
    backends.append(backend)
    effect = backend.run(spec, [], [FETCH.format("hits") + " && sleep 30"])
    assert effect.killed == "timeout" and effect.stdout.startswith("1"), effect
    backend.drain()  # the removal runs in the background
    mine = {"label": f"{LABEL}.backend={backend.token}"}
    assert docker_client.api.networks(filters=mine) == []
    assert [c["Labels"][LABEL] for c in docker_client.api.containers(all=True, filters=mine)] == []


@pytest.mark.docker
def test_the_client_and_its_service_share_one_internal_network_and_no_other(built, backend, docker_client):
    import docker.errors

    from pivot_sandbox.docker import services as sv
    from pivot_sandbox.replay.session import open_session

    _, spec = built
    session = open_session(backend, spec, [])
    try:
        client = session.live().id
        network = sv.network_of(client)
        assert network is not None
        attrs = docker_client.api.inspect_network(network)
        assert attrs["Internal"] is True and attrs["Options"].get(sv.INHIBIT) == "true"
        attached = set(attrs["Containers"])
        assert client in attached and len(attached) == 2  # the client and the server, nothing else
        for container in attached:
            networks = docker_client.api.inspect_container(container)["NetworkSettings"]["Networks"]
            assert [entry["NetworkID"] for entry in networks.values()] == [network]
        (server,) = attached - {client}
        assert docker_client.api.inspect_container(server)["Config"]["Labels"][LABEL] == sv.SERVICE
    finally:
        session.close()
    backend.drain()
    with pytest.raises(docker.errors.NotFound):  # removed with the session's container
        docker_client.api.inspect_network(network)
