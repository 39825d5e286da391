"""The Docker wing's containers: created isolated through the docker SDK, reached by `docker exec` without a runner.

`create` makes a candidate's or a replay's container with Docker's hardening (`contract/hardening.py`)
and the backend's limits, and returns the neutral `Box` the shared replay code works on
(`replay/box.py`); `Container` is that box's `Sandbox`: the SDK container behind the protocol.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import docker
import docker.errors
from docker.models.containers import Container as SdkContainer
from docker.types import HostConfig, Mount, Ulimit

from pivot_sandbox.contract.hardening import HOSTNAME, MASKED_PATHS, READONLY_PATHS, shared_etc_files
from pivot_sandbox.contract.spec import LABEL, Limits, SandboxSpec, labels
from pivot_sandbox.docker import services as sv
from pivot_sandbox.docker.cpus import nano_cpus
from pivot_sandbox.docker.host_network import give_back, hold, release, take_turn
from pivot_sandbox.docker.registries import registry_network
from pivot_sandbox.errors import SandboxError
from pivot_sandbox.replay import runner as rn
from pivot_sandbox.replay.box import IDLE, RESIDUE_PROBE, RUN_STATE, Box, RawRun, marked_run
from pivot_sandbox.replay.diff import Layers, root_state

BASELINE_COMMANDS = ("/sbin/docker-init", "sleep 2147483647")  # a docker-exec container's own processes


@dataclass(frozen=True)
class Container:
    """A Docker container as a box's `Sandbox` (`replay/box.py`)."""

    container: SdkContainer

    @property
    def id(self) -> str:
        """The container's id."""
        return str(self.container.id)

    def kill(self) -> None:
        """Kill the container (an engine error: it is gone already)."""
        _kill(self.container)

    def oom_killed(self) -> bool:
        """Docker's `State.OOMKilled`."""
        return _oom_killed(self.container)

    def exec(self, argv: Sequence[str], *, user: str, timeout: float, output_cap: int, marked: bool) -> RawRun:
        """Run `argv` through `docker exec`."""
        return exec_run(self.container, argv, user=user, timeout=timeout, output_cap=output_cap, marked=marked)

    def processes(self) -> bytes:
        """The daemon's process table, the container's own processes left out (b"" when it cannot be listed)."""
        try:
            top = self.container.top()
            rows, titles = top.get("Processes") or [], top.get("Titles") or []
        except Exception:  # noqa: BLE001 - a container that cannot be listed is judged by `is_pristine` later
            return b""
        column = titles.index("CMD") if "CMD" in titles else -1
        out = []
        for row in rows:
            command = str(row[column]) if row else ""
            if command and not command.startswith(BASELINE_COMMANDS):
                out.append(command.replace(" ", "\x1f").encode(errors="replace") + b"\0")
        return b"".join(out)

    def changes(self) -> list[tuple[str, int]]:
        """`docker diff` (structured JSON)."""
        return [(str(i["Path"]), int(i["Kind"])) for i in self.container.diff() or []]

    def put_archive(self, path: str, data: bytes) -> None:
        """Unpack a tar through the daemon (owned as the tar says, whatever the sandbox left at its paths)."""
        self.container.put_archive(path, data)


class _Isolation(TypedDict, total=False):
    """The `create_host_config` options that differ by container kind: capabilities, mounts, the run-state tmpfs."""

    cap_drop: list[str]
    cap_add: list[str]
    tmpfs: dict[str, str]
    mounts: list[Mount]


