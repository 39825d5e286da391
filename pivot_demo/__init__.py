"""`pivot demo pivotrl` and what it is made of: its config, stages, results, pretraining and tiny models.

Experiment code in a package of its own, between the trainers it drives (`trainers.grpo`) and the
CLI that runs it (`pivot demo`); the bundled reference policy's weights live in `reference/`.
"""

from pivot_demo.config import (
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
from pivot_demo.results import arm_intervals, arm_rows, plot_results
from pivot_demo.run import evenly, expert_tokens, run_demo
from pivot_demo.stage_log import StageLog

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
