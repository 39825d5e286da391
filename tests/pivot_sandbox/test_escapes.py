"""The escape suite: root in the sandbox is never root on the host, on every backend (issue 38).

Every item of Docker's default hardening (`pivot_sandbox.contract.hardening`: runc's masked and read-only
paths, its own device nodes, the seccomp profile's refusals to a container without `CAP_SYS_PTRACE`
and `CAP_SYS_ADMIN`) is tried by a root candidate on each backend this machine can run; the namespace
backend is the default nowhere until this suite passes on it. Each test states what a root candidate
did to the host before the fix.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from pivot_core import cache_dir
from pivot_sandbox import SandboxSpec, usable_backends
from pivot_sandbox.contract.hardening import DEVICE_NODES, MASKED_PATHS, READONLY_PATHS, existing

pytestmark = [pytest.mark.docker, pytest.mark.slow]

BACKENDS = [name for name, why in usable_backends().items() if why is None]
BUSYBOX = "pivot-gym/busybox:1"
PYTHON_ROOT = "pivot-gym/root:trixie"  # a Debian root with python3 (CI builds it for the task images)
ROOT = "root"


@pytest.fixture(params=BACKENDS)
def backend(request, busybox):
    from verifiers_plugins import sandbox_backend  # the registry's backend, checked against the contract

    return sandbox_backend(request.param, action_timeout=8.0)


@pytest.fixture(scope="module")
def python_image(docker_client) -> str:
    from pivot_sandbox.images.stock import build_root_image

    return build_root_image(docker_client, PYTHON_ROOT)


def run_as_root(backend, image: str, *actions: str):
    effects = backend.run_group(SandboxSpec(image=image, user=ROOT), [], [[a] for a in actions])
    for action, effect in zip(actions, effects, strict=True):
        assert not isinstance(effect, Exception), (action, effect)
    return effects


def sysctls() -> list[str]:
    """Kernel settings a root candidate wrote on the host before (D1), and siblings of theirs."""
    names = [
        "/proc/sys/kernel/printk_ratelimit_burst",
        "/proc/sys/kernel/core_pattern",
        "/proc/sys/vm/overcommit_ratio",
    ]
    names += ["/proc/sys/kernel/modprobe", "/proc/sys/fs/protected_symlinks", "/proc/sys/net/ipv4/ip_forward"]
    return [n for n in names if Path(n).exists()]


def test_host_kernel_settings_are_read_only(backend):
    # D1: bubblewrap skipped its read-only cover of /proc/sys (its access(W_OK) check fails even for
    # root), and a root candidate's `echo 11 > /proc/sys/kernel/printk_ratelimit_burst` set the host's.
    # Each setting is written with its own current value, so a write that gets through changes nothing.
    names = sysctls()
    before = {n: Path(n).read_text() for n in names}
    writes = [f"v=$(cat {n}); printf '%s\\n' \"$v\" > {n} && echo WROTE {n}" for n in names]
    readonly = [p for p, _ in existing(READONLY_PATHS) if p != "/proc/sys"]
    writes += [
        f"touch {p}/pivot-probe 2>/dev/null && echo WROTE {p}" for p, folder in existing(READONLY_PATHS) if folder
    ]
    effects = run_as_root(backend, BUSYBOX, *writes, "cat /proc/self/mountinfo")
    for action, effect in zip(writes, effects[:-1], strict=True):
        assert "WROTE" not in effect.stdout, (backend.name, action, effect.stdout, effect.stderr)
    assert {n: Path(n).read_text() for n in names} == before
    mounts = effects[-1].stdout
    for path in ["/proc/sys", *readonly]:
        assert any(f" {path} " in line and " ro," in line for line in mounts.splitlines()), (path, mounts)


def test_masked_kernel_files_show_nothing(backend):
    # Docker's MaskedPaths: kernel memory, key names, timers and hardware lists of the host
    present = existing(MASKED_PATHS)
    assert present, "this kernel has none of Docker's masked paths"
    reads = [f"ls -A {p} | wc -l" if folder else f"wc -c < {p}" for p, folder in present]
    for (path, _), effect in zip(present, run_as_root(backend, BUSYBOX, *reads), strict=True):
        assert effect.stdout.strip() in ("0", ""), (backend.name, path, effect.stdout, effect.stderr)


def test_device_nodes_are_the_sandboxs_own(backend):
    # D2: `--dev` bound the host's null, zero, full, random, urandom and tty read-write, and a root
    # candidate's chmod, chown or touch of /dev/null changed the host's
    nodes = [f"/dev/{name}" for name in DEVICE_NODES if Path(f"/dev/{name}").exists()]
    before = {n: os.stat(n) for n in nodes}
    tamper = " ; ".join(f"chmod 600 {n}; chown 1000:1000 {n}; touch -d '2001-01-01' {n}" for n in nodes)
    try:
        tampered, works = run_as_root(
            backend, BUSYBOX, tamper + "; ls -ln /dev/null", "echo x > /dev/null && head -c 4 /dev/zero | wc -c"
        )
        for node in nodes:
            now = os.stat(node)
            assert (now.st_mode, now.st_uid, now.st_gid, now.st_mtime) == (
                before[node].st_mode,
                before[node].st_uid,
                before[node].st_gid,
                before[node].st_mtime,
            ), (backend.name, node)
        assert works.exit_code == 0 and works.stdout.strip() == "4", works
    finally:  # a failing run must not leave the host's /dev/null unusable
        for node, st in before.items():
            os.chmod(node, st.st_mode & 0o7777)
            os.chown(node, st.st_uid, st.st_gid)
            os.utime(node, (st.st_atime, st.st_mtime))


def test_the_sandbox_shows_nothing_of_the_host(backend):
    # O1: no host network device, no host cgroup tree, no folder of the verifying process, no host process
    host_links = sorted(set(os.listdir("/sys/class/net")) - {"lo"})
    token = uuid.uuid4().hex
    net, cgroups, processes, mounts = run_as_root(
        backend,
        BUSYBOX,
        "ls /sys/class/net /sys/devices/virtual/net 2>/dev/null",
        "cat /proc/self/cgroup; ls /sys/fs/cgroup",
        f"ls /proc | grep -c '^[0-9]'; echo {token}",
        "cat /proc/self/mountinfo",
    )
    # the verifying process's folders (named after its pid) never show; the namespace backend shows no
    # host folder of this project at all (Docker's bind of the runner names its cache path)
    assert f"/{os.getpid()}-" not in mounts.stdout, mounts.stdout
    if backend.name == "namespace":
        assert str(cache_dir()) not in mounts.stdout, mounts.stdout
    for link in host_links:
        assert link not in net.stdout.split(), (backend.name, link, net.stdout)
    assert "pivot-ns" not in cgroups.stdout and "docker" not in cgroups.stdout.replace("/docker", ""), cgroups.stdout
    assert int(processes.stdout.split()[0]) < 10


SYSCALL_PROBE = r"""
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
syscall = libc.syscall
syscall.restype = ctypes.c_long
def call(*args):
    r = syscall(*[ctypes.c_long(a) for a in args])
    return "ok" if r >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
