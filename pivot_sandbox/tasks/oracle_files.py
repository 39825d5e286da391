"""A task's tests and solution kept out of its image: the Dockerfile steps that would copy them in.

A Terminal-Bench Dockerfile may copy the tests or the solution into the image (a task-design leak:
blind-maze copies `tests/` to /app/tests; reading them is reading the answer). Such a step is left
out of the build, or, where a later step uses what it copies, kept for the build and its files
removed before the one commit (`images/build.py`). A folder such a step creates stays, empty: the
agents' runs list it (blind-maze's first `ls -la` shows `tests`), and a replay of a run that never
opened it is then faithful; one that opens it diverges there, as it should.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from collections.abc import Sequence
from pathlib import Path

from pivot_sandbox.errors import TaskError
from pivot_sandbox.images import dockerfile as df


def without_oracle(
    task_dir: Path, context: Path, instructions: Sequence[df.Instruction]
) -> tuple[list[df.Instruction], list[df.Instruction], str]:
    """(instructions to build, the oracle's steps among them to remove before the commit, the report's note).

    The instructions lose the COPY/ADD steps of the task's tests or solution. Candidates never see
    the tests nor the solution (blind-maze's Dockerfile copies `tests/` to
    /app/tests: reading them is reading the answer); the tests are delivered for the test run only
    (`tasks/harness.py`). Such a step is left out, unless a later step names what it copies (`COPY
    solution.sh /app/` then `RUN chmod +x /app/solution.sh`): left out, that step would fail and the
    task would not build; kept, `build` removes what it copied before committing the image. Either
    way a folder the step created stays, empty (a left-out step becomes its `mkdir`). A step
    that copies a folder holding them (`COPY . /app`) cannot be cut in two here: it raises
    `TaskError`, and the task is skipped with that reason.
    """
    oracle = [(task_dir / "tests").resolve(), *((task_dir / n).resolve() for n in ("solution.sh", "solution.yaml"))]
    kept, dropped, withheld = [], [], []
    for n, ins in enumerate(instructions):
        if ins.keyword not in ("COPY", "ADD") or "from" in ins.flags or ins.heredocs:
            kept.append(ins)
            continue
        sources, dest = df.copy_sources(ins, context, {})
        hidden = [p for p in sources if p in oracle]
        holds = any(o != p and p in o.parents for p in sources for o in oracle)  # a folder above them
        if holds or (hidden and len(hidden) < len(sources)):
            raise TaskError(f"{ins.where}: {ins.keyword} {ins.args} copies the tests or the solution with other files")
        if not hidden:
            kept.append(ins)
        elif _named_later(instructions[n + 1 :], [p.name for p in hidden]):
            kept.append(ins)
            withheld.append(ins)
        else:
            dropped.append(ins)
            kept += _emptied_folder(ins, hidden, dest, instructions[:n])
    notes = [f"{i.where}: {i.keyword} {i.args}" for i in dropped]
    notes += [f"{i.where}: {i.keyword} {i.args} (copied for the build, removed before the commit)" for i in withheld]
    return kept, withheld, "; ".join(notes)


def _emptied_folder(
    ins: df.Instruction, hidden: Sequence[Path], dest: str, before: Sequence[df.Instruction]
) -> list[df.Instruction]:
    """In place of a left-out copy of one folder: the step that creates the folder it would have, empty.

    Only where the destination is plain text (no `$VAR` a shell would read otherwise than the builder),
    no `--chown`/`--chmod` sets what `mkdir` would not, and the step runs as root (`before`: the steps
    before it; COPY makes root's folders whatever the USER, a RUN as another user may not); else
    nothing (the folder is then missing, as before). `dest`: the step's destination (`copy_sources`).
    """
    plain = dest and "$" not in dest and not ins.flags
    users = [i.args.strip() for i in before if i.keyword == "USER" and i.stage == ins.stage]
    as_root = not users or users[-1].split(":")[0] in ("root", "0")
    if not (plain and as_root and len(hidden) == 1 and hidden[0].is_dir()):
        return []
    return [dataclasses.replace(ins, keyword="RUN", args=f"mkdir -p -- {shlex.quote(dest)}", flags={})]


def _named_later(later: Sequence[df.Instruction], names: Sequence[str]) -> bool:
    """Whether a later step's text names one of `names` as a part of a path (`solution.sh`, `/app/tests/x`)."""
    pattern = re.compile("|".join(rf"(?<![\w.-]){re.escape(n)}(?![\w-])" for n in names))
    return any(pattern.search(" ".join((i.args, *i.heredocs))) for i in later)
