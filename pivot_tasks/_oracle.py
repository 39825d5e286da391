"""Tasks whose answer the agent can read: a task-design leak, found at synthesis and kept out of training data.

The tests and the solution never reach a task's image (`pivot_sandbox.tasks.oracle_files.without_oracle`), but
some tasks keep what the tests judge with inside the agent's reach by design: blind-maze's tests
run `/protected/maze_helper.py`, which prints `/protected/ground_truth_map.txt`, and the agent is
root there (Terminal-Bench shares the leak: its agent is root as well). `cp` of that file scores 1.

What counts: the absolute paths the tests name that the task's instruction does not (by path or
file name), outside the working directory, the tests' own folders and the system's; for each that
exists in the task's initial state, the regular files of its folder that the agent's user can read
there, checked in a candidate container of that state as that user.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pivot_sandbox import SandboxSpec

_QUOTED_PATH = re.compile(r"""["'](/[A-Za-z0-9_.+-][A-Za-z0-9_./+-]*)["']""")
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/proc", "/sys", "/dev", "/tmp", "/var", "/run", "/opt")
_TEST_FILES = ("*.py", "*.sh", "*.txt", "*.json")


def oracle_candidates(task_dir: Path, instruction: str, workdir: str) -> list[str]:
    """Absolute paths the task's tests name and its instruction does not, outside the agent's own folders."""
    texts = [p.read_text(errors="replace") for g in _TEST_FILES for p in sorted((task_dir / "tests").rglob(g))]
    if (task_dir / "run-tests.sh").is_file():
        texts.append((task_dir / "run-tests.sh").read_text(errors="replace"))
    named = {m for text in texts for m in _QUOTED_PATH.findall(text)}
    out = []
    for path in sorted(named):
        path = posixpath.normpath(path)
        inside = [workdir.rstrip("/") or "/", "/tests", "/root", "/home", *_SYSTEM]
        if path == "/" or any(path == d or path.startswith(d.rstrip("/") + "/") for d in inside):
            continue
        if path in instruction or posixpath.basename(path) in instruction:
            continue  # what the instruction names is the agent's to read or write
        out.append(path)
    return out


def readable_oracle(backend: Any, spec: SandboxSpec, candidates: Sequence[str]) -> list[str]:
    """The files near `candidates` that the agent's user can read in the task's initial state (sorted)."""
    if not candidates:
        return []
    script = (
        'for p in "$@"; do [ -e "$p" ] || continue; d=$(dirname "$p")\n'
        '  if [ "$d" = / ]; then [ -f "$p" ] && [ -r "$p" ] && printf "%s\\n" "$p"\n'
        '  else find "$d" -maxdepth 1 -type f -readable 2>/dev/null; fi\n'
        "done"
    )
    command = f"sh -c {shlex.quote(script)} oracle " + " ".join(shlex.quote(c) for c in candidates)
    effect = backend.run(spec, [], [command])
    if effect.killed:
        return [f"(the check was stopped: {effect.killed})"]
    return sorted({line for line in effect.stdout.splitlines() if line.startswith("/")})


def oracle_readable(backend: Any, spec: SandboxSpec, task_dir: Path, instruction: str) -> list[str]:
    """What of the task's answer the agent's user can read at the start (`[]` when nothing)."""
    return readable_oracle(backend, spec, oracle_candidates(task_dir, instruction, spec.workdir))
