"""A sandbox container's services: a compose task's other services, fresh beside it on a private network.

Every container `containers.create` makes for a spec with `services` (`contract/services.py`) — the
replay's, each candidate's, an episode's and so its tests' — gets a set of its own (`start_group`):

- a new Docker network, `internal` (no route out of it) and with `inhibit_ipv4` (the host's bridge holds
  no address on it, so the gateway address reaches nothing: on a plain internal network it reaches the
  host's own services), labelled with its owner;
- one container per service on that network only, reachable by its name (a network alias; its host
  name too), under the backend's limits with `no-new-privileges`; the services keep Docker's default
  capabilities, as compose gives them (a server binding port 80);
- the main container joins that network and no other (`containers.create`): it reaches the services by
  name through Docker's embedded DNS (its /etc/resolv.conf, read-only, names only that: `resolv_conf`),
  and nothing else. Every container of the group is given an
  unroutable DNS server, so that a name the embedded DNS does not know is never forwarded from the
  host's side (it would be, to a resolver on the host's loopback).

Services are waited for until each listens on a TCP port (or `READY_SECONDS` pass: a worker that never
listens), so that the first command of a replay meets them as the harness's agent did, seconds later.

The group goes with its main container: `teardown` (from `containers.remove`, on every path that
removes a container: a finished candidate, a timeout's kill, the backend's close) removes the services
and then the network. A process killed before it could is swept by `cleanup.gc` (the labels name its
owner). Snapshots hold the main container only (`docker commit`): a candidate meets each service as the
task starts it, never as the history left it.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors

from pivot_core import cache_dir
from pivot_sandbox.contract.spec import LABEL, Limits, SandboxSpec, labels
from pivot_sandbox.docker.cpus import nano_cpus

SERVICES = "services"  # the `pivot-gym` label of a group's network
SERVICE = "service"  # ... and of its service containers
INHIBIT = "com.docker.network.bridge.inhibit_ipv4"
UNROUTABLE_DNS = "192.0.2.1"  # TEST-NET-1: forwarded from inside the group's network, where nothing routes
READY_SECONDS = 10.0
_LISTEN = "cat /proc/net/tcp /proc/net/tcp6 2>/dev/null"
# what Docker writes for a container on its own network, but a name no service has fails in a second, not in
# ten: the embedded DNS's forward to `UNROUTABLE_DNS` waits for an answer that never comes
RESOLV_CONF = "nameserver 127.0.0.11\noptions ndots:0 timeout:1 attempts:1\n"


def resolv_conf() -> Path:
    """A host file with a resolv.conf naming Docker's embedded DNS, bound read-only into main containers."""
    with _lock:
        path = cache_dir("sandbox-etc") / "resolv.conf.services"
        if not path.is_file() or path.read_text() != RESOLV_CONF:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(f".{path.name}.{os.getpid()}")
            partial.write_text(RESOLV_CONF)
            partial.chmod(0o644)
            os.replace(partial, path)  # a container starting meanwhile binds a whole file, old or new
        return path


@dataclass(frozen=True)
class ServiceGroup:
    """One main container's services: its private network and the containers on it."""

    network: str  # the network's id
    containers: tuple[str, ...]


_lock = threading.Lock()
_groups: dict[str, ServiceGroup] = {}  # main container id -> its services (`teardown` removes them)


def start_group(api: docker.APIClient, spec: SandboxSpec, limits: Limits, backend: str) -> ServiceGroup:
    """A private internal network with the spec's services started and listening on it."""
    name = f"pivot-gym-{SERVICES}-{uuid.uuid4().hex[:16]}"
    network = api.create_network(
        name, driver="bridge", internal=True, options={INHIBIT: "true"}, labels=labels(SERVICES, backend)
    )["Id"]
    group = ServiceGroup(network, ())
    try:
        for service in spec.services:
            host_config = api.create_host_config(
                network_mode=network,
                security_opt=["no-new-privileges"],
                pids_limit=limits.pids,
                mem_limit=limits.memory,
                memswap_limit=limits.memory,
                nano_cpus=nano_cpus(api, limits.cpus),
                dns=[UNROUTABLE_DNS],
                init=True,
            )
            endpoint = api.create_networking_config({network: api.create_endpoint_config(aliases=[service.name])})
            found = api.create_container(
                service.image,
                list(service.command) or None,
                detach=True,
                environment=dict(service.env),
                labels={**labels(SERVICE, backend), f"{LABEL}.network": network},
                host_config=host_config,
                networking_config=endpoint,
                hostname=service.name,
            )["Id"]
            group = ServiceGroup(network, (*group.containers, found))
            api.start(found)
        _wait_listening(api, group)
    except BaseException:
        remove_group(api, group)
        raise
    return group


def _wait_listening(api: docker.APIClient, group: ServiceGroup) -> None:
    """Wait until each service listens on a TCP port, has stopped, or `READY_SECONDS` have passed."""
    deadline = time.monotonic() + READY_SECONDS
    waiting = list(group.containers)
    while waiting and time.monotonic() < deadline:
        waiting = [c for c in waiting if not _ready(api, c)]
        if waiting:
            time.sleep(0.05)


def _ready(api: docker.APIClient, container: str) -> bool:
    """True when the container listens on a TCP port (a row in state 0A), or runs no more."""
    try:
        if not api.inspect_container(container)["State"].get("Running"):
            return True
        exec_id = api.exec_create(container, ["sh", "-c", _LISTEN])["Id"]
        rows = api.exec_start(exec_id).decode(errors="replace").splitlines()
    except (docker.errors.APIError, KeyError):
        return True  # no shell to look with: started is all that can be known
    return any(len(r.split()) > 3 and r.split()[3] == "0A" for r in rows[1:])


def attach(container_id: str, group: ServiceGroup) -> None:
    """Remember that `group` goes with the main container `container_id`."""
    with _lock:
        _groups[container_id] = group


def network_of(container_id: str) -> str | None:
    """The private network of a main container's services, None when it has none."""
    with _lock:
        group = _groups.get(container_id)
    return group.network if group else None


def teardown(api: docker.APIClient, container_id: str) -> None:
    """Remove the services of a main container that is gone (nothing when it had none)."""
    with _lock:
        group = _groups.pop(container_id, None)
    if group is not None:
        remove_group(api, group)


def remove_group(api: docker.APIClient, group: ServiceGroup) -> None:
    """Remove a group's containers, then its network (one still in use, or gone already, is left to `gc`)."""
    for container in group.containers:
        try:
            api.remove_container(container, force=True)
        except docker.errors.APIError:
            pass  # gone already, or its removal is in progress
    for attempt in range(20):
        try:
            api.remove_network(group.network)
            return
        except docker.errors.NotFound:
            return
        except docker.errors.APIError:
            time.sleep(0.05 * (attempt + 1))  # an endpoint the daemon is still releasing


__all__ = ["SERVICE", "SERVICES", "ServiceGroup", "attach", "network_of", "remove_group", "start_group", "teardown"]
