"""Episode envs: continue a task from any pivot in the live state and score the task's outcome."""

from pivot_envs.episodes._base import EpisodeEnv, EpisodeOutcome, StepResult, load_episode_data
from pivot_envs.episodes._recorded import RecordedPlay, play_recorded
from pivot_envs.episodes._terminal import TerminalEpisodeEnv
from pivot_envs.episodes._tool_use import (
    ToolUseEpisodeEnv,
    database_differs,
    doubtful_failures,
    gold_state,
    said_to_user,
    tau_bench_outcome,
)

__all__ = [
    "EpisodeEnv",
    "EpisodeOutcome",
    "RecordedPlay",
    "StepResult",
    "TerminalEpisodeEnv",
    "ToolUseEpisodeEnv",
    "database_differs",
    "doubtful_failures",
    "gold_state",
    "load_episode_data",
    "play_recorded",
    "said_to_user",
    "tau_bench_outcome",
]
