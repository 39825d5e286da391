"""`SandboxBackend`: what every sandbox backend does, the built-in ones and any a plugin registers.

A backend runs shell actions at restored pivot states and reports their effects. The verifier
(`docker_shell`), the episode envs, the replay check and the oracle synthesis reach a backend only
through this protocol; `check_backend` (`contract/check.py`) validates one the way Gymnasium's
`check_env` validates an env. A backend registers a factory through the `register_sandboxes` hook:
`factory(**config)` returns an object of this protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from pivot_sandbox.contract.spec import Effect, Limits, SandboxSpec
from pivot_sandbox.errors import SandboxError

if TYPE_CHECKING:  # a type only: the contract imports no container engine
    import docker


class Step(Protocol):
    """One command of a replay transcript, as the sandbox ran it (the replay box's `RawRun`)."""

    @property
    def exit_code(self) -> int | None:
        """Its exit status, None when the sandbox stopped it."""
        ...

    @property
    def stdout(self) -> bytes:
        """What it printed (stdout and stderr together)."""
        ...

    @property
    def killed(self) -> str | None:
        """Why the sandbox stopped it ("timeout", "oom", ...), None when it ended."""
        ...


# `stop(i, step)`: true ends a transcript after command `i` (the replay check: a divergence is found)
StopRule = Callable[[int, Step], bool]
# `resolve(client, tag)`: make sure the engine has the image `tag` (built on demand, or a clear
# `SandboxError` saying how to build it). Handed to a backend by whoever makes it (`pivot_sandbox._plugin`:
# the task home's resolver, which builds bundled task images): a backend knows no task format.
ImageResolver = Callable[["docker.DockerClient", str], None]


@runtime_checkable
class SandboxBackend(Protocol):
    """A sandbox backend.

    Attributes:
        name: the name it is registered under ("docker", "namespace", a plugin's).
        limits: the limits every action runs under.
        live_sessions: whether `pivot_sandbox.open_session` can keep one sandbox across an episode.
        closed: True once `close` ran; the plugin factory then makes a new one.
    """

    name: str
    limits: Limits
    live_sessions: bool

    @property
    def closed(self) -> bool:
        """True once `close` ran."""
        ...

    def run(self, spec: SandboxSpec, history: Sequence[str], commands: Sequence[str]) -> Effect:
        """The effect of one action (its shell commands) at the state after `history`."""
        ...

    def run_group(
        self, spec: SandboxSpec, history: Sequence[str], actions: Sequence[Sequence[str]]
    ) -> list[Effect | SandboxError]:
        """The effects of many actions at one state, in order (an action that could not run: its error)."""
        ...

    def snapshot_id(self, spec: SandboxSpec, history: Sequence[str]) -> str:
        """Which build of the state serves it now (a rebuilt state has another id); "" when it keeps none."""
        ...

    def backend_for(self, spec: SandboxSpec, history: Sequence[str]) -> tuple[SandboxBackend, str | None]:
        """The backend that runs this state, and why it is not this one (`(self, None)` when it is)."""
        ...

    def transcript(
        self, spec: SandboxSpec, commands: Sequence[str], timeout: float | None = None, stop: StopRule | None = None
    ) -> list[tuple[Step, str]]:
        """Commands run one by one in one sandbox at the set-up state, as a terminal: (step, cwd after it) each.

        Stops at the first command the sandbox had to stop, and after command `i` where `stop(i, step)`.
        """
        ...

    def image_id(self, tag: str) -> str | None:
        """The id of the image behind `tag` (verdicts are cached by it); None when it cannot be had."""
        ...

    def drain(self) -> None:
        """Wait for the background work queued so far (removals, refills)."""
        ...

    def close(self) -> None:
        """Stop its workers and remove what it made; idempotent."""
        ...

    def gc(self, everything: bool = False) -> dict[str, int]:
        """Remove what backends of dead processes left (all of it with `everything`); counts by kind."""
        ...


__all__ = ["ImageResolver", "SandboxBackend", "Step", "StopRule"]
