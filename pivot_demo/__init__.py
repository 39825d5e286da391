"""`pivot demo pivotrl` and what it is made of: its config, stages, results, pretraining and tiny models.

Experiment code, kept apart from the trainer (`trainers.grpo`) that it drives.
"""

from trainers.demo.config import (
    ARMS,
    BUNDLED,
    ENV_ID,
    PROFILE_TURNS,
    STRICT_VERIFIERS,
    SYNTHETIC,
    TRAIN_SETS,
    DemoConfig,
    bundled_reference,
    bundled_sample,
    default_data,
    demo_arms,
    profile_pool,
    synthetic_data,
)
from trainers.demo.results import arm_intervals, arm_rows, plot_results
from trainers.demo.run import evenly, expert_tokens, run_demo
from trainers.demo.stage_log import StageLog

__all__ = [
    "ARMS",
    "BUNDLED",
    "ENV_ID",
    "PROFILE_TURNS",
    "STRICT_VERIFIERS",
    "SYNTHETIC",
    "TRAIN_SETS",
    "DemoConfig",
    "StageLog",
    "arm_intervals",
    "arm_rows",
    "bundled_reference",
    "bundled_sample",
    "default_data",
    "demo_arms",
    "evenly",
    "expert_tokens",
    "plot_results",
    "profile_pool",
    "run_demo",
    "synthetic_data",
]