def create(
    client: docker.DockerClient,
    image: str,
    spec: SandboxSpec,
    limits: Limits,
    kind: str,
    backend: str = "",
    runner: Path | None = None,
    holder: Box | None = None,
    network: str = "none",
) -> Box:
    """Create and start an idle, isolated container; commands are sent to its runner or exec'd into it.

    Only the container that replays set-up and history (`kind="replay"`) keeps Docker's default
    capabilities, because set-up runs as root and must chown the working directory; set-up comes
    from the dataset, not from the policy. Containers that run candidates drop every capability
    but the three the runner needs to switch to the action's user and to kill what it left
    (a switch to a non-root uid drops them for the action itself); where the task's user is root,
    a root agent's (`ROOT_CANDIDATE_CAPABILITIES`). With `holder`, it joins that container's network
    namespace (`--network none` there) instead of creating one. One in the host's network waits for
    the host-network turn (`_host_network`) and holds it until it is removed. `network="registries"`
    (an episode's session only, `kind="episode"`): it joins the registry network, where it reaches the
    package registries through this process's proxy and nothing else (`docker/registries.py`).
    A spec with `services`: its own fresh services on a private network, the container on it and on no
    other (`docker/services.py`), whatever its kind; they are removed with it (`remove`).
    """
    _check_network(spec, kind, network, holder)
    options = _isolation(spec, kind, runner)
    group = sv.start_group(client.api, spec, limits, backend) if spec.services else None
    try:
        if group is None:
            mode, file_size = _network(client, image, spec, kind, network, options, holder, limits.file_size)
        else:  # no registry access, no host network: the replay too sees the services' network only
            mode, file_size = group.network, limits.file_size
        host_config = _host_config(client.api, mode, options, limits, file_size, init=runner is None)
        if group is not None:
            host_config["Dns"] = [sv.UNROUTABLE_DNS]  # a name no service has is never forwarded off the host
        container_id, channel = _start(
            client.api,
            image,
            spec,
            labels(kind, backend),
            host_config,
            runner=runner,
            holder=holder,
            host_network=mode == "host",
        )
    except BaseException:
        if group is not None:
            sv.remove_group(client.api, group)
        raise
    if group is not None:
        sv.attach(container_id, group)
    container = client.containers.prepare_model({"Id": container_id})
    layers = layers_of(container)
    offline = mode == "none" or mode.startswith("container:")  # never a namespace holder otherwise
    return Box(Container(container), channel, holder, layers, root_state(layers) if layers else None, offline)


def _check_network(spec: SandboxSpec, kind: str, network: str, holder: Box | None) -> None:
    """Refuse a network the container may not have (registries: an episode's only; never beside services)."""
    if network not in ("none", "registries") or (network == "registries" and (kind != "episode" or holder)):
        raise SandboxError(
            f"network={network!r} is not for a {kind!r} container: only an episode's may reach registries"
        )
    if spec.services and (network != "none" or holder is not None):
        raise SandboxError(
            f"a sandbox with services ({', '.join(s.name for s in spec.services)}) is on their private network "
            f"only: network={network!r} and a lent network namespace are not for it"
        )


def _network(
    client: docker.DockerClient,
    image: str,
    spec: SandboxSpec,
    kind: str,
    network: str,
    options: _Isolation,
    holder: Box | None,
    file_size: int,
) -> tuple[str, int]:
    """(the container's network mode, its file-size cap); the registry access mounted into `options` where given."""
    suite = ""
    if (kind == "replay" and spec.replay_access) or network == "registries":
        suite = (client.images.get(image).labels or {}).get(f"{LABEL}.suite", "bookworm")
    if kind == "replay" and spec.replay_access:
        # the replay of set-up and expert history only (never a candidate): the registries, as a build step
        from pivot_sandbox.images.access import build_access

        options["mounts"] = options.get("mounts", []) + build_access(suite).docker_mounts()
        return "host", -1  # packages it installs may hold files past a candidate's cap (stockfish: 70 MB)
    if network == "registries":
        # an episode's live session (never a candidate): the registries through the proxy, until its tests
        from pivot_sandbox.images.access import proxied_access

        registries = registry_network(client)
        options["mounts"] = options.get("mounts", []) + proxied_access(suite, registries.proxy.url).docker_mounts()
        return registries.network_id, file_size
    return (f"container:{holder.id}" if holder else "none"), file_size


