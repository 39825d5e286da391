"""Low-level container work with the docker SDK.

Isolated creation and commands with a killing timeout and capped output (one action's commands
and change set: `_action.py`). A command reaches its container through the in-container runner
(`_runner.py`, one socket round trip) when the container has one, else through `docker exec`.

Every action runs through `WRAPPER` (`_shell_state.py`): it restores the shell state (working
directory and exported variables) that earlier commands left in a state folder, evaluates the
command, saves the new state, so that `cd project` in one command holds for the next one as in a
terminal, and reports the whole shell state the action left (`RawRun.state`).
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import docker
import docker.errors
from docker.types import Mount, Ulimit

from pivot_sandbox import _runner as rn
from pivot_sandbox._diff import Layers, layers_of, root_state
from pivot_sandbox._hardening import MASKED_PATHS, READONLY_PATHS, shared_etc_files
from pivot_sandbox._host_network import give_back, hold, release, take_turn
from pivot_sandbox._shell_state import WRAPPER, parse_records, split_marked_state
from pivot_sandbox._spec import LABEL, Limits, SandboxSpec

STATE = "/.pivot"  # shell state saved by replay (part of every snapshot)
RUN_STATE = "/.pivot-run"  # per-action state of a verification run (a tmpfs in pool containers)
IDLE = ["sleep", "2147483647"]
HOSTNAME = "pivot-sandbox"
OWNER = f"{socket.gethostname()}:{os.getpid()}"
END_MARK = b"\x1ePIVOT-END "
FORGED_MARK = "end mark forged"  # `RawRun.killed` when stderr holds more than the wrapper's one end mark
# counts what an action can leave that is no file nor process: System V IPC rows, POSIX shm and queues
RESIDUE_PROBE = (
    "{ for t in shm sem msg; do tail -n +2 /proc/sysvipc/$t; done; ls -A /dev/shm; ls -A /dev/mqueue; }"
    " 2>/dev/null | wc -l"
)


@dataclass(frozen=True)
class RawRun:
    """Output of one command: exit code, raw bytes, why it was killed (None if it ended), cwd after it.

    `oom` and `left` (processes still running afterwards) come from the runner; None when unknown.
    `state`: the shell state the wrapper left (`_shell_state.py` records; None when it never said:
    the shell ended first, or the report was forged); `procs`: command lines of the processes the
    action left running (runner: after an action's last command); `fork_failures`: forks the pids
    limit refused during the command (runner only).
    """

    exit_code: int | None
    stdout: bytes
    stderr: bytes
    killed: str | None
    cwd: str = ""
    oom: bool | None = None
    left: int | None = None
    state: dict[str, str] | None = None
    procs: bytes = b""
    fork_failures: int = 0


@dataclass(frozen=True)
class Box:
    """A started sandbox container and how its commands reach it: its runner's channel, or `docker exec`."""

    container: Any
    channel: rn.Channel | None = None
    holder: Box | None = None  # the retired container whose network namespace it joined (`_netns.py`)
    layers: Layers | None = None  # its overlay folders, when this process can read them (`_diff.py`)
    root: tuple[int, ...] | None = None  # its upper folder's own metadata when it started (`_diff.root_state`)
    # False for a replay with registry access (the host's network): never a namespace for candidates
    offline: bool = True
    # the processes its state runs, started again on a snapshot (`_restore.restart`): such a box is never reused
    running: tuple[str, ...] = ()
    # the runner's listing of those processes once restarted (their identities: `processes_against_state`)
    running_listing: bytes = b""

    @property
    def id(self) -> str:
        """The container's id."""
        return str(self.container.id)


def labels(kind: str, backend: str = "") -> dict[str, str]:
    """Labels of every container and image this process makes (`pivot sandbox gc` reads them)."""
    return {LABEL: kind, f"{LABEL}.owner": OWNER, f"{LABEL}.backend": backend}


def create(
    client: docker.DockerClient,
    image: str,
    spec: SandboxSpec,
    limits: Limits,
    kind: str,
    backend: str = "",
    runner: Path | None = None,
    holder: Box | None = None,
) -> Box:
    """Create and start an idle, isolated container; commands are sent to its runner or exec'd into it.

    Only the container that replays set-up and history (`kind="replay"`) keeps Docker's default
    capabilities, because set-up runs as root and must chown the working directory; set-up comes
    from the dataset, not from the policy. Containers that run candidates drop every capability
    but the three the runner needs to switch to the action's user and to kill what it left
    (a switch to a non-root uid drops them for the action itself); where the task's user is root,
    a root agent's (`ROOT_CANDIDATE_CAPABILITIES`). With `holder`, it joins that container's network
    namespace (`--network none` there) instead of creating one. One in the host's network waits for
    the host-network turn (`_host_network`) and holds it until it is removed.
    """
    mem = limits.memory
    etc = shared_etc_files().items()
    extra: dict[str, Any] = {}
    if kind != "replay":
        extra = {"cap_drop": ["ALL"], "tmpfs": {RUN_STATE: "size=1m,mode=1777"}}
        if spec.runs_as_root:
            extra["cap_add"] = rn.ROOT_CANDIDATE_CAPABILITIES
        elif runner:
            extra["cap_add"] = rn.CAPABILITIES
    if runner:
        extra["mounts"] = [Mount(rn.MOUNT_POINT, str(runner), type="bind", read_only=True)]
    if kind != "replay":  # read-only /etc files: Docker's own are shared with a lent network namespace (D7)
        extra["mounts"] = [*extra.get("mounts", []), *(Mount(i, str(h), type="bind", read_only=True) for i, h in etc)]
    network = f"container:{holder.id}" if holder else "none"
    file_size = limits.file_size
    if kind == "replay" and spec.replay_access:
        # the replay of set-up and expert history only (never a candidate): the registries, as a build step
        from pivot_sandbox._access import build_access

        suite = (client.images.get(image).labels or {}).get(f"{LABEL}.suite", "bookworm")
        extra["mounts"] = extra.get("mounts", []) + build_access(suite).docker_mounts()
        network = "host"
        file_size = -1  # packages it installs may hold files past a candidate's cap (stockfish: 70 MB)
    api = client.api
    # the low-level calls: `containers.run` adds an inspect round trip (and a pull on a missing image)
    host_config = api.create_host_config(
        network_mode=network,
        **extra,
        security_opt=["no-new-privileges"],
        pids_limit=limits.pids,
        mem_limit=mem,
        memswap_limit=mem,
        nano_cpus=int(limits.cpus * 1e9),
        ulimits=[Ulimit(name="fsize", soft=file_size, hard=file_size)],
        # with a runner, the runner is pid 1 and reaps (docker-init, a dumpable root process holding the
        # attach stream the runner answers on, could be traced by a root candidate: issue 38, D3)
        init=runner is None,
        shm_size="8m",
    )
    # Docker's masked and read-only paths, with the ones newer Docker releases added (`_hardening`)
    host_config["MaskedPaths"] = list(MASKED_PATHS)
    host_config["ReadonlyPaths"] = list(READONLY_PATHS)
    turn = take_turn() if network == "host" else None  # one such container at a time (`_host_network`)
    try:
        container_id = api.create_container(
            image,
            [rn.MOUNT_POINT] if runner else IDLE,
            detach=True,
            labels=labels(kind, backend),
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
    container = client.containers.prepare_model({"Id": container_id})
    layers = layers_of(container)
    return Box(container, channel, holder, layers, root_state(layers) if layers else None, network != "host")


def remove(box: Box) -> None:
    """Remove a container, ignoring one that is already gone; the host-network turn it held is given back."""
    if box.channel is not None:
        box.channel.close()
    try:
        box.container.remove(force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as e:
        if "already in progress" not in str(e):
            raise
    finally:
        release(box.container.id)


def settle(box: Box) -> bool:
    """Kill whatever still runs in a runner container; True when nothing but the runner is left."""
    if box.channel is None:
        return False
    try:
        return box.channel.call(["true"], uid=-1, gid=-1, timeout=5, output_cap=1024).left == 0
    except rn.RunnerLost:
        return False


def run(
    box: Box,
    argv: Sequence[str],
    *,
    user: str,
    timeout: float,
    output_cap: int,
    marked: bool = False,
    keep: bool = False,
    clean_ipc: bool = False,
    list_left: bool = False,
) -> RawRun:
    """Run `argv` as `user`, stopped when it runs past `timeout` or prints more than `output_cap` bytes.

    `keep` leaves the command's background processes running (replay, and every command of an
    action but its last); `clean_ipc` first removes the user's System V IPC objects (runner only);
    `list_left` lists what is left running in `procs` even when it is kept (runner only).
    `marked`: the command is `WRAPPER`, whose end mark carries the exit status and the cwd.
    """
    ids = rn.parse_user(user)
    if box.channel is None or ids is None:
        return _exec(box.container, argv, user=user, timeout=timeout, output_cap=output_cap, marked=marked)
    try:
        reply = box.channel.call(
            argv,
            uid=ids[0],
            gid=ids[1],
            timeout=timeout,
            output_cap=output_cap,
            clean_ipc=clean_ipc,
            keep=keep,
            list_left=list_left,
        )
    except rn.RunnerLost as e:
        # the runner died (the OOM killer, a root action that killed everything) or hung: the
        # container is in no known state; it is killed, and never reused
        _kill(box.container)
        why = "oom" if _oom_killed(box.container) else ("timeout" if e.timed_out else "runner lost")
        return RawRun(None, b"", b"", why)
    code = reply.exit_code if reply.exit_code is not None else 128 + reply.signal
    # the cwd is the kernel's, read by the runner while the wrapper's last step was parked; a
    # command that ended the shell before that (`exit`) has none ("") and nothing it printed stands in
    cwd = reply.cwd or ""
    raw = RawRun(
        None if reply.killed else code,
        reply.stdout,
        reply.stderr,
        reply.killed,
        cwd=cwd,
        oom=reply.oom,
        left=reply.left,
        # read from the kernel while the wrapper was parked; none when it never parked
        state=parse_records(reply.state) if reply.cwd is not None else None,
        procs=reply.procs,
        fork_failures=reply.fork_failures,
    )
    return _marked(raw, marked)


def _marked(raw: RawRun, marked: bool) -> RawRun:
    """The wrapper reported its exit status and cwd at the end of stderr: no exec_inspect round trip.

    Through the runner, its exit status (the wrapper exits with the command's) and the cwd it read
    from the kernel win over the mark's: `printf` can write any mark. Through `docker exec` the
    mark is all there is. A process the command left in the background may print marks of its own,
    before or after the real one, so more than one mark is no report at all: the run counts as
    stopped ("end mark forged"), and a candidate doing it scores 0 with that reason.
    """
    if not marked or raw.killed:
        return raw
    if raw.stderr.count(END_MARK) > 1:
        return replace(raw, exit_code=None, killed=FORGED_MARK)
    cut = raw.stderr.rfind(END_MARK)
    if cut >= 0:
        code, _, cwd = raw.stderr[cut + len(END_MARK) :].decode(errors="replace").partition(" ")
        if code.strip().lstrip("-").isdigit():
            status = raw.exit_code if raw.exit_code is not None else int(code)
            # `oom` is known only to the runner: a runner's run keeps the cwd and state it read, even ""
            if raw.oom is not None:
                return replace(raw, exit_code=status, stderr=raw.stderr[:cut])
            stderr, state = split_marked_state(raw.stderr[:cut])
            return replace(raw, exit_code=status, stderr=stderr, cwd=cwd.strip(), state=state or None)
    return raw


def _exec(container: Any, argv: Sequence[str], *, user: str, timeout: float, output_cap: int, marked: bool) -> RawRun:
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
    raw = _marked(RawRun(None, bytes(out), bytes(err), None), marked)
    if raw.exit_code is not None or raw.killed:
        return raw
    code = api.exec_inspect(exec_id).get("ExitCode")
    # no end mark: the command ended the shell (`exit`) before the wrapper could say where it was ("")
    return RawRun(code, bytes(out), bytes(err), None)


def _oom_killed(container: Any) -> bool:
    try:
        return bool(container.client.api.inspect_container(container.id)["State"].get("OOMKilled"))
    except (docker.errors.APIError, KeyError):
        return False


def _kill(container: Any) -> None:
    try:
        container.kill()
    except docker.errors.APIError:
        pass


def shell_run(
    box: Box,
    spec: SandboxSpec,
    limits: Limits,
    command: str,
    *,
    src: str,
    dst: str,
    quiet: bool = False,
    timeout: float | None = None,
    keep: bool = True,
    output_cap: int | None = None,
    list_left: bool = False,
    replaying: bool = False,
) -> RawRun:
    """Run one shell command through `WRAPPER` (state read from `src`, written to `dst`).

    A command that starts from the saved state (`src != dst`) begins a verification run: it also
    clears what an earlier action of a reused container may have left in System V IPC, POSIX shared
    memory and message queues, except in a box whose state runs processes (`Box.running`, never
    reused) and in a replay (`replaying`, which moves the state from folder to folder): what those
    hold there is the state's. `list_left`: the runner lists what runs after the command.
    `timeout` and `output_cap` default to the limits' (what an action's later commands get is less).
    """
    # through the runner, the wrapper ends parked so that the runner reads its cwd (`runner.c`)
    park = box.channel is not None and rn.parse_user(spec.user) is not None
    keeps_ipc = bool(box.running) or replaying
    live = "1" if keeps_ipc else ""
    argv = [spec.shell, "-c", WRAPPER, "pivot", src, dst, command, "1" if quiet else "", "1" if park else "", live]
    return run(
        box,
        argv,
        user=spec.user,
        timeout=timeout or limits.action_timeout,
        output_cap=limits.output_cap if output_cap is None else output_cap,
        marked=True,
        keep=keep,
        clean_ipc=src != dst and not keeps_ipc,
        list_left=list_left,
    )


BASELINE_COMMANDS = ("/sbin/docker-init", "sleep 2147483647")  # a docker-exec container's own processes


def running_processes(box: Box) -> bytes:
    """The command lines of the container's processes but its own, as the runner lists them (nothing stopped).

    Through the runner, a command that runs nothing asks it to list what runs; through `docker exec`,
    the daemon's process table (a container that cannot be listed gives b"").
    """
    if box.channel is not None:
        return run(box, ["true"], user="0", timeout=10, output_cap=1024, keep=True, list_left=True).procs
    try:
        top = box.container.top()
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


def left_running(box: Box, raw: RawRun) -> bytes:
    """What runs after the command `raw` answered: the runner's list in its reply, else (`docker exec`) a look now."""
    return raw.procs if box.channel is not None else running_processes(box)


def read_text(box: Box, path: str, user: str = "0") -> str:
    """The text of a small file inside the container ("" when missing).

    A read never stops what runs in the container: a server a session's command started must be
    there for the next command and for the task's tests (`keep`; an action's own processes are
    stopped by the runner after the action's last command, not by a later read).
    """
    res = run(box, ["cat", path], user=user, timeout=10, output_cap=1024 * 1024, keep=True)
    return res.stdout.decode(errors="replace") if res.exit_code == 0 else ""


def procs_file(container: Any) -> str | None:
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


def is_pristine(container: Any, baseline_processes: int, procs: str | None = None) -> bool:
    """True when no process but the container's own is left, nor non-file state (files: `_action.effect_of`).

    `procs` (from `procs_file`) is read first: the kernel's list of the container's processes costs
    no daemon call. A longer list (or none) is confirmed by `docker top`, which also runs `ps`.
    Then one `docker exec` of `RESIDUE_PROBE` looks for System V IPC objects, POSIX shared memory
    and queues (the runner counts these itself; this is the `docker exec` transport's check).
    """
    if not _no_process_left(container, baseline_processes, procs):
        return False
    probe = _exec(container, ["sh", "-c", RESIDUE_PROBE], user="0", timeout=10, output_cap=4096, marked=False)
    return probe.exit_code == 0 and probe.stdout.strip() == b"0"


def _no_process_left(container: Any, baseline_processes: int, procs: str | None) -> bool:
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
