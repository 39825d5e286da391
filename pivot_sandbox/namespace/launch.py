"""The command line that starts one namespace sandbox (`namespace/backend.py`): unshare, the overlay, prlimit, bwrap.

`unshare --mount` gives the sandbox a private mount namespace; in it `LAUNCH` joins the sandbox's
cgroups, mounts the overlay (the snapshot and the root file system below a fresh upper folder),
then execs `prlimit --fsize` and `bwrap`, which starts the runner in new pid, network (loopback
only), IPC and UTS namespaces with every capability dropped but the ones the runner needs, under
Docker's default covers (`contract/hardening.py`): masked and read-only `/proc` and `/sys` paths, device
nodes of the sandbox's own, the seccomp filter, and the runner as pid 1 (bubblewrap's own pid 1
would be a dumpable process holding the runner's channel, which a root candidate could trace).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from pivot_sandbox.contract.hardening import (
    DEVICE_NODES,
    ETC_FILES,
    HOST_SYSFS_PATHS,
    HOSTNAME,
    MASKED_PATHS,
    READONLY_PATHS,
    existing,
)
from pivot_sandbox.replay import runner as rn
from pivot_sandbox.replay.box import RUN_STATE

# Joins the cgroups given first; mounts a small tmpfs at the private folder holding what the sandbox binds
# from the host (the runner, Docker's /etc files, the device nodes: made here, by the host's root) and
# links to the overlay's folders; mounts the overlay from inside it by those links; then execs the rest
# (prlimit, bwrap, the runner). A bind mount shows its source's path within its file system in
# /proc/self/mountinfo, and an overlay the option strings it was given: from the tmpfs and by short
# relative names, the sandbox sees neither the host's cache folders nor the verifying process's pid.
LAUNCH = (
    r"""set -e
n=$1; shift
while [ "$n" -gt 0 ]; do echo $$ > "$1/cgroup.procs"; shift; n=$((n - 1)); done
private=$1; runner=$2; etc=$3; lower=$4; upper=$5; work=$6; merged=$7
shift 7
mount -t tmpfs -o size=4m,mode=0755 pivot-sandbox "$private"
cp "$runner" "$private/runner"
cp "$etc"/* "$private/"
"""
    + "".join(f'mknod -m 666 "$private/{name}" c {major} {minor}\n' for name, (major, minor) in DEVICE_NODES.items())
    + r"""cd "$private"
names=; i=0; IFS=:
for l in $lower; do ln -s "$l" "l$i"; names="$names${names:+:}l$i"; i=$((i + 1)); done
unset IFS
ln -s "$upper" u; ln -s "$work" w
mount -t overlay overlay -o "lowerdir=$names,upperdir=u,workdir=w" "$merged"
cd /
exec "$@"
"""
)


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
    private: Path,
    etc: Path,
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
    `_containers.create`). `private`: an empty folder the launch mounts its tmpfs on (`LAUNCH`);
    `etc`: a folder with `ETC_FILES` (`_hardening.etc_files`), copied there.
    """
    args = [programs["bwrap"], *_file_system(merged, cgroup_binds, private, kind)]
    args += _isolation(kind, runs_as_root, seccomp_fd, env)
    lower = ":".join(str(p) for p in lowers)
    command = [programs["unshare"], "--mount", "--propagation", "private", "--", "/bin/sh", "-c", LAUNCH, "launch"]
    command += [str(len(cgroups)), *(str(c) for c in cgroups)]
    command += [str(private), str(runner), str(etc), lower, str(upper), str(work), str(merged)]
    return [*command, programs["prlimit"], f"--fsize={file_size}:{file_size}", "--", *args]


def _file_system(merged: Path, cgroup_binds: Sequence[tuple[Path, str]], private: Path, kind: str) -> list[str]:
    """The bwrap mounts: the overlay as /, Docker's covers on /sys and /proc, the sandbox's own /dev and /etc."""
    null = str(private / "null")
    args = ["--bind", str(merged), "/", "--ro-bind", "/sys", "/sys", *_covers(HOST_SYSFS_PATHS, null)]
    # the host's cgroup tree hidden, the sandbox's own folders where the runner reads its counts
    args += ["--perms", "0555", "--tmpfs", "/sys/fs/cgroup"]
    for host, inside in cgroup_binds:
        args += ["--ro-bind", str(host), inside]
    args += ["--remount-ro", "/sys/fs/cgroup", "--proc", "/proc", *_covers(MASKED_PATHS, null)]
    for path, _ in existing(READONLY_PATHS):
        args += ["--ro-bind", path, path]  # bubblewrap reads a source in the host's /proc: the same kernel's
    # bubblewrap's /dev binds the host's nodes (read-write: a root candidate's chmod changed the host's);
    # the sandbox's own, made by `LAUNCH`, are bound over them
    args += ["--dev", "/dev"]
    for name in DEVICE_NODES:
        args += ["--dev-bind", str(private / name), f"/dev/{name}"]
    args += ["--perms", "1777", "--size", str(8 << 20), "--tmpfs", "/dev/shm", "--mqueue", "/dev/mqueue"]
    if kind != "replay":
        args += ["--perms", "1777", "--size", str(1 << 20), "--tmpfs", RUN_STATE]
    # writable only where set-up and history run (a candidate's write there was no effect: issue 38, D7)
    etc_bind = "--bind" if kind == "replay" else "--ro-bind"
    for name in ETC_FILES:
        args += [etc_bind, str(private / name), f"/etc/{name}"]
    return [*args, "--ro-bind", str(private / "runner"), rn.MOUNT_POINT]


def _isolation(kind: str, runs_as_root: bool, seccomp_fd: int | None, env: Mapping[str, str]) -> list[str]:
    """The bwrap namespaces, capabilities, seccomp filter and environment, then the runner as the command."""
    args = ["--unshare-pid", "--as-pid-1", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
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
    return [*args, "--", rn.MOUNT_POINT]


def _covers(paths: tuple[str, ...], null: str) -> list[str]:
    """The bwrap arguments that hide these paths: a folder under an empty read-only tmpfs, a file under `null`."""
    args: list[str] = []
    for path, is_folder in existing(paths):
        if is_folder:
            args += ["--perms", "0555", "--tmpfs", path, "--remount-ro", path]
        else:
            args += ["--ro-bind", null, path]
    return args
