"""Terminal-Bench and Harbor pivots: oracle solutions replayed in the task's own image; agents' runs sandboxed there.

This floor sits above the sandbox (it builds and replays in it) and below the envs; the
verifiers do not import it.
"""

from pivot_tasks._agent_runs import replay_blocker, sandbox_pivots, unsandboxed_counts
from pivot_tasks._harbor import harbor_record, solution_commands, synthesize_harbor
from pivot_tasks._oracle import oracle_candidates, oracle_readable
from pivot_tasks._replay_check import check_replay, comparable_output
from pivot_tasks._swe_runs import swe_sandbox_pivots
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
    "check_replay",
    "comparable_output",
    "harbor_record",
    "solution_commands",
    "synthesize_harbor",
    "oracle_candidates",
    "replay_blocker",
    "sandbox_pivots",
    "unsandboxed_counts",
    "swe_sandbox_pivots",
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
