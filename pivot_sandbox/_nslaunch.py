"""The command line that starts one namespace sandbox (`_namespace.py`): unshare, the overlay, prlimit, bwrap.

`unshare --mount` gives the sandbox a private mount namespace; in it `LAUNCH` joins the sandbox's
cgroups, mounts the overlay (the snapshot and the root file system below a fresh upper folder),
then execs `prlimit --fsize` and `bwrap`, which starts the runner in new pid, network (loopback
only), IPC and UTS namespaces with every capability dropped but the ones the runner needs, under
Docker's default covers (`_hardening.py`): masked and read-only `/proc` and `/sys` paths, device
nodes of the sandbox's own, the seccomp filter, and the runner as pid 1 (bubblewrap's own pid 1
would be a dumpable process holding the runner's channel, which a root candidate could trace).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from pivot_sandbox import _runner as rn
from pivot_sandbox._containers import HOSTNAME, RUN_STATE
from pivot_sandbox._hardening import HOST_SYSFS_PATHS, MASKED_PATHS, READONLY_PATHS, existing

# joins the cgroups given first, mounts the overlay, then execs the rest (prlimit, bwrap, the runner)
LAUNCH = r"""set -e
n=$1; shift
while [ "$n" -gt 0 ]; do echo $$ > "$1/cgroup.procs"; shift; n=$((n - 1)); done
mount -t overlay overlay -o "lowerdir=$1,upperdir=$2,workdir=$3" "$4"
shift 4
exec "$@"
"""


def launch_command(
    programs: Mapping[str, str],
    *,
    runner: Path,
    lowers: Sequence[Path],
    upper: Path,
    work: Path,
    merged: Path,
    cgroups: Sequence[Path],
    cgroup_binds: Sequence[tuple[Path, str]],
    etc: Mapping[str, Path],
    devices: Mapping[str, Path],
    env: Mapping[str, str],
    kind: str,
    runs_as_root: bool,
    seccomp_fd: int | None,
    file_size: int,
) -> list[str]:
    """The argv of one sandbox. `programs`: the host's `unshare`, `prlimit` and `bwrap` by name.

    `kind="replay"` (set-up and history, as root) keeps Docker's default capabilities and has no
    tmpfs at the run state; a candidate's sandbox keeps a root agent's (`ROOT_CANDIDATE_CAPABILITIES`)
    where the task's user is root, else only the runner's three (as Docker's pool containers:
    `_containers.create`). `devices`: the sandbox's own nodes (`make_device_nodes`), bound over the
    host's that bubblewrap's `--dev` binds.
    """
    args = [programs["bwrap"], "--bind", str(merged), "/", "--ro-bind", "/sys", "/sys", *_covers(HOST_SYSFS_PATHS)]
    # the host's cgroup tree hidden, the sandbox's own folders where the runner reads its counts
    args += ["--perms", "0555", "--tmpfs", "/sys/fs/cgroup"]
    for host, inside in cgroup_binds:
        args += ["--ro-bind", str(host), inside]
    args += ["--remount-ro", "/sys/fs/cgroup", "--proc", "/proc", *_covers(MASKED_PATHS)]
    for path, _ in existing(READONLY_PATHS):
        args += ["--ro-bind", path, path]  # bubblewrap reads a source in the host's /proc: the same kernel's
    args += ["--dev", "/dev"]
    for inside, node in devices.items():
        args += ["--dev-bind", str(node), inside]
    args += ["--perms", "1777", "--size", str(8 << 20), "--tmpfs", "/dev/shm", "--mqueue", "/dev/mqueue"]
    if kind != "replay":
        args += ["--perms", "1777", "--size", str(1 << 20), "--tmpfs", RUN_STATE]
    for inside, host in etc.items():
        args += ["--bind", str(host), inside]
    args += ["--ro-bind", str(runner), rn.MOUNT_POINT]
    args += ["--unshare-pid", "--as-pid-1", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    args += ["--hostname", HOSTNAME, "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if kind == "replay":
        caps = rn.DOCKER_DEFAULT_CAPABILITIES
    else:
        caps = rn.ROOT_CANDIDATE_CAPABILITIES if runs_as_root else rn.CAPABILITIES
    for cap in caps:
        args += ["--cap-add", f"CAP_{cap}"]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    args += ["--chdir", "/", "--clearenv"]
    for key, value in env.items():
        args += ["--setenv", key, value]
    args += ["--", rn.MOUNT_POINT]
    lower = ":".join(str(p) for p in lowers)
    command = [programs["unshare"], "--mount", "--propagation", "private", "--", "/bin/sh", "-c", LAUNCH, "launch"]
    command += [str(len(cgroups)), *(str(c) for c in cgroups), lower, str(upper), str(work), str(merged)]
    return [*command, programs["prlimit"], f"--fsize={file_size}:{file_size}", "--", *args]


def _covers(paths: tuple[str, ...]) -> list[str]:
    """The bwrap arguments that hide these paths: a folder under an empty read-only tmpfs, a file under /dev/null."""
    args: list[str] = []
    for path, is_folder in existing(paths):
        if is_folder:
            args += ["--perms", "0555", "--tmpfs", path, "--remount-ro", path]
        else:
            args += ["--ro-bind", "/dev/null", path]
    return args
