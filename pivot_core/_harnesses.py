"""The agent harnesses whose recorded runs become pivots, named once for the whole project.

A converted run's pivots carry `context.harness`: the converters write these names, the episode env
answers a turn the way that harness did, the trainer adapters give the policy that harness's tools,
and the `harness_format` verifier checks a completion against that harness's parser.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

from pivot_core.errors import InvalidTrajectory

OPENHANDS = "openhands"
MINI_SWE_AGENT = "mini-swe-agent"
TERMINUS = "terminus"
# harnesses whose turns are not Terminus JSON: each has its own tools or action format
HARNESSES = (OPENHANDS, MINI_SWE_AGENT)

# mini-swe-agent's own `action_regex`: exactly what the harness parses from a reply (one block is an
# action, none or several a format error). Stricter than `bash_blocks`, which reads any shell fence.
MINI_SWE_AGENT_ACTION = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)
# what mini-swe-agent answers about a command it killed at its timeout ("The last command <command>...
# </command> timed out and has been killed."): the command did not finish, its effect is partial
MINI_SWE_AGENT_TIMED_OUT = "timed out and has been killed"

# mini-swe-agent 1.x (`mini`, the Terminal-Bench runs: 1.7-1.9), read from its source: its
# `LocalEnvironment` runs each command as `subprocess.run(command, shell=True, cwd=<where mini
# started>, env=os.environ | <mini.yaml's env>, timeout=LocalEnvironmentConfig.timeout)`, and on
# `TimeoutExpired` kills the shell alone (SIGKILL: what the command started lives on) and stops
# reading its output pipe. `mini.yaml` sets these variables and leaves the timeout at its default.
MINI_SWE_AGENT_ENV = (
    ("PAGER", "cat"),
    ("MANPAGER", "cat"),
    ("LESS", "-R"),
    ("PIP_PROGRESS_BAR", "off"),
    ("TQDM_DISABLE", "1"),
)
MINI_SWE_AGENT_TIMEOUT = 30.0  # seconds: `LocalEnvironmentConfig.timeout`
# A command the harness killed at its timeout, run again the same way ($1 seconds, $2 the command):
# its output goes through a pipe that nobody reads once the shell is killed (what it left running
# meets a broken pipe at its next write, as in the run), and its input is a terminal nobody types
# into (a read waits, as mini's own terminal made it wait; /dev/null would end it). `timeout
# --foreground` kills the shell alone and exits 137 then. A shell that ends before the timeout while
# something it started still holds the output pipe (`python3 server.py &`) did not end for the
# harness either: `subprocess.run` reads the pipe to its end, so it waited out its timeout, which is
# why the run shows a timeout. The pipe's reader is bounded by the same timeout: where it is still
# reading then, the status is 137 as well.
_KILLED_AT_TIMEOUT = (
    'd=$(mktemp -d) && mkfifo "$d/i" "$d/o" && { timeout -s KILL "$1" cat "$d/o" & c=$!; '
    'timeout --foreground -s KILL "$1" {shell} "$2" <>"$d/i" >"$d/o" 2>&1; r=$?; '
    "if [ $r -ne 137 ]; then wait $c; [ $? -ne 137 ] || r=137; fi; "
    'kill $c 2>/dev/null; rm -rf "$d"; exit $r; }'
)
# How mini-swe-agent's environment hands a command to a shell: `LocalEnvironment` (the Terminal-Bench
# runs) through `subprocess.run(shell=True)`, `/bin/sh -c`; `DockerEnvironment` (its SWE-bench runs)
# through `docker exec -w <cwd> <container> bash -lc <command>`: a login shell, which reads
# /etc/profile and root's profile (SWE-bench's image activates its environment there). Its name in
# a run's `context.command_shell`.
MINI_SWE_AGENT_SHELLS = {"sh": ("/bin/sh", "-c"), "bash-login": ("bash", "-lc")}
KILLED_STATUS = 137  # 128 + SIGKILL: the exit status of a command run again by `mini_swe_agent_command` and killed


# what mini-swe-agent reads as the end of a run: a command whose output's first line is one of these submits
# the rest of its output (`has_finished`: `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git
# diff --cached` submits the staged diff, which SWE-bench then grades)
MINI_SWE_AGENT_SUBMIT = ("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "MINI_SWE_AGENT_FINAL_OUTPUT")
_SUBMITS = re.compile(
    r"""\s*echo\s+(['"]?)(?:COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT|MINI_SWE_AGENT_FINAL_OUTPUT)\1(?:\s|;|&|\||$)"""
)


def mini_swe_agent_submission(output: str) -> str | None:
    """What a command's output submits to mini-swe-agent: the lines after its marker line; None when none.

    `output`: stdout and stderr together, as the harness read them.
    """
    lines = output.lstrip().splitlines(keepends=True)
    if lines and lines[0].strip() in MINI_SWE_AGENT_SUBMIT:
        return "".join(lines[1:])
    return None


def mini_swe_agent_submits(command: str | None) -> bool:
    """True for a command written to submit (it starts by echoing the marker): an agent's last turn."""
    return bool(command) and _SUBMITS.match(command or "") is not None


def mini_swe_agent_action(text: str | None) -> str | None:
    """The command mini-swe-agent parses from a reply: its one ```bash block, stripped; None for a format error.

    None: the reply holds no block or several; the harness ran nothing and answered with its error.
    """
    blocks = MINI_SWE_AGENT_ACTION.findall(text or "")
    return blocks[0].strip() if len(blocks) == 1 else None


def mini_swe_agent_command(command: str, killed_after: float | None = None, shell: str = "sh") -> str:
    """One mini-swe-agent command as its harness ran it, for a shell that keeps its state between commands.

    A fresh shell (`shell`, a name of `MINI_SWE_AGENT_SHELLS`: `/bin/sh -c`, or `bash -lc` for its
    Docker environment) with mini's variables, started from the shell's working directory, which
    nothing it does changes (a `cd`, `export` or `exit` in it never reaches the next command).
    `killed_after`: the run shows the harness killed it at its timeout (`MINI_SWE_AGENT_TIMED_OUT`):
    it runs for that many seconds and is killed as the harness killed it; its status is then
    `KILLED_STATUS`.
    """
    env = " ".join(f"{name}={shlex.quote(value)}" for name, value in MINI_SWE_AGENT_ENV)
    argv = shlex.join(MINI_SWE_AGENT_SHELLS[shell])
    if killed_after is None:
        return f"{env} {argv} {shlex.quote(command)}"
    seconds = f"{killed_after:g}"
    wrapper = _KILLED_AT_TIMEOUT.replace("{shell}", argv)
    return f"{env} /bin/sh -c {shlex.quote(wrapper)} mini-swe-agent {seconds} {shlex.quote(command)}"


def mini_swe_agent_shell(context: Mapping[str, Any]) -> str:
    """The shell a run's mini-swe-agent ran each command in: `context.command_shell`, else "sh".

    Raises:
        InvalidTrajectory: the context names no shell of `MINI_SWE_AGENT_SHELLS`.
    """
    value = context.get("command_shell") or "sh"
    if value not in MINI_SWE_AGENT_SHELLS:
        raise InvalidTrajectory(
            f"context.command_shell: expected one of {sorted(MINI_SWE_AGENT_SHELLS)}, got {value!r:.60}"
        )
    return str(value)


def mini_swe_agent_timeout(context: Mapping[str, Any]) -> float:
    """Seconds mini-swe-agent gave each command of a run: `context.command_timeout`, else its default.

    Raises:
        InvalidTrajectory: the context's value is no number of seconds > 0.
    """
    value = context.get("command_timeout")
    if value is None:
        return MINI_SWE_AGENT_TIMEOUT
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise InvalidTrajectory(f"context.command_timeout: expected seconds (a number > 0), got {value!r}")
    return float(value)
