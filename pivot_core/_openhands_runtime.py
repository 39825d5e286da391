"""What OpenHands' runtime left in its working directory before the agent's first action, read from the run.

OpenHands V0 with its local runtime (Terminal-Bench's OpenHands agent, July 2025) prepares the
directory its shell starts in (`/app`) before the agent acts, read from its source:

- `runtime_init.init_user_and_working_directory`: `chmod g+rw` of the directory (`drwxrwxr-x`
  where the task image has `drwxr-xr-x`);
- `action_execution_server._init_bash_commands`: `git config --file ./.git_config user.name
  "openhands" && git config --file ./.git_config user.email "openhands@all-hands.dev" && export
  GIT_CONFIG=$(pwd)/.git_config`: a 58-byte `.git_config` and `GIT_CONFIG` in the shell;
- Terminal-Bench's set-up of the agent installs OpenHands with uv into `.venv` there: OpenHands'
  own interpreter and packages (about 600, on uv's CPython 3.13), which its Jupyter kernel runs on.

`runtime_files` reads which of these the run shows: the first observation that lists the start
directory with its hidden entries (`ls -la`, `ls -la /app`, `pwd && ls -la`, or the editor's view
of `/`, which lists `/app/.git_config` and `/app/.venv/`), taken only when no earlier action of the
agent named the entry (an agent may make its own `.venv`), and the directory's own mode from the
first listing that shows it (`.`, or `..` in a listing of a folder right under it). `runtime_setup` gives the set-up
commands that make them at the restored state, before the history, so they exist for the expert
and every candidate alike and no action's change set holds them: the directory's mode as listed,
`.git_config` with the content OpenHands writes, `.venv` as an empty directory with its listed
mode. The venv's content cannot be made faithfully (OpenHands' install, from the network, for the
run's machine): a command that uses it diverges in the replay check, and `runtime_note` says why.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from pivot_core.errors import InvalidTrajectory

GIT_CONFIG = "[user]\n\tname = openhands\n\temail = openhands@all-hands.dev\n"  # what `git config --file` writes
RUNTIME_ENTRIES = {".git_config": "file", ".venv": "dir"}
_DEFAULT_MODES = {"file": "644", "dir": "755"}
# an `ls -l` line: mode, links, owner, group, size, date (3 fields), name
_LS_LINE = re.compile(r"^([dl-])([rwxsStT-]{9})[.+@]?\s+\d+\s+\S+\s+\S+\s+\d+\s+\S+\s+\S+\s+\S+\s+(.+)$", re.M)
_LS = re.compile(r"(?:^|&&|;)\s*ls\s+((?:-[A-Za-z]+\s*)+)([^\s;&|]*)\s*$")
_VIEW_ROOT = "Here's the files and directories up to 2 levels deep in /,"


def _mode(perms: str) -> str:
    """An `ls -l` permission string's octal mode (`rwxrwxr-x` -> "775"); special bits are left out."""
    digits = []
    for i in range(0, 9, 3):
        r, w, x = perms[i : i + 3]
        digits.append(str((r == "r") * 4 + (w == "w") * 2 + (x in "xst") * 1))
    return "".join(digits)


def _listing(command: str, where: str, output: str, start: str) -> tuple[dict[str, str] | None, str]:
    """What an observation lists of `start`: (its runtime entries' octal modes by name, `start`'s own mode).

    The entries are None when it does not list `start` with its hidden entries; the mode "" when not shown.

    `start`'s own mode shows as `.` in a listing of it, and as `..` in a listing of a folder right under
    it (new-encrypt-command's `ls -la data/` from /app, the run's only look at /app's mode).
    """
    if output.startswith(_VIEW_ROOT):
        names = {line[len(start) + 1 :].rstrip("/") for line in output.splitlines() if line.startswith(start + "/")}
        return {n: "" for n in names if n in RUNTIME_ENTRIES}, ""
    found = _LS.search(command.strip())
    if found is None or "a" not in found.group(1) or "$" in found.group(2) or "*" in found.group(2):
        return None, ""
    target = posixpath.normpath(posixpath.join(where, found.group(2) or "."))
    lines = {m.group(3): m.group(2) for m in _LS_LINE.finditer(output)}
    if target != start:
        parent = posixpath.dirname(target) == start and target != "/" and lines.get("..", "")
        return None, _mode(parent) if parent else ""
    if "." not in lines:
        return None, ""
    return {name: _mode(perms) for name, perms in lines.items() if name in RUNTIME_ENTRIES}, _mode(lines["."])


