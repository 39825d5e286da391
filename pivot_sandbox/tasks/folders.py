"""Where a task folder is: the one resolver every reader of a task folder uses.

A pivot's context names its task folder as an absolute path, or as `bundled:<task id>` for the
copies the package ships (`pivot_core/data/terminal_tasks`); a task image tag
`pivot-gym/task:<task id>` names a bundled task the same way.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

TASK_REPO = "pivot-gym/task"  # the repository of every task image this project builds
BUNDLED = "bundled:"


def bundled_tasks_root() -> Path:
    """The folder of the package's own task copies."""
    return Path(str(resources.files("pivot_core") / "data" / "terminal_tasks"))


def resolve_task_dir(raw: str) -> Path:
    """The task folder a context names: an absolute path, or `bundled:<id>` for the package's own tasks."""
    if raw.startswith(BUNDLED):
        return bundled_tasks_root() / raw[len(BUNDLED) :]
    return Path(raw)


def bundled_task_dir(tag: str) -> Path | None:
    """The package's copy of the task a `pivot-gym/task:<task id>` tag names, None when it is not bundled."""
    repo, _, name = tag.partition(":")
    if repo != TASK_REPO or not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", name):
        return None
    folder = bundled_tasks_root() / name
    return folder if (folder / "task.yaml").is_file() else None


__all__ = ["BUNDLED", "TASK_REPO", "bundled_task_dir", "bundled_tasks_root", "resolve_task_dir"]
