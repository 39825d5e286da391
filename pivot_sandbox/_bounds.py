"""How long sandbox work may take at most: the limits that stop each of its parts, added up.

A caller that waits on the sandbox (the verifier chain's deadline, `timeout_for`) waits this long
before it concludes that something is stuck. A shorter wait turns slow but bounded work (a state's
replay and commit, a torch import run three times) into "could not decide", an error verdict the
sandbox itself would not have given: over the agent runs' pivots, 19 of 191 experts read so under
the chain's 30 s default.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields, replace
from typing import Any

from pivot_sandbox.contract.spec import Limits, SandboxSpec

# Seconds to create, start and remove one container and read its state back. No limit of the
# sandbox stops these steps (the engine's API timeouts do); on 2 busy cores they take seconds.
START_ALLOWANCE = 60.0


def state_bound(limits: Limits, spec: SandboxSpec, history: Sequence[str]) -> float:
    """Seconds building the state after `history` may take, when it is not built yet.

    Set-up and history commands, each stopped at `replay_timeout`; the state's commit; the
    processes it runs started once more and measured.
    """
    from pivot_sandbox.images.build import COMMIT_TIMEOUT  # the engine's modules: imported when a sandbox is used
    from pivot_sandbox.replay.restore import RESTART_TIMEOUT
    from pivot_sandbox.replay.runner import GRACE

    commands = len(spec.setup) + len(history)
    return commands * (limits.replay_timeout + GRACE) + COMMIT_TIMEOUT + RESTART_TIMEOUT + START_ALLOWANCE


def action_bound(limits: Limits) -> float:
    """Seconds one action may take at a built state.

    A container with the state's processes started again, the action's commands (stopped at
    `action_timeout`), its change set read.
    """
    from pivot_sandbox.replay.restore import RESTART_TIMEOUT
    from pivot_sandbox.replay.runner import GRACE

    return limits.action_timeout + limits.change_set_timeout + RESTART_TIMEOUT + GRACE + START_ALLOWANCE


def tests_bound(test_timeout: float, limits: Limits) -> float:
    """Seconds a task's test run may take in a fresh shell at a built state: `tasks.verification.run_task_tests`."""
    from pivot_sandbox.tasks.harness import TESTS_GRACE

    return test_timeout + TESTS_GRACE + action_bound(limits)


def limits_of(config: Mapping[str, Any]) -> Limits:
    """The limits a backend built from `config` runs under: its `limits`, with `Limits` fields given as keywords."""
    names = {f.name for f in fields(Limits)}
    return replace(config.get("limits") or Limits(), **{k: v for k, v in config.items() if k in names})
