"""Docker's default hardening, for the namespace sandbox: what a root candidate may not reach.

A candidate that runs as root in a namespace sandbox is uid 0 of the host's user namespace, so every
cover Docker (runc, the OCI runtime spec's defaults) puts between a container's root and the host must
be put here too; bubblewrap alone leaves `/proc/sys` writable where `access(W_OK)` fails on it, binds
the host's own device nodes, and keeps a dumpable pid 1 that holds the runner's channel. The lists
below are Docker's (moby `oci/defaults.go` and `profiles/seccomp/default.json`, Docker 25+), not a
list of probes; `tests/pivot_sandbox/test_escapes.py` checks each item on every backend.

- `MASKED_PATHS` / `READONLY_PATHS`: Docker's `MaskedPaths` (a file covered by `/dev/null`, a folder
  by an empty read-only tmpfs) and `ReadonlyPaths` (bound read-only over themselves). Paths this
  kernel does not have are skipped, as runc skips them.
- `DEVICE_NODES`: the nodes a container's `/dev` has (runc's default devices). The namespace backend
  makes them per sandbox (`_nslaunch.LAUNCH`), as runc does, instead of binding the host's: a root
  candidate's `chmod`/`chown`/`touch` of `/dev/null` then changes its own sandbox only.
- `ETC_FILES`: Docker's `/etc/hosts`, `/etc/hostname`, `/etc/resolv.conf` for a sandbox with no network:
  per sandbox for the namespace backend (`etc_files`), one read-only copy shared by Docker's candidate
  containers (`shared_etc_files`), whose own were shared with every container lent the same network
  namespace.
- `seccomp_program()`: the system calls Docker's default profile refuses to a container with Docker's
  default capabilities (none of `CAP_SYS_ADMIN`, `CAP_SYS_PTRACE`, `CAP_SYS_MODULE`, `CAP_SYS_TIME`,
  ... which no sandbox here has), as a classic BPF filter for bubblewrap's `--seccomp`.
"""

from __future__ import annotations

import os
import platform
import stat
import struct
import threading
from pathlib import Path

from pivot_core import cache_dir

MASKED_PATHS = (
    "/proc/asound",
    "/proc/acpi",
    "/proc/interrupts",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
)
READONLY_PATHS = ("/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger")
# Not Docker's list, for the same reason as its fresh sysfs: `/sys` here is the host's, bound read-only
# (bubblewrap cannot mount a sysfs of the sandbox's network namespace), so the host's network devices
# are covered (and `/sys/fs/cgroup`, the host's cgroup tree, under the sandbox's own folders: `namespace/launch.py`).
HOST_SYSFS_PATHS = ("/sys/class/net", "/sys/devices/virtual/net")
# name -> (major, minor): runc's default devices, mode 0666 root:root
DEVICE_NODES = {"null": (1, 3), "zero": (1, 5), "full": (1, 7), "random": (1, 8), "urandom": (1, 9), "tty": (5, 0)}


def existing(paths: tuple[str, ...]) -> list[tuple[str, bool]]:
    """(path, is a folder) of the paths this kernel has (read from the host's `/proc` and `/sys`)."""
    out = []
    for path in paths:
        try:
            out.append((path, stat.S_ISDIR(os.stat(path).st_mode)))
        except OSError:
            continue
    return out


# shaped like Docker's default host name, a container id's first 12 hex digits, which Terminal-Bench's containers
# had: what a run printed of it (`git commit` with no identity: `root@<id>.(none)`, a shell prompt) compares
# equal, 12 hex digits being any container's name to the replay check (`pivot_tasks._replay_check._CLOCK`)
HOSTNAME = "0123456789ab"
ETC_FILES = {
    "hosts": (
        "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\n"
        "ff00::0\tip6-mcastprefix\nff02::1\tip6-allnodes\nff02::2\tip6-allrouters\n"
    ),
    "hostname": HOSTNAME + "\n",
    "resolv.conf": "",
}


