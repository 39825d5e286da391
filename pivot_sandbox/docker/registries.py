"""Registry access for an episode's live session (`network="registries"`): a private network and a proxy.

An episode opened with `network="registries"` (`Session`, the terminal episode env) lets the agent
install what it needs (`pip install`, `apt-get install`) from the package registries this machine is
configured for, as the replay of a task's set-up does (`images/access.py`), and from nowhere else:

- its container joins `NETWORK`, an internal Docker network (no route out of it; containers on it
  cannot reach each other), instead of `--network none`;
- the one thing it can reach there is `RegistryProxy`, run by this process on the network's gateway
  address: HTTP `CONNECT` (TLS) and plain HTTP requests to `registry_endpoints()` (the machine's apt
  mirrors and pip indexes, on ports 80, 443 and those their URLs name) only; any other host or port
  gets a 403; host names are resolved by the proxy, the container has no DNS;
- pip and apt are pointed at it (`images/access.proxied_access`: the machine's pip configuration and
  CA bundle, its apt sources, plus the proxy), bind-mounted as for a build;
- before the task's tests run the container is disconnected (`disconnect`): the tests run with no
  network, as they always do.

Why not the replay's host network: a container cannot leave the host's network before its tests,
and the host network reaches every host the machine reaches, the machine's own local services too.
Candidates never get any of this (`containers.create` refuses it to any container but an episode's).
"""

from __future__ import annotations

import select
import socket
import threading
from collections import deque
from dataclasses import dataclass
from urllib.parse import urlsplit

import docker
import docker.errors

from pivot_sandbox.contract.spec import LABEL
from pivot_sandbox.errors import SandboxError
from pivot_sandbox.images.access import registry_endpoints

NETWORK = "pivot-gym-registries"
HEAD_CAP = 64 * 1024  # bytes of a request head the proxy reads
BODY_CAP = 1 << 20  # bytes of a plain HTTP request body it forwards (registries are read with GET)
CONNECT_TIMEOUT = 30.0  # seconds to read a request head and to reach a registry
IDLE = 300.0  # seconds a relayed connection may stay silent before it is closed
MAX_CONNECTIONS = 64  # connections relayed at once (each holds a thread of this process); more get a 503
_ICC = "com.docker.network.bridge.enable_icc"  # "false": containers on the network cannot reach each other
_HOP_HEADERS = {"host", "connection", "proxy-connection", "keep-alive", "proxy-authorization", "te", "upgrade"}