pidfd = syscall(ctypes.c_long(434), ctypes.c_long(os.getpid()), ctypes.c_long(0))  # pidfd_open of itself
buf = ctypes.create_string_buffer(8)
kind, key = ctypes.create_string_buffer(b"user"), ctypes.create_string_buffer(b"k")
iov = (ctypes.c_void_p * 2)(ctypes.cast(buf, ctypes.c_void_p), 8)
probes = {
    "ptrace": lambda: call(101, 16, 1, 0, 0),  # PTRACE_ATTACH to pid 1
    "pidfd_getfd": lambda: call(438, pidfd, 0, 0),
    "process_vm_readv": lambda: call(310, os.getpid(), ctypes.addressof(iov), 1, ctypes.addressof(iov), 1, 0),
    "kcmp": lambda: call(312, os.getpid(), os.getpid(), 0, 0, 0),  # KCMP_FILE of fd 0 with itself
    "keyctl": lambda: call(250, 0, -3, 0, 0, 0),  # KEYCTL_GET_KEYRING_ID of the session keyring
    "add_key": lambda: call(248, ctypes.addressof(kind), ctypes.addressof(key), 0, 0, -3),
    "userfaultfd": lambda: call(323, 0),
    "unshare": lambda: call(272, 0x10000000),  # CLONE_NEWUSER
}
for name, probe in probes.items():
    print(name, probe())
"""


def test_the_runners_channel_and_other_processes_cannot_be_reached(backend, python_image):
    # D3: the sandbox's pid 1 (bubblewrap's) held the runner's socket, ran as root and was dumpable, and
    # the filter allowed pidfd_getfd and ptrace: a root candidate took the socket and answered for the
    # runner. Each call Docker's profile refuses without CAP_SYS_PTRACE (or to everyone) is refused here,
    # though each would succeed on this kernel for a process's own self.
    probes, fds = run_as_root(
        backend,
        python_image,
        f"python3 -c '{SYSCALL_PROBE}'",
        "for p in /proc/[0-9]*; do ls $p/fd >/dev/null 2>&1 && [ $p != /proc/$$ ] && echo FD $p; done; "
        "echo forged > /proc/1/fd/1 && echo WROTE; cat /proc/1/environ >/dev/null && echo READ; echo done",
    )
    results = dict(line.split() for line in probes.stdout.splitlines())
    refused = {name: outcome for name, outcome in results.items() if outcome != "EPERM"}
    assert results and not refused, (backend.name, refused, probes.stderr)
    assert "WROTE" not in fds.stdout and "READ" not in fds.stdout, (backend.name, fds.stdout)
    # only the candidate's own processes (and in Docker, its init) expose their descriptors
    assert fds.stdout.strip().endswith("done"), fds
    (after,) = run_as_root(backend, BUSYBOX, "echo still the runner")
    assert after.stdout == "still the runner", after
