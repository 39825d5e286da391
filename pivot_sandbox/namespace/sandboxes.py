"""The namespace backend's sandboxes: started under the backend's folder, and removed.

The backend's folder (`nr.run_root()/<token>`) holds Docker's /etc files, written once (each
sandbox's launch copies them into its own tmpfs), the seccomp filter, the snapshots' upper folders
and one folder per sandbox. A sandbox is one process tree started by `launch_command`, in cgroups of
its own, its runner answering on one end of a socket pair.
"""

from __future__ import annotations

import itertools
import os
import shutil
from pathlib import Path

from pivot_sandbox.contract.hardening import HOSTNAME, etc_files, seccomp_program
from pivot_sandbox.contract.spec import DEFAULT_PATH, Limits, SandboxSpec
from pivot_sandbox.namespace import root as nr
from pivot_sandbox.namespace.box import Channel, Root, Sandbox, spawn
from pivot_sandbox.namespace.launch import launch_command
from pivot_sandbox.replay import box as ct
from pivot_sandbox.replay import runner as rn
from pivot_sandbox.replay.diff import Layers, root_state
from pivot_sandbox.replay.janitor import Stats


class Launcher:
    """Starts one backend's sandboxes and removes them.

    Args:
        limits: every sandbox's limits.
        token: the backend's name for its folder and cgroups.
        stats: the backend's counters (`sandboxes_started`).

    Attributes:
        folder: the backend's folder, made here (after removing what killed processes left: `nr.gc`).
        programs: the host's `bwrap`, `unshare` and `prlimit`, by name.
    """

    def __init__(self, limits: Limits, token: str, stats: Stats) -> None:
        self.limits, self.token, self.stats = limits, token, stats
        runner = rn.build_runner()
        assert isinstance(runner, Path)  # `nr.unavailable()` checked it
        self.runner = runner
        self.programs = {name: shutil.which(name) or name for name in ("bwrap", "unshare", "prlimit")}
        program = seccomp_program()
        nr.gc()  # what killed processes left: folders and empty cgroups
        self.folder = nr.run_root() / token
        self.folder.mkdir(parents=True)
        # Docker's /etc files, written once: each sandbox's launch copies them into its own tmpfs
        self.etc = self.folder / "etc"
        etc_files(self.etc)
        self.seccomp: Path | None = None
        if program is not None:
            self.seccomp = self.folder / "seccomp.bpf"
            self.seccomp.write_bytes(program)
        self._serial = itertools.count()

    def path(self, name: str) -> Path:
        """A new path in the backend's folder, `<name>-<n>` (n counts every sandbox and folder made)."""
        return self.folder / f"{name}-{next(self._serial)}"

    def launch(self, spec: SandboxSpec, root: Root, lowers: tuple[Path, ...], upper: Path, kind: str) -> ct.Box:
        """A started sandbox on `upper` over `lowers`, its runner waiting for commands."""
        n = next(self._serial)
        box_dir = self.folder / f"box-{n}"
        work, merged, private = box_dir / "work", box_dir / "merged", box_dir / "private"
        for folder in (upper, work, merged, private):
            folder.mkdir(parents=True, exist_ok=True)
        mem = nr.memory_bytes(self.limits.memory)
        cgroups = nr.Cgroups.make(f"{self.token}-{n}", mem, self.limits.pids, self.limits.cpus)
        env = {"PATH": DEFAULT_PATH, "HOSTNAME": HOSTNAME, **root.env, "HOME": spec.workdir, **spec.env}
        seccomp = os.open(self.seccomp, os.O_RDONLY) if self.seccomp else None
        command = launch_command(
            self.programs,
            runner=self.runner,
            lowers=lowers,
            upper=upper,
            work=work,
            merged=merged,
            cgroups=cgroups.joined,
            cgroup_binds=cgroups.binds,
            private=private,
            etc=self.etc,
            env=env,
            kind=kind,
            runs_as_root=spec.runs_as_root,
            seccomp_fd=seccomp,
            file_size=self.limits.file_size,
        )
        errors = box_dir / "stderr"
        try:
            proc, mine = spawn(command, errors, seccomp)
        except BaseException:
            cgroups.remove()
            raise
        self.stats.add("sandboxes_started")
        layers = Layers(str(upper), tuple(str(p) for p in lowers))
        return ct.Box(Sandbox(str(n), proc, cgroups, box_dir), Channel(mine, errors), None, layers, root_state(layers))

    def discard(self, box: ct.Box, keep_upper: bool = False) -> None:
        """Kill the sandbox and remove its folders (the snapshot's upper folder stays when it is one)."""
        sandbox = box.sandbox
        if not isinstance(sandbox, Sandbox):  # a box of this backend's own making: never
            raise TypeError(f"not a namespace sandbox: {sandbox!r}")
        if box.channel is not None:
            box.channel.close()
        sandbox.kill()
        sandbox.cgroups.remove()
        nr.remove_tree(sandbox.folder)
        if not keep_upper and box.layers is not None:
            nr.remove_tree(box.layers.upper)


__all__ = ["Launcher"]
