"""Executors: where verification of profiling and training groups runs (in-process or Ray).

`make_executor("ray", spec)` imports Ray on demand; importing this package never does.
"""

from trainers.executors._base import (
    EnvSpec,
    Executor,
    InProcessExecutor,
    VerifyTask,
    route_key,
    score_group,
    worker_for,
)
from trainers.executors._make import EXECUTOR_NAMES, make_executor

__all__ = [
    "EXECUTOR_NAMES",
    "EnvSpec",
    "Executor",
    "InProcessExecutor",
    "VerifyTask",
    "make_executor",
    "route_key",
    "score_group",
    "worker_for",
]