def _isolation(spec: SandboxSpec, kind: str, runner: Path | None) -> _Isolation:
    """A candidate's covers (capabilities dropped, read-only /etc files) and the runner's mount, by kind."""
    etc = shared_etc_files().items()
    options: _Isolation = {}
    if kind != "replay":
        options = {"cap_drop": ["ALL"], "tmpfs": {RUN_STATE: "size=1m,mode=1777"}}
        if spec.runs_as_root:
            options["cap_add"] = rn.ROOT_CANDIDATE_CAPABILITIES
        elif runner:
            options["cap_add"] = rn.CAPABILITIES
    if runner:
        options["mounts"] = [Mount(rn.MOUNT_POINT, str(runner), type="bind", read_only=True)]
    # read-only /etc files: Docker's own are shared with a lent network namespace (D7). A container with
    # services lends none, but gets them too, its resolver the embedded DNS that names the services: the
    # same bytes in every container of the spec (Docker's hosts file holds each one's own address, which
    # the effect's state would show as a difference between the expert's container and a candidate's)
    if kind != "replay":
        if spec.services:
            etc = {**dict(etc), "/etc/resolv.conf": sv.resolv_conf()}.items()
        bound = (Mount(i, str(h), type="bind", read_only=True) for i, h in etc)
        options["mounts"] = [*options.get("mounts", []), *bound]
    return options


def _host_config(
    api: docker.APIClient, network: str, options: _Isolation, limits: Limits, file_size: int, *, init: bool
) -> HostConfig:
    """The container's host config: its network, `options`, Docker's hardening and the backend's limits."""
    mem = limits.memory
    # the low-level calls: `containers.run` adds an inspect round trip (and a pull on a missing image)
    host_config = api.create_host_config(
        network_mode=network,
        **options,
        security_opt=["no-new-privileges"],
        pids_limit=limits.pids,
        mem_limit=mem,
        memswap_limit=mem,
        nano_cpus=nano_cpus(api, limits.cpus),
        ulimits=[Ulimit(name="fsize", soft=file_size, hard=file_size)],
        # with a runner, the runner is pid 1 and reaps (docker-init, a dumpable root process holding the
        # attach stream the runner answers on, could be traced by a root candidate: issue 38, D3)
        init=init,
        shm_size="8m",
    )
    # Docker's masked and read-only paths, with the ones newer Docker releases added (`_hardening`)
    host_config["MaskedPaths"] = list(MASKED_PATHS)
    host_config["ReadonlyPaths"] = list(READONLY_PATHS)
    return host_config


def _start(
    api: docker.APIClient,
    image: str,
    spec: SandboxSpec,
    container_labels: dict[str, str],
    host_config: HostConfig,
    *,
    runner: Path | None,
    holder: Box | None,
    host_network: bool,
) -> tuple[str, rn.Channel | None]:
    """Create and start the container: its id, and the channel to its runner (None: `docker exec`).

    One in the host's network waits for the host-network turn first (one such container at a time:
    `_host_network`) and holds it from then on.
    """
    turn = take_turn() if host_network else None
    try:
        container_id = api.create_container(
            image,
            [rn.MOUNT_POINT] if runner else IDLE,
            detach=True,
            labels=container_labels,
            host_config=host_config,
            environment={"HOME": spec.workdir, **spec.env},
            working_dir="/",
            stdin_open=bool(runner),
            user="0" if runner else None,
            # one name for every sandbox (`hostname`, prompts); a joined container has its holder's
            hostname=None if holder else HOSTNAME,
        )["Id"]
        try:
            api.start(container_id)
            channel = rn.Channel(api, container_id) if runner else None
        except BaseException:
            api.remove_container(container_id, force=True)
            raise
    except BaseException:
        if turn is not None:
            give_back(turn)
        raise
    if turn is not None:
        hold(container_id, turn)
    return container_id, channel


