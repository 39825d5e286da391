"""Low-level container work with the docker SDK.

Isolated creation, commands with a killing timeout and capped output, and a container's
filesystem change set.

Every action runs through `WRAPPER`: it restores the shell state (working directory and exported
variables) that earlier commands left in a state folder, evaluates the command, and saves the new
state, so that `cd project` in one command holds for the next one as in a terminal.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import docker
import docker.errors
from docker.types import Ulimit

from verifiers_plugins.sandbox._effects import normalize_output
from verifiers_plugins.sandbox._spec import LABEL, Effect, Limits, SandboxSpec

STATE = "/.pivot"  # shell state saved by replay (part of every snapshot)
RUN_STATE = "/.pivot-run"  # per-action state of a verification run (a tmpfs in pool containers)
IDLE = ["sleep", "2147483647"]
OWNER = f"{socket.gethostname()}:{os.getpid()}"
SIGXFSZ_EXIT = 128 + 25

WRAPPER = r"""__pivot_from="$1"; __pivot_to="$2"; __pivot_cmd="$3"; __pivot_quiet="$4"
if [ "$__pivot_from" != "$__pivot_to" ]; then
  find "$__pivot_to" /dev/shm /dev/mqueue -mindepth 1 -type d -exec chmod u+rwx {} \; 2>/dev/null
  for __pivot_d in "$__pivot_to" /dev/shm /dev/mqueue; do
    rm -rf "$__pivot_d"/* "$__pivot_d"/.[!.]* "$__pivot_d"/..?* 2>/dev/null
  done
fi
if [ -f "$__pivot_from/env" ]; then . "$__pivot_from/env" >/dev/null 2>&1; fi
if [ -f "$__pivot_from/cwd" ]; then cd "$(cat "$__pivot_from/cwd")" 2>/dev/null; fi
if [ -n "$__pivot_quiet" ]; then eval "$__pivot_cmd" >"$__pivot_to/out" 2>&1 </dev/null; else eval "$__pivot_cmd"; fi
__pivot_rc=$?
pwd >"$__pivot_to/cwd" 2>/dev/null
export -p >"$__pivot_to/env" 2>/dev/null
printf '\036PIVOT-END %s %s' "$__pivot_rc" "$(pwd)" >&2
exit $__pivot_rc
"""
END_MARK = b"\x1ePIVOT-END "

# Lists every changed path with a content descriptor; runs as the action's user.
HASHER = r"""cap="$1"; shift
printf 'cwd\t%s\n' "$(cat /.pivot-run/cwd 2>/dev/null || cat /.pivot/cwd 2>/dev/null)"
for p in "$@"; do
  if [ -L "$p" ]; then printf 'link:%s\t%s\n' "$(readlink "$p")" "$p"
  elif [ -d "$p" ]; then printf 'dir\t%s\n' "$p"
  elif [ -f "$p" ]; then
    if [ ! -r "$p" ]; then printf 'unreadable\t%s\n' "$p"
    else s=$(wc -c < "$p"); s=$((s + 0))
      if [ "$s" -gt "$cap" ]; then printf 'size:%s\t%s\n' "$s" "$p"
      else printf 'sha256:%s\t%s\n' "$(sha256sum < "$p" | cut -c1-64)" "$p"; fi
    fi
  else printf 'other\t%s\n' "$p"; fi
done
"""
OOM_PROBE = "cat /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null"


@dataclass(frozen=True)
class RawRun:
    """Output of one command: exit code, raw bytes, why it was killed (None if it ended), cwd after it."""

    exit_code: int | None
    stdout: bytes
    stderr: bytes
    killed: str | None
    cwd: str = ""


def labels(kind: str, backend: str = "") -> dict[str, str]:
    """Labels of every container and image this process makes (`pivot sandbox gc` reads them)."""
    return {LABEL: kind, f"{LABEL}.owner": OWNER, f"{LABEL}.backend": backend}


def create(client: docker.DockerClient, image: str, spec: SandboxSpec, limits: Limits, kind: str,
           backend: str = "") -> Any:
    """Create and start an idle, isolated container; commands are exec'd into it.

    Only the container that replays set-up and history (`kind="replay"`) keeps Docker's default
    capabilities, because set-up runs as root and must chown the working directory; set-up comes
    from the dataset, not from the policy. Containers that run candidates drop every capability.
    """
    mem = limits.memory
    extra: dict[str, Any] = {} if kind == "replay" else {"cap_drop": ["ALL"], "tmpfs": {RUN_STATE: "size=1m,mode=1777"}}
    api = client.api
    # the low-level calls: `containers.run` adds an inspect round trip (and a pull on a missing image)
    host_config = api.create_host_config(
        network_mode="none", **extra, security_opt=["no-new-privileges"], pids_limit=limits.pids,
        mem_limit=mem, memswap_limit=mem, nano_cpus=int(limits.cpus * 1e9),
        ulimits=[Ulimit(name="fsize", soft=limits.file_size, hard=limits.file_size)], init=True, shm_size="8m",
    )
    container_id = api.create_container(
        image, IDLE, detach=True, labels=labels(kind, backend), host_config=host_config,
        environment={"HOME": spec.workdir, **spec.env}, working_dir="/",
    )["Id"]
    try:
        api.start(container_id)
    except BaseException:
        api.remove_container(container_id, force=True)
        raise
    return client.containers.prepare_model({"Id": container_id})


def remove(container: Any) -> None:
    """Remove a container, ignoring one that is already gone."""
    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as e:
        if "already in progress" not in str(e):
            raise


def run(container: Any, argv: Sequence[str], *, user: str, timeout: float, output_cap: int,
        env: Mapping[str, str] | None = None, marked: bool = False) -> RawRun:
    """Exec `argv`; kill the container when it runs past `timeout` or prints more than `output_cap` bytes.

    The SDK's exec has no timeout, so the stream is read in a thread and the container is killed
    from here: that ends the stream whatever the command left running.
    """
    api = container.client.api
    exec_id = api.exec_create(container.id, list(argv), user=user, environment=dict(env or {}))["Id"]
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
    if marked:
        # the wrapper reported its exit status and cwd at the end of stderr: no exec_inspect round trip
        cut = err.rfind(END_MARK)
        if cut >= 0:
            code, _, cwd = bytes(err[cut + len(END_MARK):]).decode(errors="replace").partition(" ")
            if code.strip().lstrip("-").isdigit():
                return RawRun(int(code), bytes(out), bytes(err[:cut]), None, cwd.strip())
    code = api.exec_inspect(exec_id).get("ExitCode")
    return RawRun(code, bytes(out), bytes(err), None)


def _kill(container: Any) -> None:
    try:
        container.kill()
    except docker.errors.APIError:
        pass


def shell_run(container: Any, spec: SandboxSpec, limits: Limits, command: str, *, src: str, dst: str,
              quiet: bool = False, timeout: float | None = None, user: str | None = None) -> RawRun:
    """Run one shell command through `WRAPPER` (state read from `src`, written to `dst`)."""
    argv = [spec.shell, "-c", WRAPPER, "pivot", src, dst, command, "1" if quiet else ""]
    return run(container, argv, user=user or spec.user, timeout=timeout or limits.action_timeout,
               output_cap=limits.output_cap, marked=True)


def changed_paths(container: Any) -> tuple[list[tuple[str, int]], bool]:
    """`docker diff`: (path, kind) pairs and whether the saved shell state itself changed.

    Kind is 0 changed, 1 added, 2 deleted; the state folders are left out of the pairs. A change of
    `STATE` makes the container unfit for reuse: every action starts from it.
    """
    out, state_changed = [], False
    for item in container.diff() or ():
        path = item["Path"]
        if any(path == d or path.startswith(d + "/") for d in (STATE, RUN_STATE)):
            state_changed = state_changed or path == STATE or path.startswith(STATE + "/")
            continue
        out.append((path, int(item["Kind"])))
    return out, state_changed


def file_changes(container: Any, spec: SandboxSpec, limits: Limits,
                 cwd: str = "") -> tuple[dict[str, str], str, bool]:
    """The change set, the working directory, and whether the saved shell state changed.

    The change set maps path -> content descriptor ("deleted" for removed paths).
    One exec hashes the changed files (and reads the cwd when `cwd` is not known yet); an action
    that changed nothing and reported its cwd costs no exec at all.
    """
    changes, state_changed = changed_paths(container)
    files = {p: "deleted" for p, kind in changes if kind == 2}
    present = [p for p, kind in changes if kind != 2]
    if not present and cwd:
        return files, cwd, state_changed
    for i in range(0, max(len(present), 1), 200):
        chunk = present[i : i + 200]
        res = run(container, [spec.shell, "-c", HASHER, "hash", str(limits.hash_cap), *chunk],
                  user=spec.user, timeout=30, output_cap=4 * 1024 * 1024)
        for line in res.stdout.decode(errors="replace").splitlines():
            desc, _, path = line.partition("\t")
            if desc == "cwd":
                cwd = cwd or path.strip()
            elif path:
                files[path] = desc
    return files, cwd, state_changed


def read_text(container: Any, path: str, user: str = "0") -> str:
    """The text of a small file inside the container ("" when missing)."""
    res = run(container, ["cat", path], user=user, timeout=10, output_cap=1024 * 1024)
    return res.stdout.decode(errors="replace") if res.exit_code == 0 else ""


def classify_kill(container: Any, raw: RawRun) -> str | None:
    """Why the sandbox stopped the command: our own kill, the file size cap, or the OOM killer."""
    if raw.killed:
        return raw.killed
    if raw.exit_code == SIGXFSZ_EXIT:
        return "file size cap"
    if raw.exit_code == 137:
        probe = run(container, ["sh", "-c", OOM_PROBE], user="0", timeout=5, output_cap=4096)
        for line in probe.stdout.decode(errors="replace").splitlines():
            name, _, value = line.partition(" ")
            if name == "oom_kill" and value.strip().isdigit() and int(value) > 0:
                return "oom"
    return None


def effect_of(container: Any, spec: SandboxSpec, limits: Limits, commands: Sequence[str]) -> tuple[Effect, bool]:
    """Run the commands of one action in order (shell state carried between them) and capture the effect.

    Also says whether the container may be clean: False when the action was stopped, changed a file
    or touched the saved shell state (`is_pristine` then checks the processes).
    """
    out, err = bytearray(), bytearray()
    raw = RawRun(0, b"", b"", None)
    for i, command in enumerate(commands):
        raw = shell_run(container, spec, limits, command, src=STATE if i == 0 else RUN_STATE, dst=RUN_STATE)
        out += raw.stdout
        err += raw.stderr
        killed = classify_kill(container, raw)
        if killed:
            return _effect(limits, None, out, err, {}, "", killed), False
    files, cwd, state_changed = file_changes(container, spec, limits, raw.cwd if commands else "")
    return _effect(limits, raw.exit_code, out, err, files, cwd, None), not (files or state_changed)


def _effect(limits: Limits, code: int | None, out: bytes, err: bytes, files: dict[str, str], cwd: str,
            killed: str | None) -> Effect:
    cap = limits.compare_chars
    return Effect(code, normalize_output(out.decode(errors="replace"), cap),
                  normalize_output(err.decode(errors="replace"), cap), files, cwd, killed)


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
    """True when no process but the container's own is left (the file checks are `effect_of`'s).

    `procs` (from `procs_file`) is read first: the kernel's list of the container's processes costs
    no daemon call. A longer list (or none) is confirmed by `docker top`, which also runs `ps`.
    Writes `docker diff` cannot see (the run-state tmpfs, /dev/shm, /dev/mqueue) are emptied by
    `WRAPPER` before the next action of a reused container.
    """
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