def runtime_files(events: Sequence[Mapping[str, Any]], start: str) -> list[dict[str, str]]:
    """What the run shows the runtime left in `start` (see the module docstring): `[{path, mode[, kind]}]`.

    `events`: the run's OpenHands event stream. The entries come from the first listing of `start`;
    its own mode (the first entry, when listed) from the first listing that shows it (as `.`, or as `..`
    of a folder right under it), unless an action of the agent ran `chmod` between the first listing and
    that one (the editor's view shows no modes).
    """
    observations = {e["cause"]: e for e in events if "observation" in e and isinstance(e.get("cause"), int)}
    named: set[str] = set()
    entries: list[dict[str, str]] | None = None
    for event in events:
        if "action" not in event or event.get("source") != "agent" or not isinstance(event.get("id"), int):
            continue
        args = event.get("args") if isinstance(event.get("args"), Mapping) else {}
        command = str(args.get("command") or "") if event.get("action") == "run" else ""
        obs = observations.get(event["id"]) or {}
        extras = obs.get("extras") if isinstance(obs.get("extras"), Mapping) else {}
        meta = extras.get("metadata") if isinstance(extras.get("metadata"), Mapping) else {}
        found, mode = _listing(command, str(meta.get("working_dir") or start), str(obs.get("content") or ""), start)
        if found is not None and entries is None:
            entries = [
                {"path": f"{start}/{name}", "mode": found[name] or _DEFAULT_MODES[kind], "kind": kind}
                for name, kind in RUNTIME_ENTRIES.items()
                if name in found and name not in named
            ]
        if mode:
            return [{"path": start, "mode": mode}, *(entries or [])]
        if entries is not None and "chmod" in command:
            break
        named.update(n for n in RUNTIME_ENTRIES if n in str(args.get("command") or args.get("code") or ""))
    return entries or []


def runtime_setup(files: Sequence[Mapping[str, str]]) -> tuple[tuple[str, ...], dict[str, str]]:
    """(set-up commands, environment) that make `runtime_files`' entries, as OpenHands' runtime left them.

    Raises:
        InvalidTrajectory: an entry that is not one `runtime_files` gives (the message names it).
    """
    commands: list[str] = []
    env: dict[str, str] = {}
    for entry in files:
        path, mode, kind = str(entry.get("path", "")), str(entry.get("mode", "")), entry.get("kind")
        name = path.rsplit("/", 1)[-1]
        if (
            not path.startswith("/")
            or not re.fullmatch(r"[0-7]{3}", mode)
            or kind
            and RUNTIME_ENTRIES.get(name) != kind
        ):
            what = f"{{path, mode[, kind]}} of {sorted(RUNTIME_ENTRIES)}"
            raise InvalidTrajectory(f"context.runtime_files: expected {what}, got {dict(entry)!r:.120}")
        p = shlex.quote(path)
        if kind == "file":
            commands.append(f"printf '%s' {shlex.quote(GIT_CONFIG)} > {p} && chmod {mode} {p}")
            env["GIT_CONFIG"] = path  # the runtime's `export GIT_CONFIG=$(pwd)/.git_config`
        elif kind == "dir":
            commands.append(f"mkdir -p {p} && chmod {mode} {p}")
        else:
            commands.append(f"chmod {mode} {p}")
    return tuple(commands), env


def runtime_note(action: str, cell: bool = False, output: str | None = None) -> str:
    """Why a divergence at this action is the runtime's, not the replay's; "" when nothing says so.

    `action`: the diverging action as the agent wrote it (a command, a cell's code); `cell`: an
    IPython cell, which OpenHands' kernel ran on the runtime's own interpreter; `output`: what the run
    recorded for it (fix-pandas-version's `find /app -name setup.py` listed the runtime's venv).
    """
    if cell:
        return (
            " (an IPython cell: OpenHands' kernel ran it on the runtime's own interpreter, /app/.venv/bin/python3,"
            " whose packages are not the task image's; the replay runs it on the image's python3)"
        )
    if ".venv" in action:
        return (
            " (it uses /app/.venv, OpenHands' own install that Terminal-Bench's set-up made there: about 600"
            " packages on uv's CPython, fetched for the run's machine; the replay has it as an empty folder)"
        )
    if "/app/.venv/" in (output or ""):
        return (
            " (the run's output lists files of /app/.venv, OpenHands' own install that Terminal-Bench's set-up"
            " made there; the replay has it as an empty folder)"
        )
    return ""