def etc_files(folder: Path) -> dict[str, Path]:
    """The files Docker binds into `/etc`, written into `folder` (the namespace backend copies them per sandbox)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, text in ETC_FILES.items():
        (folder / name).write_text(text)
        out[f"/etc/{name}"] = folder / name
    return out


_SHARED_ETC: dict[str, Path] = {}
_SHARED_ETC_LOCK = threading.Lock()


def shared_etc_files() -> dict[str, Path]:
    """`/etc/<name>` -> a host file with Docker's content for it, bound read-only into every candidate container.

    Written once per process, by rename (a container starting meanwhile binds a whole file, old or new).
    """
    with _SHARED_ETC_LOCK:
        if not _SHARED_ETC:
            folder = cache_dir("sandbox-etc")
            folder.mkdir(parents=True, exist_ok=True)
            for name, text in ETC_FILES.items():
                path = folder / name
                if not path.is_file() or path.read_text() != text:
                    partial = folder / f".{name}.{os.getpid()}"
                    partial.write_text(text)
                    partial.chmod(0o644)
                    os.replace(partial, path)
                _SHARED_ETC[f"/etc/{name}"] = path
        return dict(_SHARED_ETC)


# Docker's default seccomp profile, x86_64: name -> number of each system call it refuses to a container
# that has none of the capabilities named (`includes.caps` in default.json), or refuses to every
# container (not in its allow list). Refused with EPERM, as there.
_SYSCALLS_X86_64 = {
    # CAP_SYS_ADMIN (and CAP_BPF, CAP_PERFMON, CAP_SYSLOG): namespaces, mounts, handles, quotas, names
    "bpf": 321,
    "fanotify_init": 300,
    "fsconfig": 431,
    "fsmount": 432,
    "fsopen": 430,
    "fspick": 433,
    "lookup_dcookie": 212,
    "mount": 165,
    "mount_setattr": 442,
    "move_mount": 429,
    "name_to_handle_at": 303,
    "open_tree": 428,
    "perf_event_open": 298,
    "quotactl": 179,
    "quotactl_fd": 443,
    "setdomainname": 171,
    "sethostname": 170,
    "setns": 308,
    "syslog": 103,
    "umount2": 166,
    "unshare": 272,
    # CAP_SYS_PTRACE: another process's memory, descriptors and execution (the runner's channel)
    "kcmp": 312,
    "pidfd_getfd": 438,
    "process_madvise": 440,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "ptrace": 101,
    # CAP_SYS_BOOT, CAP_SYS_MODULE, CAP_SYS_PACCT, CAP_SYS_RAWIO, CAP_SYS_TIME, CAP_SYS_TTY_CONFIG
    "reboot": 169,
    "delete_module": 176,
    "init_module": 175,
    "finit_module": 313,
    "acct": 163,
    "iopl": 172,
    "ioperm": 173,
    "settimeofday": 164,
    "clock_settime": 227,
    "clock_adjtime": 305,
    "vhangup": 153,
    # CAP_SYS_NICE: memory policy of other processes' nodes
    "get_mempolicy": 239,
    "mbind": 237,
    "set_mempolicy": 238,
    "set_mempolicy_home_node": 450,
    # CAP_DAC_READ_SEARCH
    "open_by_handle_at": 304,
    # in no allow list: keyrings (not namespaced), kexec, swap, pivot_root, userfaultfd, io_uring, obsolete calls
    "add_key": 248,
    "keyctl": 250,
    "request_key": 249,
    "kexec_load": 246,
    "kexec_file_load": 320,
    "swapon": 167,
    "swapoff": 168,
    "pivot_root": 155,
    "userfaultfd": 323,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "nfsservctl": 180,
    "uselib": 134,
    "ustat": 136,
    "sysfs": 139,
    "_sysctl": 156,
    "create_module": 174,
    "get_kernel_syms": 177,
    "query_module": 178,
}
REFUSED_SYSCALLS = tuple(sorted(_SYSCALLS_X86_64))
_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_BIT = 0x40000000  # the x32 ABI's calls: refused whole, as Docker's profile lists none of them
_CLONE, _CLONE3 = 56, 435
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET: clone's CAP_SYS_ADMIN rule
_CLONE_NAMESPACES = 0x7E020000


def seccomp_program() -> bytes | None:
    """The classic BPF filter bubblewrap loads (`--seccomp FD`); None off x86_64 (no filter: said by `info`).

    clone3 answers ENOSYS, as in Docker's profile, so that libc falls back to clone, whose flags a
    classic filter can read (clone3 passes them in memory).
    """
    if platform.machine() != "x86_64":
        return None
    allow, eperm, enosys = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38

    def op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
        return struct.pack("HBBI", code, jt, jf, k)

    load, jeq, jset, jge, ret = 0x20, 0x15, 0x45, 0x35, 0x06
    arch_at, nr_at, first_arg_at = 4, 0, 16  # offsets in struct seccomp_data
    prog = [op(load, arch_at), op(jeq, _AUDIT_ARCH_X86_64, 1, 0), op(ret, eperm)]
    prog += [op(load, nr_at), op(jge, _X32_BIT, 0, 1), op(ret, eperm)]
    for number in sorted(_SYSCALLS_X86_64.values()):
        prog += [op(jeq, number, 0, 1), op(ret, eperm)]
    prog += [op(jeq, _CLONE3, 0, 1), op(ret, enosys)]
    prog += [op(jeq, _CLONE, 0, 3), op(load, first_arg_at), op(jset, _CLONE_NAMESPACES, 0, 1), op(ret, eperm)]
    prog += [op(ret, allow)]
    return b"".join(prog)
