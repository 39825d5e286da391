"""OpenHands' `execute_bash`: which calls run a command, and what OpenHands answers to those it does not run.

OpenHands takes these calls but types no new command for them (its bash session, `BashSession.execute`,
and the tool's argument validation; read from OpenHands' source, the V0 `openhands/runtime/utils/bash.py`
and the V1 software-agent-sdk `terminal` tool):

- `is_input` true: the `command` is text for the process still running (keys such as `C-c`), never a
  new command. With no process running it answers "No previous running command to interact with.".
- an empty `command`: it reads a running process's new output ("... to retrieve logs from." when none runs).
- several commands in one call: OpenHands cuts the text where bash would run one complete command
  per line (its `split_bash_commands`, bashlex's top-level nodes) and refuses more than one. `;`
  and `&&` chain commands into one; a newline between complete commands does not.
- a negative or non-numeric `timeout` (the SDK's `timeout: float | None = Field(ge=0)`): the call
  fails validation and nothing runs.

An episode never keeps a process running between turns (OpenHands' soft timeout is not
modelled), so its answers are those for "no process running".
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from pivot_core._shell import command_lines

EXECUTE_BASH = "execute_bash"
# what OpenHands appends to an ErrorObservation in the chat (its conversation memory)
_ERROR_SUFFIX = "\n[Error occurred in processing last action]"


@dataclass(frozen=True)
class NotRun:
    """A shell tool call the harness takes but runs no command for.

    Attributes:
        kind: why: "input" (text for a running process), "logs" (an empty command: a running
            process's output), "several" (more than one command), "timeout" (a negative or
            non-numeric timeout), "arguments" (a command that is not a string).
        reason: why, in words (the verdicts' reason).
        answer: the harness's tool message for the call when no process is running.
    """

    kind: str
    reason: str
    answer: str


def is_input(args: dict[str, Any]) -> bool:
    """Whether an `execute_bash` call sends its command to the running process (`is_input` true, any case)."""
    return str(args.get("is_input", "")).lower() == "true"


def execute_bash_outcome(args: dict[str, Any]) -> str | NotRun:
    """The command an `execute_bash` call runs, or `NotRun` with OpenHands' answer (see the module docstring).

    The checks go in OpenHands' order: the arguments are validated first, then the session looks at
    an empty command and `is_input`, then counts the commands.
    """
    command = args.get("command")
    if not isinstance(command, str):
        why = f"`command` is not a string ({type(command).__name__})"
        return NotRun("arguments", why, f"ERROR: {why}" + _ERROR_SUFFIX)
    if "timeout" in args and (bad := _timeout_refusal(args["timeout"])) is not None:
        return NotRun("timeout", bad, f"ERROR: {bad}" + _ERROR_SUFFIX)
    if not command.strip():
        return NotRun(
            "logs",
            "an empty command reads a running process's output; it runs no command",
            "ERROR: No previous running command to retrieve logs from.",
        )
    if is_input(args):
        return NotRun(
            "input",
            "is_input sends the text to a running process; it runs no command",
            "ERROR: No previous running command to interact with.",
        )
    commands = split_commands(command.strip())
    if len(commands) > 1:
        listed = "\n".join(f"({i}) {c}" for i, c in enumerate(commands, 1))
        return NotRun(
            "several",
            f"OpenHands refuses {len(commands)} commands in one call (one per line; chain them with && or ;)",
            "ERROR: Cannot execute multiple commands at once.\nPlease run each command separately OR chain "
            f"them into a single command via && or ;\nProvided commands:\n{listed}" + _ERROR_SUFFIX,
        )
    return command


def split_commands(command: str) -> list[str]:
    """The commands OpenHands' `split_bash_commands` cuts a call's text into (one when it cannot tell).

    Its parser (bashlex) keeps comment lines out of the commands: those before the first command
    become one piece of their own, later ones belong to the command before them. Text the reader
    does not understand is one piece, as text bashlex cannot parse is.
    """
    pieces = command_lines(command) if _bashlex_parses(command) else None
    if pieces is None:
        return [command]
    out: list[str] = []
    leading: list[str] = []
    for piece in pieces:
        if not _comment(piece):
            out.append(piece)
        elif out:
            out[-1] += "\n" + piece
        else:
            leading.append(piece)
    if not out:
        return [command]
    return (["\n".join(leading)] if leading else []) + out


# What OpenHands' parser (bashlex 0.18, its pinned version) cannot parse: OpenHands then sends the
# whole text as one command, and bash runs every line of it. A heredoc whose delimiter is quoted
# (`<<'EOF'`, the common way to write a file) is one; the others are found outside single quotes:
# arithmetic (`$((`, `$[`, `for ((`), `[[`, array assignments, `case`, `time`, `select`, `coproc`.
# Every pattern is linear in the text: a blank run is only read after the one anchor before it.
_UNPARSED = re.compile(r"""(?<!<)<<-?(?!<)[ \t]*[^\s;&|<>()]*['"\\]""")
_UNPARSED_UNQUOTED = re.compile(
    r"\$\(\(|\$\[|\bfor[ \t]*\(\(|(?:^|[\s;&|(!])\[\[(?=\s)|\w\+?=\("
    r"|(?:^|[\n;&|(])[ \t]*(?:case|time|select|coproc)(?=\s)"  # in command position
)
_SINGLE_QUOTED = re.compile(r"'[^']*'")


def _bashlex_parses(command: str) -> bool:
    """False for text holding a construct bashlex 0.18 cannot parse (see above)."""
    return not (_UNPARSED.search(command) or _UNPARSED_UNQUOTED.search(_SINGLE_QUOTED.sub("''", command)))


def _comment(piece: str) -> bool:
    return all(line.lstrip().startswith("#") for line in piece.splitlines() if line.strip())


def _timeout_refusal(value: Any) -> str | None:
    """Why OpenHands refuses a call's `timeout` (None: it takes it). null is no timeout; a number is >= 0."""
    if value is None:
        return None
    try:
        seconds = float(value) if isinstance(value, (int, float, str)) else math.nan
    except ValueError:
        seconds = math.nan
    if seconds >= 0:  # NaN compares false: refused
        return None
    return f"invalid `timeout` {value!r}: it must be a number of seconds, 0 or more"