class RegistryProxy:
    """An HTTP proxy that lets through requests to `endpoints` only, listening on `address` (a free port).

    Args:
        address: the address to listen on (the registry network's gateway).
        endpoints: (host, port) pairs it may reach, host names in lower case.

    Attributes:
        url: `http://address:port`, what pip and apt are given.
        refused: the latest targets it refused (for tests and diagnostics).
    """

    def __init__(self, address: str, endpoints: frozenset[tuple[str, int]]) -> None:
        self.endpoints = endpoints
        try:
            self._server = socket.create_server((address, 0))
        except OSError as e:
            raise SandboxError(
                f"the registry proxy cannot listen on {address} ({e}): an episode's registry access "
                "needs the Docker engine on this machine"
            ) from e
        self.port = int(self._server.getsockname()[1])
        self.url = f"http://{address}:{self.port}"
        self.refused: deque[str] = deque(maxlen=100)
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        threading.Thread(target=self._serve, name="pivot-registry-proxy", daemon=True).start()

    def allows(self, host: str, port: int) -> bool:
        """True when `host:port` is one of the registries."""
        return (host.lower().rstrip("."), port) in self.endpoints

    def close(self) -> None:
        """Stop accepting connections (those being relayed run to their end)."""
        self._server.close()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return  # closed
            if not self._slots.acquire(blocking=False):
                with conn:
                    try:
                        conn.settimeout(5.0)
                        _answer(conn, "503 Service Unavailable", "pivot-gym: too many registry connections at once\n")
                    except OSError:
                        pass
                continue
            threading.Thread(target=self._handle, args=(conn,), name="pivot-registry-proxy-conn", daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(CONNECT_TIMEOUT)
            try:
                head, rest = _read_head(conn)
                lines = head.decode("latin-1").split("\r\n")
                method, target, version = lines[0].split(" ")
                if method.upper() == "CONNECT":
                    self._tunnel(conn, target, rest)
                else:
                    self._forward(conn, method, target, version, lines[1:], rest)
            except (OSError, ValueError):
                return  # a client that went away or spoke no HTTP: nothing to answer
            finally:
                self._slots.release()

    def _tunnel(self, conn: socket.socket, target: str, rest: bytes) -> None:
        """`CONNECT host:port`: a byte tunnel (TLS) to an allowed registry."""
        host, _, port = target.rpartition(":")
        host = host.strip("[]")
        if not host or not port.isdigit() or not self.allows(host, int(port)):
            self._refuse(conn, target)
            return
        upstream = self._reach(conn, host, int(port))
        if upstream is None:
            return
        with upstream:
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if rest:
                upstream.sendall(rest)
            _relay(conn, upstream)

    def _forward(
        self, conn: socket.socket, method: str, target: str, version: str, headers: list[str], rest: bytes
    ) -> None:
        """A plain HTTP request in absolute form (apt's): sent on alone (`Connection: close`), the answer relayed."""
        url = urlsplit(target)
        try:
            port = url.port or 80
        except ValueError:
            port = -1
        if url.scheme != "http" or not url.hostname or not self.allows(url.hostname, port):
            self._refuse(conn, target)
            return
        kept, length = [], 0
        for line in headers:
            name, _, value = line.partition(":")
            key = name.strip().lower()
            if key == "transfer-encoding":
                self._refuse(conn, target, "411 Length Required")
                return
            if key == "content-length":
                length = int(value.strip())
            if key not in _HOP_HEADERS and line:
                kept.append(line)
        if length > BODY_CAP:
            self._refuse(conn, target, "413 Content Too Large")
            return
        body = rest
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                return
            body += chunk
        path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        host = url.hostname + (f":{url.port}" if url.port else "")
        request = [f"{method} {path} {version}", f"Host: {host}", *kept, "Connection: close", "", ""]
        upstream = self._reach(conn, url.hostname, port)
        if upstream is None:
            return
        with upstream:
            upstream.sendall("\r\n".join(request).encode("latin-1") + body[:length])
            upstream.settimeout(IDLE)
            while chunk := upstream.recv(65536):
                conn.sendall(chunk)

    def _reach(self, conn: socket.socket, host: str, port: int) -> socket.socket | None:
        try:
            return socket.create_connection((host, port), timeout=CONNECT_TIMEOUT)
        except OSError as e:
            _answer(conn, "502 Bad Gateway", f"pivot-gym: {host}:{port} could not be reached: {e}\n")
            return None

    def _refuse(self, conn: socket.socket, target: str, status: str = "403 Forbidden") -> None:
        self.refused.append(target)
        _answer(conn, status, f"pivot-gym: {target} is not a package registry this sandbox may reach\n")


def _answer(conn: socket.socket, status: str, text: str) -> None:
    body = text.encode("utf-8", "replace")
    head = f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    conn.sendall(head.encode("latin-1") + body)


def _read_head(conn: socket.socket) -> tuple[bytes, bytes]:
    """The request head (up to its blank line) and what was read past it."""
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > HEAD_CAP:
            raise ValueError("request head too long")
        chunk = conn.recv(8192)
        if not chunk:
            raise ValueError("closed before the request head ended")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def _relay(a: socket.socket, b: socket.socket) -> None:
    """Copy bytes both ways until either side closes or both stay silent for `IDLE` seconds."""
    a.settimeout(IDLE)  # a side that stops reading ends the relay too
    b.settimeout(IDLE)
    while True:
        ready, _, _ = select.select([a, b], [], [], IDLE)
        if not ready:
            return
        for s in ready:
            data = s.recv(65536)
            if not data:
                return
            (b if s is a else a).sendall(data)


@dataclass(frozen=True)
class RegistryNetwork:
    """The internal network an episode's container joins, and this process's proxy on its gateway."""

    network_id: str
    proxy: RegistryProxy


_lock = threading.Lock()
_proxies: dict[str, RegistryProxy] = {}  # gateway address -> this process's proxy listening on it


def registry_network(client: docker.DockerClient) -> RegistryNetwork:
    """`NETWORK` (created on first use, internal) and the proxy on its gateway (started on first use)."""
    with _lock:
        network = _network(client)
        config = (network.attrs.get("IPAM") or {}).get("Config") or [{}]
        gateway = str(config[0].get("Gateway") or "").split("/")[0]
        if not gateway:
            raise SandboxError(
                f"the network {NETWORK} has no gateway address: the registry proxy has nowhere to listen"
            )
        proxy = _proxies.get(gateway)
        if proxy is None:
            proxy = _proxies[gateway] = RegistryProxy(gateway, registry_endpoints())
        return RegistryNetwork(str(network.id), proxy)


def _network(client: docker.DockerClient) -> docker.models.networks.Network:
    """The one `NETWORK` of the engine (the oldest id where a race made two), checked to be internal."""
    for attempt in range(2):
        found = sorted((n for n in client.networks.list(names=[NETWORK]) if n.name == NETWORK), key=lambda n: n.id)
        if found:
            network = client.networks.get(found[0].id)
            options = network.attrs.get("Options") or {}
            if network.attrs.get("Internal") is not True or options.get(_ICC) != "false":
                raise SandboxError(
                    f"the Docker network {NETWORK} is not internal, or lets its containers reach each other: "
                    f"remove it (`docker network rm {NETWORK}`) and it is made again as it must be"
                )
            return network
        if attempt == 0:
            try:
                client.networks.create(
                    NETWORK,
                    driver="bridge",
                    internal=True,
                    check_duplicate=True,
                    options={_ICC: "false"},
                    labels={LABEL: "network"},
                )
            except docker.errors.APIError:
                pass  # another process made it meanwhile: found on the next look
    raise SandboxError(f"the Docker network {NETWORK} could not be created")


def disconnect(client: docker.DockerClient, container_id: str) -> None:
    """Take every network away from a container (it keeps its loopback only), checked.

    Raises:
        SandboxError: the engine refused, or the container still has a network after it.
    """
    try:
        networks = client.api.inspect_container(container_id)["NetworkSettings"]["Networks"] or {}
        for name, entry in networks.items():
            client.api.disconnect_container_from_network(container_id, entry.get("NetworkID") or name, force=True)
        left = client.api.inspect_container(container_id)["NetworkSettings"]["Networks"] or {}
    except docker.errors.APIError as e:
        raise SandboxError(f"the registry network could not be taken from the episode's container: {e}") from e
    if left:
        raise SandboxError(f"the episode's container is still on {sorted(left)} after its network was taken away")


__all__ = ["NETWORK", "RegistryNetwork", "RegistryProxy", "disconnect", "registry_network"]
