"""Plain data of the sandbox: what to start (`SandboxSpec`), its limits, and what an action did (`Effect`).

Nothing here imports docker: the verifier and the effect comparison only need these types.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TypeAlias

from pivot_sandbox.contract.services import ServiceSpec, services_of
from pivot_sandbox.errors import SandboxError

LABEL = "pivot-gym"  # every container and snapshot image the project starts carries this label
# the PATH of a sandbox whose image sets none (Docker's default for a container)
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
OWNER = f"{socket.gethostname()}:{os.getpid()}"  # which process made a labelled object (`pivot sandbox gc`)
DEFAULT_USER = "1000:1000"
# A JSON value, as `json.loads` gives it: what a pivot's context, a verdict's details and a report hold.
Json: TypeAlias = None | bool | int | float | str | list["Json"] | dict[str, "Json"]


@dataclass(frozen=True)
class SandboxSpec:
    """Where a pivot's actions run: `pivot.context["sandbox"]`.

    Attributes:
        image: the base image (built locally: `pivot sandbox build-image`).
        setup: shell commands run as root before the history, in order (task files, packages).
        workdir: the working directory the agent starts in; created and handed to `user`.
        user: the uid:gid actions run as ("root" keeps root; set-up always runs as root).
        shell: the shell that interprets actions (`/bin/sh` works in every image).
        env: extra environment variables.
        replay_access: set-up and history replay get the machine's build-time registry access (host
            network, apt/pip configuration and CA bundle mounted: `images/access.py`), for expert steps such as
            `pip install`; the containers that run candidates keep `--network none` whatever this says.
        start_dir: where the agent's shell starts when its harness starts elsewhere than `workdir`
            (OpenHands' Terminal-Bench runtime starts in /app whatever the image's WORKDIR); "" is
            `workdir`. Set-up and the task's tests still run in `workdir`.
        services: a docker-compose task's other services (`contract/services.py`), started fresh beside
            every container of the spec on a private internal network of their own (the replay's, each
            candidate's, an episode's: `docker/services.py`); the main container is on that network only
            (no registry access for its replay). () for every other spec. Their state is never part of a
            snapshot: a candidate meets each service as the task starts it.
    """

    image: str
    setup: tuple[str, ...] = ()
    workdir: str = "/app"
    user: str = DEFAULT_USER
    shell: str = "/bin/sh"
    env: Mapping[str, str] = field(default_factory=dict)
    replay_access: bool = False
    start_dir: str = ""
    services: tuple[ServiceSpec, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.image, str) or not self.image:
            raise SandboxError(f"sandbox.image: expected a non-empty image name, got {self.image!r}")
        if not str(self.workdir).startswith("/"):
            raise SandboxError(f"sandbox.workdir: expected an absolute path, got {self.workdir!r}")
        if self.start_dir and not str(self.start_dir).startswith("/"):
            raise SandboxError(f"sandbox.start_dir: expected an absolute path, got {self.start_dir!r}")
        object.__setattr__(self, "setup", tuple(str(s) for s in self.setup))
        object.__setattr__(self, "env", {str(k): str(v) for k, v in dict(self.env).items()})
        object.__setattr__(self, "services", services_of(self.services))

    @classmethod
    def from_context(cls, context: Mapping[str, Json]) -> SandboxSpec | None:
        """The spec in `context["sandbox"]`, None when the pivot has none.

        Read by `SandboxContext.from_context` (`contract/marks.py`), which also holds the flags about
        the expert action and the keys no reader knows (`extra`): nothing is dropped unseen there.

        Raises:
            SandboxError: a malformed value; the message names the key.
        """
        from pivot_sandbox.contract.marks import SandboxContext  # marks builds on this module

        found = SandboxContext.from_context(context)
        return None if found is None else found.spec

    @property
    def first_dir(self) -> str:
        """The directory the agent's shell starts in."""
        return self.start_dir or self.workdir

    @property
    def runs_as_root(self) -> bool:
        """True when actions run as root."""
        return self.user in ("root", "0", "0:0")

    def key(self, history: Sequence[str] = ()) -> str:
        """Hash of the spec's fields and the replayed history: the snapshot key (start_dir only when set)."""
        payload = {**asdict(self), "setup": list(self.setup), "env": dict(self.env), "history": list(history)}
        if not self.start_dir:
            del payload["start_dir"]  # the snapshots of specs without one keep their keys
        if self.services:
            payload["services"] = [s.to_json() for s in self.services]
        else:
            del payload["services"]  # likewise
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Limits:
    """Resource limits of every sandbox container.

    Attributes:
        memory: memory limit (also the swap limit), docker syntax.
        pids: maximum number of processes.
        cpus: CPU share.
        file_size: largest file an action may write (RLIMIT_FSIZE), bytes.
        action_timeout: seconds one action (all its commands) may run before it is killed.
        replay_timeout: seconds one set-up or history command may run.
        output_cap: bytes of stdout+stderr an action may print before it is killed.
        compare_chars: characters of each stream kept for comparison.
        hash_cap: files larger than this are compared by size, not content hash.
        max_changed_paths: paths an action may change (its change set is read and hashed after
            it); past it the action is stopped with `killed="change set cap"`.
        change_set_timeout: seconds reading and hashing one action's change set may take; past
            it, likewise `killed="change set cap"`.
    """

    memory: str = "256m"
    pids: int = 64
    cpus: float = 1.0
    file_size: int = 64 * 1024 * 1024
    action_timeout: float = 10.0
    replay_timeout: float = 60.0
    output_cap: int = 1024 * 1024
    compare_chars: int = 16384
    hash_cap: int = 8 * 1024 * 1024
    max_changed_paths: int = 10000
    change_set_timeout: float = 10.0


@dataclass(frozen=True)
class Effect:
    """What one action did in a fresh copy of the pivot state.

    Attributes:
        exit_code: the last command's exit status (None when it was killed before finishing).
        stdout: stdout, capped at `Limits.compare_chars`.
        stderr: stderr, capped likewise.
        files: changed paths -> "sha256:<hex>:<size>", "size:<n>" (over the hash cap), "dir", "other"
            (FIFO, socket) or "unreadable", each followed by " <octal mode> <uid>:<gid>"
            (`chmod +x f` and `touch f` leave the same bytes); "link:<target>"; "deleted".
        cwd: the working directory after the action.
        killed: why the sandbox stopped it ("timeout", "output cap", "oom", "file size cap",
            "pids limit", "change set cap", "runner lost"), else None.
        note: what the sandbox said about the stop (e.g. "more than 10000 changed paths").
        state: the shell state the action left, key -> value (`_shell_state.normalize_state`:
            exported environment, options, traps, aliases, functions, limits, umask, descriptors).
        processes: command lines of the processes the action left running, sorted (they were
            killed before the change set was read).
    """

    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    files: Mapping[str, str] = field(default_factory=dict)
    cwd: str = ""
    killed: str | None = None
    note: str = ""
    state: Mapping[str, str] = field(default_factory=dict)
    processes: tuple[str, ...] = ()

    @property
    def timed_out(self) -> bool:
        """True when the action ran past its timeout."""
        return self.killed == "timeout"

    def to_json(self) -> dict[str, Json]:
        """JSON-ready dict (verdict details)."""
        return {**asdict(self), "files": dict(self.files), "state": dict(self.state), "processes": list(self.processes)}


def labels(kind: str, backend: str = "") -> dict[str, str]:
    """Labels of every container and image this process makes (`pivot sandbox gc` reads them)."""
    return {LABEL: kind, f"{LABEL}.owner": OWNER, f"{LABEL}.backend": backend}
