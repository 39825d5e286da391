"""Errors raised by the sandbox: engines, images, Dockerfile builds, Terminal-Bench task folders."""

from __future__ import annotations

from collections.abc import Sequence

from pivot_core.errors import PivotGymError


class SandboxError(PivotGymError):
    """Raised by a sandbox backend when a container cannot be prepared (bad image, set-up failed)."""


class SandboxUnavailable(SandboxError):
    """Raised by a sandbox backend whose engine cannot be reached (no Docker daemon)."""


class RunnerLost(SandboxError):
    """The runner stopped answering (killed, out of memory, or its container stopped)."""

    def __init__(self, message: str, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


class DockerfileError(SandboxError):
    """A Dockerfile this builder cannot read or run; the message names the file and line."""


class TaskError(SandboxError):
    """A task that cannot be built or tested here; the message is the one precise reason."""


class ComposeError(TaskError):
    """A task's docker-compose file that cannot run here; the message names the key."""


class ProcessesNotRestored(SandboxError):
    """A state whose processes (a server, a tmux session) no sandbox on its snapshot can run again.

    A snapshot keeps files, not processes; the backends start the history's own commands again
    (`_restore.restart`). Where that cannot bring them back, a candidate would be judged on a state
    the agent never saw (`curl localhost:3000` against no server), so the state is refused: the
    message names the processes and why.
    """

    def __init__(self, running: tuple[str, ...], why: str) -> None:
        shown = ", ".join(repr(p[:60]) for p in running[:3]) + (f" (+{len(running) - 3})" if len(running) > 3 else "")
        super().__init__(f"the state runs {len(running)} process(es) ({shown}) that cannot be restored: {why}")
        self.running, self.why = running, why


class StateRefused(SandboxError):
    """A Docker-built state the namespace backend cannot take over exactly (`_nslayer.import_layer` says why)."""


class BackendContractError(SandboxError):
    """A backend breaks the `SandboxBackend` contract; `problems` lists each way it does."""

    def __init__(self, backend: object, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        name = getattr(backend, "name", type(backend).__name__)
        super().__init__(f"sandbox backend {name!r} breaks the contract: " + "; ".join(self.problems))
