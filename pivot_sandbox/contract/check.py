"""`check_backend`: does an object keep the `SandboxBackend` contract? In the style of Gymnasium's `check_env`.

The static part (always): every attribute and method of the protocol is there, with the types and
parameters the callers use. With `spec` (an image the backend can run), the live part: one action
run alone and in a group gives the same effect, a transcript runs its commands in one shell, a
snapshot id and an image id come back as strings, `backend_for` answers for the state, and a
command that runs past its timeout is stopped, not waited for.

The verifier and the episode envs run the static part on every backend a plugin registers, before
its first use (`verifiers_plugins.sandbox_backend`); a plugin author runs both in their tests.
"""

from __future__ import annotations

import inspect
from typing import Any

from pivot_sandbox.contract.backend import SandboxBackend
from pivot_sandbox.contract.spec import Effect, Limits, SandboxSpec
from pivot_sandbox.errors import BackendContractError

# method -> the parameters its callers pass (by name where they pass it so)
METHODS: dict[str, tuple[str, ...]] = {
    "run": ("spec", "history", "commands"),
    "run_group": ("spec", "history", "actions"),
    "snapshot_id": ("spec", "history"),
    "backend_for": ("spec", "history"),
    "transcript": ("spec", "commands", "timeout", "stop"),
    "image_id": ("tag",),
    "drain": (),
    "close": (),
    "gc": ("everything",),
}


def static_problems(backend: object) -> list[str]:
    """How `backend` breaks the protocol's shape: missing or mistyped attributes, methods, parameters."""
    problems = []
    for attribute, kind in (("name", str), ("limits", Limits), ("live_sessions", bool), ("closed", bool)):
        if not hasattr(backend, attribute):
            problems.append(f"no `{attribute}`")
        elif not isinstance(getattr(backend, attribute), kind):
            problems.append(f"`{attribute}` is {type(getattr(backend, attribute)).__name__}, not {kind.__name__}")
    for method, wanted in METHODS.items():
        fn = getattr(backend, method, None)
        if not callable(fn):
            problems.append(f"no method `{method}`")
            continue
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            continue  # a builtin or C callable: nothing to read, its calls will tell
        takes_any = any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params.values())
        missing = [w for w in wanted if w not in params]
        if missing and not takes_any:
            problems.append(f"`{method}` takes no {', '.join(missing)}")
    if not problems and not isinstance(backend, SandboxBackend):
        problems.append("not a SandboxBackend")  # runtime_checkable sees members only: a last word
    return problems


def live_problems(backend: SandboxBackend, spec: SandboxSpec) -> list[str]:
    """How `backend` breaks the contract at work, on the state `spec` gives (set-up only, no history)."""
    problems: list[str] = []
    marker = ["echo pivot-check > check.txt; echo pivot-check"]
    alone = backend.run(spec, [], marker)
    if not isinstance(alone, Effect):
        return [f"`run` returned {type(alone).__name__}, not Effect"]
    if alone.exit_code != 0 or alone.stdout.strip() != "pivot-check":
        problems.append(f"`run` of an echo: exit {alone.exit_code}, stdout {alone.stdout[:80]!r}")
    if not any(path.endswith("/check.txt") for path in alone.files):
        problems.append(f"`run` reported no change set for a written file: {sorted(alone.files)[:5]}")
    group = backend.run_group(spec, [], [marker, ["exit 3"]])
    if not isinstance(group, list) or len(group) != 2:
        problems.append(f"`run_group` of two actions returned {group!r:.120}")
    else:
        same, failing = group
        if not isinstance(same, Effect) or same.stdout != alone.stdout or dict(same.files) != dict(alone.files):
            problems.append("`run_group` and `run` disagree on the same action")
        if not isinstance(failing, Effect) or failing.exit_code != 3:
            problems.append(f"`run_group`: `exit 3` gave {failing!r:.120}")
    steps = backend.transcript(spec, ["cd /tmp", "pwd"])
    if len(steps) != 2 or steps[1][1] != "/tmp" or b"/tmp" not in steps[1][0].stdout:
        problems.append(f"`transcript` does not keep one shell across commands: {steps!r:.200}")
    for method, value in (("snapshot_id", backend.snapshot_id(spec, [])), ("image_id", backend.image_id(spec.image))):
        if not isinstance(value, str | None if method == "image_id" else str):
            problems.append(f"`{method}` returned {type(value).__name__}")
    routed = backend.backend_for(spec, [])
    if not (isinstance(routed, tuple) and len(routed) == 2 and isinstance(routed[0], SandboxBackend)):
        problems.append(f"`backend_for` returned {routed!r:.120}")
    # a sleep past the action timeout (only where that timeout is short: the check waits it out)
    slow = backend.run(spec, [], ["sleep 30"]) if backend.limits.action_timeout <= 10 else None
    if slow is not None and slow.killed is None:
        problems.append(f"`sleep 30` under a {backend.limits.action_timeout} s action timeout was not stopped")
    return problems


def check_backend(backend: Any, spec: SandboxSpec | None = None) -> None:
    """Raise `BackendContractError` naming every way `backend` breaks the contract; live checks with `spec`."""
    problems = static_problems(backend)
    if not problems and spec is not None:
        problems = live_problems(backend, spec)
    if problems:
        raise BackendContractError(backend, problems)


__all__ = ["BackendContractError", "check_backend", "live_problems", "static_problems"]