def remove(box: Box) -> None:
    """Remove a container, ignoring one that is already gone; the host-network turn it held is given back."""
    if box.channel is not None:
        box.channel.close()
    try:
        box.sandbox.container.remove(force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as e:
        if "already in progress" not in str(e):
            raise
    finally:
        release(box.id)
        sv.teardown(box.sandbox.container.client.api, box.id)  # its services and their network, if any


def exec_run(
    container: SdkContainer, argv: Sequence[str], *, user: str, timeout: float, output_cap: int, marked: bool
) -> RawRun:
    """Run `argv` through `docker exec`.

    The SDK's exec has no timeout, so the stream is read in a thread and the container is killed
    from here: that ends the stream whatever the command left running.
    """
    api = container.client.api
    exec_id = api.exec_create(container.id, list(argv), user=user)["Id"]
    out, err = bytearray(), bytearray()
    state: dict[str, str | None] = {"killed": None}

    def pump() -> None:
        try:
            for o, e in api.exec_start(exec_id, stream=True, demux=True):
                for buf, chunk in ((out, o), (err, e)):
                    if chunk and len(out) + len(err) < output_cap:
                        buf += chunk[: output_cap - len(out) - len(err)]
                if (o or e) and len(out) + len(err) >= output_cap and state["killed"] is None:
                    state["killed"] = "output cap"
                    _kill(container)
                    return
        except (docker.errors.APIError, OSError, ValueError):
            return  # the container was killed under the stream

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        state["killed"] = state["killed"] or "timeout"
        _kill(container)
        thread.join(10)
    if state["killed"]:
        return RawRun(None, bytes(out), bytes(err), state["killed"])
    raw = marked_run(RawRun(None, bytes(out), bytes(err), None), marked)
    if raw.exit_code is not None or raw.killed:
        return raw
    code = api.exec_inspect(exec_id).get("ExitCode")
    # no end mark: the command ended the shell (`exit`) before the wrapper could say where it was ("")
    return RawRun(code, bytes(out), bytes(err), None)


def _oom_killed(container: SdkContainer) -> bool:
    try:
        return bool(container.client.api.inspect_container(container.id)["State"].get("OOMKilled"))
    except (docker.errors.APIError, KeyError):
        return False


def _kill(container: SdkContainer) -> None:
    try:
        container.kill()
    except docker.errors.APIError:
        pass


def procs_file(container: SdkContainer) -> str | None:
    """The host's `cgroup.procs` of a running container, None where it cannot be read from here.

    Readable when the daemon runs on this machine, in this process's pid namespace; the path must
    name the container's id, so a pid seen from another namespace cannot point at the wrong group.
    """
    try:
        pid = int(container.client.api.inspect_container(container.id)["State"]["Pid"])
        with open(f"/proc/{pid}/cgroup") as f:
            lines = f.read().splitlines()
    except (docker.errors.APIError, OSError, KeyError, TypeError, ValueError):
        return None
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if pid <= 0 or container.id not in path:
            continue
        if "pids" in controllers.split(","):
            root = "/sys/fs/cgroup/pids"  # cgroup v1
        elif not controllers:
            root = "/sys/fs/cgroup"  # cgroup v2 (unified)
        else:
            continue
        try:
            with open(f"{root}{path}/cgroup.procs") as f:
                if str(pid) in f.read().split():
                    return f"{root}{path}/cgroup.procs"
        except OSError:
            continue
    return None


def is_pristine(container: SdkContainer, baseline_processes: int, procs: str | None = None) -> bool:
    """True when no process but the container's own is left, nor non-file state (files: `_action.effect_of`).

    `procs` (from `procs_file`) is read first: the kernel's list of the container's processes costs
    no daemon call. A longer list (or none) is confirmed by `docker top`, which also runs `ps`.
    Then one `docker exec` of `RESIDUE_PROBE` looks for System V IPC objects, POSIX shared memory
    and queues (the runner counts these itself; this is the `docker exec` transport's check).
    """
    if not _no_process_left(container, baseline_processes, procs):
        return False
    probe = exec_run(container, ["sh", "-c", RESIDUE_PROBE], user="0", timeout=10, output_cap=4096, marked=False)
    return probe.exit_code == 0 and probe.stdout.strip() == b"0"


def _no_process_left(container: SdkContainer, baseline_processes: int, procs: str | None) -> bool:
    if procs:
        try:
            with open(procs) as f:
                if len(f.read().split()) <= baseline_processes:
                    return True
        except OSError:
            pass
    try:
        return len(container.top().get("Processes") or ()) <= baseline_processes
    except docker.errors.APIError:
        return False


def layers_of(container: SdkContainer) -> Layers | None:
    """The container's overlay layers, None when they cannot be read from here (not overlay2, not local, not root)."""
    try:
        driver = container.client.api.inspect_container(container.id)["GraphDriver"]
    except Exception:  # noqa: BLE001 - any failure means: use docker diff
        return None
    data = driver.get("Data") or {}
    upper, lowers = data.get("UpperDir"), tuple(p for p in (data.get("LowerDir") or "").split(":") if p)
    if driver.get("Name") != "overlay2" or not upper or not lowers:
        return None
    if not all(os.access(p, os.R_OK | os.X_OK) for p in (upper, *lowers)):
        return None
    return Layers(upper, lowers)
