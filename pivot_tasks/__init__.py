"""Pivots from Terminal-Bench tasks: oracle solutions replayed into trajectories in the task's own image.

This floor sits above the sandbox (it builds and replays in it) and below the envs; the
verifiers do not import it.
"""

from pivot_tasks._oracle import oracle_candidates, oracle_readable
from pivot_tasks._synthesize import (
    REPLAY_LIMITS,
    default_tasks_dir,
    mark_network_pivots,
    skip_reason,
    synthesize,
    synthesize_file,
    synthesize_task,
    task_spec,
)

__all__ = [
    "oracle_candidates",
    "oracle_readable",
    "REPLAY_LIMITS",
    "default_tasks_dir",
    "mark_network_pivots",
    "skip_reason",
    "synthesize",
    "synthesize_file",
    "synthesize_task",
    "task_spec",
]
