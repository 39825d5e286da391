r"""Harbor task folders -> Terminus expert trajectories: the oracle `solution/solve.sh`, command by command.

Harbor's oracle agent copies `solution/` to `/solution` and runs `solve.sh` once. Here the script is
cut into its top-level commands (`pivot_core.command_lines`: a heredoc, a `\` continuation, a
multi-line quote or an `if`/`for`/`{ }` block stays one command; the shebang, comment lines and the
script's own options such as `set -euo pipefail` are dropped) and each command becomes one Terminus
turn typed in a terminal session of the task's own image (`pivot_tasks.synthesize`, as Terminal-Bench
oracles are), its real output the next user turn.
The shell's state carries from one command to the next as in a terminal (`cd`, variables). What
Harbor's run of solve.sh has and a typed session lacks is made part of the session (`oracle_session`):
`[solution].env` exported as its first command, and `UV_NATIVE_TLS=1` before each `uv`/`uvx` (the
replay reaches the registries through the machine's CA bundle, which uv trusts only with native TLS).

The solution never enters the agent's image: the image is built from `environment/` alone, the
expert's commands are typed, and a script that reads files of its own folder (`/solution/...`,
which only Harbor's oracle agent gets) is skipped with that reason, as a task without `solve.sh`
is (it still serves episodes from its untouched state, outside this command). The pivots carry
`context.task` (the folder, the commands, the verifier's timeout): `task_tests` and
`pivot/terminal-episode-v0` run the task's `tests/test.sh` as Harbor's verifier does.
TB2 data carries a canary: use the output for tests and demos, never training.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pivot_core import command_lines
from pivot_tasks._synthesize import synthesize, write_synthesis

# a path under /solution (what Harbor's oracle agent uploads): the agent's image never holds it
SOLUTION_PATH = re.compile(r"(?<![\w./-])/solution(?=/|\s|$|['\"])")
CANARY = re.compile(r"canary GUID ([0-9a-fA-F-]{36})")
# a script's own options (`set -e`, `set -euo pipefail`): how a script stops on an error, no action of a terminal
# session (typed at a prompt, `set -e` closes the shell at the next failing command)
# a `uv`/`uvx` command starting a line or after a shell operator (`cd /app && uv run x.py`, `(uvx ruff)`)
UV_COMMAND = re.compile(r"(^|[;&|(]|\b(?:then|do|else)\b)([ \t]*)(uvx?)(?=[ \t])", re.M)
SCRIPT_OPTIONS = re.compile(r"set(?:\s+[-+][a-zA-Z]+(?:\s+(?:pipefail|errexit|nounset|xtrace|verbose))?)+\s*(?:#.*)?")


def solution_commands(script: str) -> tuple[list[str], str]:
    """The top-level commands of a `solve.sh`, and "" (or why none can be given)."""
    pieces = command_lines(script)
    if pieces is None:
        return [], "solve.sh: the shell reader did not understand it whole (an open quote, heredoc or substitution)"
    commands = [p for p in pieces if not p.startswith("#") and not SCRIPT_OPTIONS.fullmatch(p)]
    if not commands:
        return [], "solve.sh runs no command"
    for command in commands:
        if SOLUTION_PATH.search(command):
            return [], (
                f"solve.sh reads its own folder (/solution), which only Harbor's oracle agent gets: {command[:60]!r}"
            )
    return commands, ""


def harbor_record(folder: Path) -> tuple[dict[str, Any], str]:
    """A Harbor task folder as the record `synthesize` reads (`task_id`, `instruction`, `solution_commands`).

    Returns (record, "") or (record, why the task gives no oracle pivots).
    """
    instruction = folder / "instruction.md"
    record: dict[str, Any] = {
        "task_id": folder.name,
        "id": f"harbor/{folder.name}",
        "instruction": instruction.read_text(errors="replace") if instruction.is_file() else "",
        "source": f"harbor:{folder.name}",
    }
    solve = folder / "solution" / "solve.sh"
    if not solve.is_file():
        return record, "no solution/solve.sh: no oracle to turn into pivots"
    script = solve.read_text(errors="replace")
    commands, why = solution_commands(script)
    if not why and (origin := _swapped_release(folder)):
        commands, why = _debian_commands(commands, origin)
    if why:
        return record, why
    record["solution_commands"] = oracle_session(commands, _solution_env(folder))
    canary = CANARY.search(script) or CANARY.search(record["instruction"])
    if canary:
        record["canary_guid"] = canary.group(1)  # contamination marker: tests and demos only
    return record, ""


def _uv_with_registry_access(command: str) -> str:
    """`command` with `UV_NATIVE_TLS=1` before each `uv`/`uvx` it starts (outside a heredoc's body)."""
    head, sep, body = command.partition("<<") if "<<" in command else (command, "", "")
    if sep:  # a heredoc: its body is a file's text, not commands; only the first line runs
        first, nl, rest = body.partition("\n")
        head, body = head + sep + first, nl + rest
    return UV_COMMAND.sub(lambda m: f"{m.group(1)}{m.group(2)}UV_NATIVE_TLS=1 {m.group(3)}", head) + body


def oracle_session(commands: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """The oracle's commands with what Harbor's oracle run of solve.sh has and a typed session lacks.

    - `[solution].env` (task.toml): solve.sh's environment, exported first as the session's own command;
    - uv's registry access: the replay reaches the registries through the machine's CA bundle, which uv
      trusts only with native TLS (`harbor_layer.uv_registry_env`), so each `uv`/`uvx` the oracle runs is
      typed as `UV_NATIVE_TLS=1 uv ...`. The trajectory shows it; a candidate's commands are never changed.
    """
    out = [_uv_with_registry_access(c) for c in commands]
    if env:
        out.insert(0, "export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()))
    return out


def _solution_env(folder: Path) -> dict[str, str]:
    """`[solution].env` of the task's task.toml ({} when unset or unreadable: loading the task says why)."""
    from pivot_sandbox.errors import TaskError
    from pivot_sandbox.tasks.harbor import read_task_toml

    try:
        return dict(read_task_toml(folder / "task.toml").solution_env)
    except (OSError, TaskError):
        return {}


def _swapped_release(folder: Path) -> str:
    """The release the task's image names when it is built on another (its last FROM): its oracle's apt pins differ."""
    from pivot_sandbox.errors import DockerfileError
    from pivot_sandbox.images import dockerfile as df
    from pivot_sandbox.images.bases import swapped_release

    path = folder / "environment" / "Dockerfile"
    try:
        froms = [i for i in df.parse(path.read_text(errors="replace"), str(path)) if i.keyword == "FROM"]
    except (OSError, DockerfileError):  # the build says what is wrong with it
        return ""
    return swapped_release(froms[-1].args.split()[0]) if froms and froms[-1].args.split() else ""


def _debian_commands(commands: Sequence[str], origin: str) -> tuple[list[str], str]:
    """The oracle's commands as the image's build had its own: `origin`'s apt pins dropped, names mapped.

    Returns (commands, "") or ([], why they cannot run on Debian) (`images/ubuntu_apt.py`).
    """
    from pivot_sandbox.errors import DockerfileError
    from pivot_sandbox.images.ubuntu_apt import on_debian

    try:
        return [on_debian(c, "solution/solve.sh", origin)[0] for c in commands], ""
    except DockerfileError as e:
        return [], str(e)


def harbor_folders(tasks_dir: Path, only: Sequence[str] = ()) -> tuple[Path, list[Path]]:
    """(the folder holding the tasks, the Harbor task folders): `tasks_dir` may be one task's folder."""
    from pivot_sandbox import is_harbor_task, task_dirs

    tasks_dir = Path(tasks_dir)
    if is_harbor_task(tasks_dir):
        return tasks_dir.parent, [tasks_dir]
    return tasks_dir, [d for d in task_dirs(tasks_dir, only) if is_harbor_task(d)]


def synthesize_harbor(
    tasks_dir: Path,
    out: Path,
    *,
    only: Sequence[str] = (),
    limit: int | None = None,
    check_tests: bool = False,
    keep_oracle_readable: bool = False,
    backend: Any = None,
) -> dict[str, Any]:
    """Synthesize the oracle of every Harbor task under `tasks_dir` (or of that one task) and write the pivots.

    The report is `synthesize_file`'s (`total`, `succeeded`, `pivots`, `tasks` rows with `status` ok,
    partial or skipped and the reason; `tests_before`/`tests_after` with `check_tests`).
    """
    root, folders = harbor_folders(tasks_dir, only)
    folders = folders[: limit or None]
    rows: list[dict[str, Any]] = []
    records = []
    for folder in folders:
        record, why = harbor_record(folder)
        if why:
            rows.append({"task_id": folder.name, "status": "skipped", "reason": why})
        else:
            records.append(record)
    rows.extend(synthesize(records, "", backend=backend, tasks_dir=root))
    rows.sort(key=lambda r: r["task_id"])
    return write_synthesis(rows, tasks_dir, out, check_tests=check_tests, keep_oracle_readable=keep_oracle_readable)
