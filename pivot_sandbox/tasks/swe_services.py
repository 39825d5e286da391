"""Local stand-ins for the hosts an instance's tests reach, so that the tests grade offline.

The old requests suites (2.0-2.4) send their requests to httpbin.org unless `HTTPBIN_URL` names
another server (`HTTPBIN = os.environ.get('HTTPBIN_URL', 'http://httpbin.org/')` in test_requests.py);
with no network their FAIL_TO_PASS tests fail whatever the patch, and the instance cannot be graded.
httpbin itself is a package on the registries: the instance image gets it in a virtualenv of its own
(`/opt/pivot-services/<name>`, apart from the tested environment, whose pins it must not move), and the
eval script starts it on the loopback before the tests and stops it after. The tests still run with no
network at all: the loopback is the container's own. Later requests suites serve httpbin through the
`pytest-httpbin` plugin in the environment's own pins and ignore `HTTPBIN_URL`.

Public API:
    services_for(instance) -> tuple[LocalService, ...]
    install_lines(instance) -> tuple[str, ...]     (Dockerfile RUN lines, registry access at build time)
    start_lines(instance) / stop_lines(instance)   (eval script lines around the test command)
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

from pivot_sandbox.tasks.swe import SWEInstance

SERVICES_DIR = "/opt/pivot-services"
READY_SECONDS = 30


@dataclass(frozen=True)
class LocalService:
    """A server the tests reach, run on the container's loopback.

    Attributes:
        name: the folder of its virtualenv under `SERVICES_DIR`.
        stands_for: the host the tests would reach without it (said in the docs and the image label).
        requirement: what `pip install` installs in its virtualenv (a pinned release on the registries).
        module: `python -m` runs this with `--host 127.0.0.1 --port <port>`.
        port: its loopback port.
        env: what the tests read to find it (`{port}` is replaced).
    """

    name: str
    stands_for: str
    requirement: str
    module: str
    port: int
    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def python(self) -> str:
        """Its virtualenv's interpreter."""
        return f"{SERVICES_DIR}/{self.name}/bin/python"


# httpbin 0.10.2 runs on Python 3.7+; its `httpbin.core` takes --host and --port (Flask's server)
HTTPBIN = LocalService(
    "httpbin",
    "httpbin.org",
    "httpbin==0.10.2",
    "httpbin.core",
    8080,
    {"HTTPBIN_URL": "http://127.0.0.1:{port}/"},
)
SERVICES: Mapping[str, tuple[LocalService, ...]] = {"psf/requests": (HTTPBIN,)}


def services_for(instance: SWEInstance) -> tuple[LocalService, ...]:
    """The services the instance's tests reach (by repository)."""
    return SERVICES.get(instance.repo, ())


def install_lines(instance: SWEInstance) -> tuple[str, ...]:
    """Dockerfile RUN lines that install each service in a virtualenv of its own (the environment's Python)."""
    lines = []
    for s in services_for(instance):
        venv = f"{SERVICES_DIR}/{s.name}"
        lines.append(
            f"RUN python -m venv {venv} && {s.python} -m pip install -q --no-cache-dir --disable-pip-version-check "
            f"{shlex.quote(s.requirement)}"
        )
    return tuple(lines)


def start_lines(instance: SWEInstance) -> tuple[str, ...]:
    """Eval script lines: start each service on the loopback, wait until it answers, export what the tests read."""
    lines = []
    for s in services_for(instance):
        log, pid = f"/tmp/pivot-{s.name}.log", f"/tmp/pivot-{s.name}.pid"
        lines.append(
            f"(cd / && exec {s.python} -m {s.module} --host 127.0.0.1 --port {s.port}) > {log} 2>&1 & echo $! > {pid}"
        )
        probe = f"import socket; socket.create_connection(('127.0.0.1', {s.port}), 1)"
        lines.append(
            f"for _ in $(seq {READY_SECONDS * 5}); do {s.python} -c {shlex.quote(probe)} 2>/dev/null && break;"
            " sleep 0.2; done"
        )
        lines += [f"export {k}={shlex.quote(v.format(port=s.port))}" for k, v in s.env.items()]
    return tuple(lines)


def stop_lines(instance: SWEInstance) -> tuple[str, ...]:
    """Eval script lines: stop each service (a live session outlives the test run)."""
    return tuple(f'kill "$(cat /tmp/pivot-{s.name}.pid)" 2>/dev/null || true' for s in services_for(instance))


__all__ = ["HTTPBIN", "SERVICES", "LocalService", "install_lines", "services_for", "start_lines", "stop_lines"]
