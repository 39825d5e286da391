"""What the namespace backend stands on: the machine's support, the image's root file system, cgroups, folders.

- `unavailable()`: why this machine cannot run the namespace backend (None when it can). It needs
  root on the host (overlay mounts and the uid switch of the runner need real capabilities: an
  unprivileged user namespace maps one uid, and a task's non-root user needs two), bubblewrap,
  util-linux `unshare` and `prlimit`, overlayfs, and the runner binary (`_runner.build_runner`).
- `rootfs(client, image)`: the image's files, exported once from a created container of the
  image Docker built (`docker export`), cached by image id under `cache_dir("rootfs", id)`, with
  the mount points the sandbox binds over created in it, so that nothing a sandbox mounts writes
  into a candidate's upper folder.
- `Cgroups`: a cgroup per sandbox for the pids, memory and CPU limits (v2 where the machine has a
  writable unified hierarchy, else the v1 controllers), and the folders the runner reads its
  `pids.events` / OOM counts from, bound read-only into the sandbox where Docker shows its own.
- `run_root()` / `gc()`: each backend's folders (snapshots' and candidates' upper folders) live
  under one folder named after its process; a process that is gone (a `kill -9`) leaves its folder
  and empty cgroups behind, which the next backend (or `pivot sandbox gc`) removes. Mounts and
  processes need no sweeping: the overlay lives in the sandbox's own mount namespace, and
  bubblewrap's `--die-with-parent` kills the sandbox with the verifying process.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pivot_core import cache_dir, least_recently_used, remove_entries

if TYPE_CHECKING:  # the client is handed in: exporting an image needs no import of the SDK here
    import docker

TOOLS = ("bwrap", "unshare", "prlimit")
# files and folders the sandbox binds over: they must exist in the lower layer (a mount point
# bubblewrap had to create would land in the candidate's upper folder)
MOUNT_POINTS = {"/.pivot-runner": "file", "/.pivot-run": "dir", "/proc": "dir", "/dev": "dir", "/sys": "dir"}
CGROUP_V1 = ("pids", "memory", "cpu")
_lock = threading.Lock()
_probed: dict[str, str | None] = {}


def unavailable() -> str | None:
    """Why the namespace backend cannot run on this machine, or None when it can (probed once per process)."""
    with _lock:
        if "why" not in _probed:
            _probed["why"] = _probe()
        return _probed["why"]


def _probe() -> str | None:
    if not os.path.exists("/proc/self/ns/mnt"):
        return "not Linux: no namespaces"
    if os.geteuid() != 0:
        return (
            "the namespace backend needs root on the host (overlay mounts, and the runner's switch to the "
            "task's user needs more than the one uid an unprivileged user namespace maps)"
        )
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        return f"missing {', '.join(missing)} (apt-get install bubblewrap util-linux)"
    if "overlay" not in Path("/proc/filesystems").read_text():
        return "the kernel has no overlayfs"
    from pivot_sandbox.replay.runner import build_runner

    runner = build_runner()
    if not isinstance(runner, Path):
        return runner
    try:
        proc = subprocess.run(
            [shutil.which("bwrap") or "bwrap", "--bind", "/", "/", "--unshare-all", "--die-with-parent", "true"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bubblewrap does not run here: {e}"
    if proc.returncode != 0:
        return f"bubblewrap cannot make namespaces here: {proc.stderr.strip()[-200:]}"
    return None


def owner_alive(name: str) -> bool:
    """Whether the process a `<pid>-...` folder or cgroup is named after still runs."""
    pid = name.split("-", 1)[0]
    return pid.isdigit() and os.path.exists(f"/proc/{pid}")


def run_root() -> Path:
    """Where backends keep their per-process folders (upper folders must be on a non-overlay file system)."""
    return cache_dir("ns-sandbox")


def remove_tree(path: Path | str) -> None:
    """Remove a folder however deep, ignoring what is already gone.

    A candidate may leave a folder thousands of levels deep (`mkdir d && cd d` in a loop), which
    `shutil.rmtree` cannot remove (it recurses once per level: RecursionError); GNU `rm` can.
    """
    try:
        shutil.rmtree(path, ignore_errors=True)
    except RecursionError:
        subprocess.run(["rm", "-rf", "--one-file-system", "--", str(path)], capture_output=True, check=False)


def gc(everything: bool = False) -> dict[str, int]:
    """Remove the folders and cgroups of backends whose process is gone (all of them with `everything`)."""
    removed = {"folders": 0, "cgroups": 0}
    root = run_root()
    for entry in root.iterdir() if root.exists() else ():
        if everything or not owner_alive(entry.name):
            remove_tree(entry)
            removed["folders"] += 1
    for parent in Cgroups.parents():
        for entry in parent.iterdir() if parent.exists() else ():
            if entry.is_dir() and (everything or not owner_alive(entry.name)):
                try:
                    entry.rmdir()
                    removed["cgroups"] += 1
                except OSError:
                    pass  # a process of a live sandbox still in it
    return removed


ROOTFS_IDLE_SECONDS = 3600.0
# exports kept past those of gone images: each is a whole file system (0.2-1.5 GB for the SWE and task images),
# and a bench judging candidates on dozens of images filled a 100 GB disk in an hour
ROOTFS_KEEP = 24
ROOTFS_IN_USE_SECONDS = 600.0


def sweep_rootfs(client: docker.DockerClient, idle: float = ROOTFS_IDLE_SECONDS, keep: int = ROOTFS_KEEP) -> int:
    """Remove exports nothing will ask for, then the least recently used past `keep`; how many went.

    An export is named by its image's id, so once the image is gone (a snapshot evicted, a task image
    rebuilt) nothing can ask for it again: removed once unused for `idle` seconds. Past `keep` exports
    the least recently used go too (one is exported again when asked for). One used within
    `ROOTFS_IN_USE_SECONDS` may still be a live sandbox's lower layer and always stays.
    """
    folder = cache_dir("rootfs")
    if not folder.is_dir():
        return 0
    try:
        known = {i["Id"].split(":")[-1][:32] for i in client.api.images(all=True)}
    except Exception:  # noqa: BLE001 - an engine that does not answer: keep everything
        return 0
    folders = [e for e in folder.iterdir() if e.is_dir()]
    gone = least_recently_used([e for e in folders if e.name not in known], 0, idle)  # unused for `idle`
    over = least_recently_used([e for e in folders if e not in gone], keep, ROOTFS_IN_USE_SECONDS)
    return remove_entries([*gone, *over])


def rootfs(client: docker.DockerClient, image: str) -> tuple[Path, dict[str, str]]:
    """The image's root file system (exported once, cached by image id) and its environment (`Config.Env`)."""
    info = client.api.inspect_image(image)
    env = dict(e.split("=", 1) for e in info["Config"].get("Env") or [] if "=" in e)
    target = cache_dir("rootfs", info["Id"].split(":")[-1][:32])
    with _lock:
        done = target / "root"
        if done.exists():
            os.utime(target)  # in use: kept by the sweep
            return done, env
        sweep_rootfs(client)
        partial = target / f"partial-{os.getpid()}"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        container = client.api.create_container(image, ["true"])["Id"]
        try:
            tar = subprocess.Popen(
                ["tar", "-x", "--numeric-owner", "--xattrs", "--xattrs-include=*", "-C", str(partial)],
                stdin=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            assert tar.stdin is not None
            for chunk in client.api.export(container):
                tar.stdin.write(chunk)
            tar.stdin.close()
            if tar.wait() != 0:
                raise OSError(f"exporting {image} failed: {tar.stderr.read().decode(errors='replace')[-300:]}")
        finally:
            client.api.remove_container(container, force=True)
        for path, kind in MOUNT_POINTS.items():
            where = partial / path.lstrip("/")
            if kind == "dir":
                where.mkdir(parents=True, exist_ok=True)
            elif not where.exists():
                where.touch()
        try:
            partial.rename(done)
        except OSError:  # another process exported the same image meanwhile: same bytes, keep theirs
            shutil.rmtree(partial, ignore_errors=True)
        return done, env


@dataclass(frozen=True)
class Cgroups:
    """One sandbox's cgroups: the folders to join, and where the sandbox should see them."""

    joined: tuple[Path, ...]  # cgroup folders the sandbox's first process joins
    binds: tuple[tuple[Path, str], ...]  # (host folder, path in the sandbox) bound read-only

    @staticmethod
    def version() -> str:
        """What this machine gives a root process to limit a sandbox with: "v2", "v1" or "none"."""
        if (Path("/sys/fs/cgroup/cgroup.controllers")).exists() and os.access("/sys/fs/cgroup", os.W_OK):
            return "v2"
        if all(os.access(f"/sys/fs/cgroup/{c}", os.W_OK) for c in CGROUP_V1):
            return "v1"
        return "none"

    @staticmethod
    def parents() -> list[Path]:
        """Where sandboxes' cgroups go.

        v1: under this process's own cgroup of each controller (its limits and accounting cover
        them too); v2: at the top (a v2 cgroup that holds processes cannot hand controllers to
        children), as Docker's are.
        """
        version = Cgroups.version()
        if version == "v2":
            return [Path("/sys/fs/cgroup/pivot-ns")]
        if version == "v1":
            return [Path(f"/sys/fs/cgroup/{c}{_own_cgroup(c)}/pivot-ns") for c in CGROUP_V1]
        return []

    @classmethod
    def make(cls, name: str, memory: int, pids: int, cpus: float) -> Cgroups:
        """Cgroups named `name` with these limits; empty when the machine gives none (rlimits then hold alone)."""
        version = cls.version()
        if version == "v2":
            folder = Path("/sys/fs/cgroup/pivot-ns") / name
            folder.mkdir(parents=True, exist_ok=True)
            controllers = (folder.parent / "cgroup.subtree_control").read_text()
            if "pids" not in controllers or "memory" not in controllers:
                (folder.parent / "cgroup.subtree_control").write_text("+pids +memory +cpu")
            (folder / "pids.max").write_text(str(pids))
            (folder / "memory.max").write_text(str(memory))
            (folder / "memory.swap.max").write_text("0")
            (folder / "cpu.max").write_text(f"{int(cpus * 100000)} 100000")
            return cls((folder,), ((folder, "/sys/fs/cgroup"),))
        if version == "v1":
            folders = {}
            for controller, parent in zip(CGROUP_V1, cls.parents(), strict=True):
                folder = parent / name
                folder.mkdir(parents=True, exist_ok=True)
                folders[controller] = folder
            (folders["pids"] / "pids.max").write_text(str(pids))
            (folders["memory"] / "memory.limit_in_bytes").write_text(str(memory))
            swap = folders["memory"] / "memory.memsw.limit_in_bytes"
            if swap.exists():
                swap.write_text(str(memory))
            (folders["cpu"] / "cpu.cfs_period_us").write_text("100000")
            (folders["cpu"] / "cpu.cfs_quota_us").write_text(str(int(cpus * 100000)))
            binds = ((folders["pids"], "/sys/fs/cgroup/pids"), (folders["memory"], "/sys/fs/cgroup/memory"))
            return cls(tuple(folders.values()), binds)
        return cls((), ())

    def remove(self) -> None:
        """Remove the cgroups (their processes are gone: the kernel may take a moment to say so)."""
        for folder in self.joined:
            for _ in range(50):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    threading.Event().wait(0.02)


def _own_cgroup(controller: str) -> str:
    """This process's cgroup path in a v1 controller's hierarchy ("" at the top)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return "" if path == "/" else path
    return ""


def memory_bytes(text: str) -> int:
    """Docker's memory syntax ("256m") in bytes."""
    units = {"b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
    text = text.strip().lower()
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)
