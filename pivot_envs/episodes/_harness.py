"""A converted agent's turns in a terminal episode: read as its harness reads them, answered as it answers.

Pivots converted from a real agent's run (`pivot convert`, `context.harness`) continue in their
harness's own format, so that stepping the agent's recorded turns from the run's first pivot is
the run again:

- **OpenHands**: a turn is function calls to OpenHands' tools, checked by the same gate
  `pivot/terminal-v0` puts first (`harness_format`). `execute_bash` runs in the episode's one
  live shell (OpenHands keeps one bash session: `cd` and `export` persist); the tool message is
  the output as `CmdOutputObservation` renders it (exit code line, working directory, the run's
  recorded Python interpreter line); a call OpenHands runs no command for (`is_input`, an empty
  command, several commands, a negative timeout: `pivot_core.shell_call`) runs nothing and gets
  OpenHands' answer for it, no process being left running. `str_replace_editor` makes its change
  through the shell command a replay uses (`pivot_core._editor`) and answers with the editor's own message
  (`File created successfully at: ...`, the `cat -n` snippet, `ERROR: ...`), rendered in the
  container from the file as it is. `think` is logged, `finish` ends the episode, a turn without
  a call gets OpenHands' headless "Please continue" user message.
- **mini-swe-agent**: exactly one ```bash block (its `action_regex`), else its format-error user
  message; the command runs as its `LocalEnvironment` runs it (`/bin/sh -c` in a fresh child
  process with mini's variables: `cd` and `export` do not persist; `pivot_core.harness_action`,
  as every replay of a run runs it); the answer is its `<returncode>`/`<output>` user
  message (head and tail with the elided count past 10000 characters, its timeout message when
  the sandbox stopped the command at its timeout). An output whose first line is
  `COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT` submits: the episode ends (`submitted`).

An `execute_ipython_cell` call runs in the kernel-equivalent process every replay runs it in
(`pivot_core._ipython`), answered with its output and OpenHands' kernel lines. What the harnesses
do and this does not: OpenHands' soft timeout (a command with no new output for 10 s returns with
exit code -1 and keeps running); a command stopped at the sandbox's timeout is
answered with the harness's timeout message and the episode goes on, as the harness goes on.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pivot_core import (
    HARNESSES,
    IPYTHON_TOOL,
    MINI_SWE_AGENT,
    MINI_SWE_AGENT_ACTION,
    Message,
    NotRun,
    Pivot,
    ToolCall,
    harness_action,
    mini_swe_agent_submission,
    shell_actions,
    shell_call,
)
from verifiers_plugins import get_verifier

# OpenHands (headless, `fake_user_response_fn`): the reply to a turn that calls no tool
OPENHANDS_CONTINUE = (
    "Please continue on whatever approach you think is suitable.\n"
    "If you think you have solved the task, please finish the interaction.\n"
    "IMPORTANT: YOU SHOULD NEVER ASK FOR HUMAN RESPONSE.\n"
)
OPENHANDS_MAX_CHARS = 30_000  # its `max_message_chars`: longer outputs keep their head and tail
OPENHANDS_TRUNCATED = "\n[... Observation truncated due to length ...]\n"
_INTERPRETER = re.compile(r"^\[Python interpreter: (.*)\]$", re.M)
# the session's shell names its script in an error (`pivot: line 12: x: command not found`); OpenHands'
# interactive bash says `bash: x: command not found`
_SCRIPT_LINE = re.compile(r"^pivot: line \d+: ", re.M)

MINI_LONG = 10_000  # its template shows the whole output below this many characters
MINI_FORMAT_ERROR = (
    "Please always provide EXACTLY ONE action in triple backticks, found {n} actions.\n"
    "If you want to end the task, please issue the following command: `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`\n"
    "without any other command.\nElse, please format your response exactly as follows:\n\n<response_example>\n"
    "Here are some thoughts about why you want to perform the action.\n\n```bash\n<action>\n```\n</response_example>"
    "\n\nNote: In rare cases, if you need to reference a similar format in your command, you might have\n"
    "to proceed in two steps, first writing TRIPLEBACKTICKSBASH, then replacing them with ```bash."
)
MINI_WARNING = (
    "<warning>\nThe output of your last command was too long.\nPlease try a different command that produces "
    "less output.\nIf you're looking at a file you can try use head, tail or sed to view a smaller number of "
    "lines selectively.\nIf you're using grep or find and it produced too much output, you can use a more "
    "selective search pattern.\nIf you really need to see something from the full command's output, you can "
    "redirect output to a file and then search in that file.\n</warning>"
)


@dataclass(frozen=True)
class Ran:
    """One command's result as a harness turn sees it.

    Attributes:
        exit_code: its exit status (None when stopped).
        output: stdout and stderr together.
        stopped: why the sandbox stopped it: "timeout" (the harness answers and goes on), anything
            else (memory, output flood, the episode's time limit) ends the episode.
        cwd: the shell's working directory after it.
    """

    exit_code: int | None
    output: str
    stopped: str | None
    cwd: str


Run = Callable[[str], Ran]  # one command in the episode's live session, bounded by the episode's time


@dataclass(frozen=True)
class Turn:
    """What a harness turn produced: the messages shown, and what ends the episode (None: it goes on)."""

    messages: tuple[Message, ...]
    ended_by: str | None = None
    stopped: str | None = None  # a command the sandbox stopped for good (memory, flood, time): outcome 0
    submission: str | None = None  # what a mini-swe-agent submission submitted (the output after its marker)


def harness_of(pivot: Pivot) -> str | None:
    """The harness whose format the episode plays on this pivot, None for Terminus JSON (the default)."""
    harness = str(pivot.context.get("harness") or "")
    return harness if harness in HARNESSES else None


def harness_turn(pivot: Pivot, message: Message, run: Run, interpreter: str | None = None) -> Turn:
    """One agent turn of a converted run's harness, executed through `run` (see the module docstring).

    Args:
        pivot: the episode's pivot (its `context.harness`, its tools).
        message: the parsed agent turn.
        run: runs one command in the episode's live session.
        interpreter: OpenHands' `[Python interpreter: ...]` line (`recorded_interpreter`), None for none.
    """
    if harness_of(pivot) == MINI_SWE_AGENT:
        return _mini_turn(pivot, message, run)
    return _openhands_turn(pivot, message, run, interpreter)


def _end(stopped: str) -> str:
    """What ends the episode when the sandbox stopped a command for good."""
    return "time_limit" if stopped == "time_limit" else "killed"


# -- mini-swe-agent ------------------------------------------------------------------------------


def mini_observation(ran: Ran, command: str) -> str:
    """mini-swe-agent's user message for a command's result (its default templates)."""
    if ran.stopped is not None:
        return (
            f"The last command <command>{command}</command> timed out and has been killed.\n"
            f"The output of the command was:\n <output>\n{ran.output}\n</output>\n"
            "Please try another command and make sure to avoid those requiring interactive input."
        )
    head = f"<returncode>{ran.exit_code}</returncode>\n"
    out = ran.output
    if len(out) < MINI_LONG:
        return head + f"<output>\n{out}</output>"
    return (
        head + MINI_WARNING + f"<output_head>\n{out[:5000]}\n</output_head>\n<elided_chars>\n"
        f"{len(out) - MINI_LONG} characters elided\n</elided_chars>\n<output_tail>\n{out[-5000:]}\n</output_tail>"
    )


def _mini_turn(pivot: Pivot, message: Message, run: Run) -> Turn:
    blocks = MINI_SWE_AGENT_ACTION.findall(message.content or "")
    if not get_verifier("harness_format").verify(pivot, message).accepted:  # the gate `pivot/terminal-v0` applies
        return Turn((Message("user", MINI_FORMAT_ERROR.format(n=len(blocks))),))
    command = blocks[0].strip()
    # as its LocalEnvironment ran it: a fresh /bin/sh from the working directory, as every replay runs it
    (ran_as,) = harness_action(message, pivot.context).commands
    ran = run(ran_as)
    if ran.stopped is not None and ran.stopped != "timeout":
        return Turn((Message("user", mini_observation(ran, command)),), _end(ran.stopped), ran.stopped)
    submitted = mini_swe_agent_submission(ran.output) if ran.stopped is None else None
    if submitted is not None:
        return Turn((), "submitted", submission=submitted)
    return Turn((Message("user", mini_observation(ran, command)),))


# -- OpenHands -----------------------------------------------------------------------------------


def openhands_output(ran: Ran, interpreter: str | None, timeout: float | None = None) -> str:
    """A command's tool message as OpenHands' `CmdOutputObservation.to_agent_observation` renders it."""
    text = _SCRIPT_LINE.sub("bash: ", ran.output.rstrip())
    if len(text) > OPENHANDS_MAX_CHARS:
        half = OPENHANDS_MAX_CHARS // 2
        text = text[:half] + OPENHANDS_TRUNCATED + text[-half:]
    if ran.stopped is not None:
        code = -1
        after = f" after {timeout:g} seconds" if timeout else ""
        text += (
            f"\n[The command timed out{after}. You may wait longer to see additional "
            "output by sending empty command '', send other commands to interact with the current process, "
            "send keys to interrupt/kill the command, or use the timeout parameter in execute_bash for future "
            "commands.]"
        )
    else:
        code = ran.exit_code if ran.exit_code is not None else -1
        text += f"\n[The command completed with exit code {code}.]"
    text += f"\n[Current working directory: {ran.cwd}]"
    if interpreter:
        text += f"\n[Python interpreter: {interpreter}]"
    return text + f"\n[Command finished with exit code {code}]"


def recorded_interpreter(messages: Sequence[Message]) -> str | None:
    """The Python interpreter a run's observations named (OpenHands' own runtime's), None when none.

    It is the harness's, not the task's: OpenHands names the interpreter of its own runtime.
    """
    for m in messages:
        if m.role == "tool" and (found := _INTERPRETER.search(m.text)):
            return found.group(1)
    return None


def _openhands_turn(pivot: Pivot, message: Message, run: Run, interpreter: str | None) -> Turn:
    if not message.tool_calls:
        return Turn((Message("user", OPENHANDS_CONTINUE),))
    gate = get_verifier("harness_format").verify(pivot, message)
    # OpenHands answers a call it cannot validate with an error, and the run goes on; a call it takes
    # but runs no command for (`not_run`: input, several commands, ...) is answered below, call by call
    if not gate.accepted and not (gate.details or {}).get("not_run"):
        return Turn(tuple(Message("tool", f"ERROR: {gate.reason}", tool_call_id=c.id) for c in message.tool_calls))
    shown: list[Message] = []
    for call in message.tool_calls:
        text, ended_by, stopped = _openhands_call(call, run, interpreter)
        shown.append(Message("tool", text, tool_call_id=call.id))
        if ended_by is not None:
            return Turn(tuple(shown), ended_by, stopped)
    return Turn(tuple(shown))


def _openhands_call(call: ToolCall, run: Run, interpreter: str | None) -> tuple[str, str | None, str | None]:
    """(tool message, ended_by, stopped) of one OpenHands call."""
    name, parsed = call.name, call.parsed_arguments()
    args: dict[str, Any] = parsed if isinstance(parsed, dict) else {}
    if name == "finish":
        return str(args.get("message") or ""), "finish", None
    if name == "think":
        return "Your thought has been logged.", None, None
    if name == "str_replace_editor":
        return _editor(args, run), None, None
    if name == IPYTHON_TOOL and isinstance(command := shell_call(call), str):
        return _ipython_cell(command, run, interpreter)
    if name != "execute_bash":
        return f"ERROR: {name} is not available in this sandbox", None, None
    command = shell_call(call)  # what scoring reads too: input, several commands, ... run nothing
    if isinstance(command, NotRun):
        return command.answer, None, None  # no process is left running here: OpenHands' answer for that
    if command is None:
        return "ERROR: execute_bash needs a string `command`", None, None
    ran = run(command)
    if ran.stopped is not None and ran.stopped != "timeout":
        return openhands_output(ran, interpreter), _end(ran.stopped), ran.stopped
    timeout = args.get("timeout")
    return openhands_output(ran, interpreter, timeout if isinstance(timeout, (int, float)) else None), None, None


def _ipython_cell(command: str, run: Run, interpreter: str | None) -> tuple[str, str | None, str | None]:
    """A cell run in the kernel-equivalent process (`pivot_core._ipython`), answered with OpenHands' kernel lines."""
    ran = run(command)
    text = ran.output.rstrip() + f"\n[Jupyter current working directory: {ran.cwd}]"
    if interpreter:  # OpenHands' kernel runs its runtime's `python3`
        text += f"\n[Jupyter Python interpreter: {interpreter.removesuffix('3')}3]"
    stopped = ran.stopped if ran.stopped != "timeout" else None
    return text, _end(stopped) if stopped is not None else None, stopped


def _editor(args: dict[str, Any], run: Run) -> str:
    """The editor call's change (the replay's shell command), answered with the editor's own message."""
    message = run(_render_command(args))
    # a call the editor refuses up front (a relative or missing path) changes nothing: its message says so
    if args.get("command") == "view" or message.exit_code != 0 or message.output.startswith("ERROR:"):
        return message.output
    # the replay's shell command for the change (`pivot_core._editor`, through `shell_actions`)
    change = shell_actions(Message("assistant", tool_calls=(ToolCall("str_replace_editor", json.dumps(args), "c"),)))
    if not change:
        return message.output
    done = run(change[0])
    return message.output if done.exit_code == 0 else done.output.rstrip("\n")


# Prints what OpenHands' editor answers to a call, from the file as it is now (before the change):
# the change itself is the replay's command (`pivot_core._editor`), so the two never disagree on it.
_RENDER = r"""import json, os, sys
A = json.loads(base64.b64decode(%r).decode())
p, c = A.get("path") or "", A.get("command")
W = 4
def out(s):
    sys.stdout.write(s); sys.exit(0)
def numbered(text, what, first):
    lines = text.split("\n")
    body = "\n".join("%%6d\t%%s" %% (i + first, l) for i, l in enumerate(lines))
    return "Here's the result of running `cat -n` on %%s:\n%%s\n" %% (what, body)
if not p.startswith("/"):
    s = "ERROR:\nInvalid `path` parameter: %%s. The path should be an absolute path, starting with `/`." %% p
    near = os.path.normpath(os.path.join(os.getcwd(), p))
    out(s + (" Maybe you meant %%s?" %% near if os.path.exists(near) else ""))
if c == "create":
    out("File created successfully at: %%s" %% p)
if c == "view" and os.path.isdir(p):
    rows, hidden = [p.rstrip("/") + "/"], 0
    for name in sorted(os.listdir(p)):
        if name.startswith("."):
            hidden += 1; continue
        q = os.path.join(p, name)
        rows.append(q + ("/" if os.path.isdir(q) else ""))
        if os.path.isdir(q):
            try:
                rows += [os.path.join(q, n) + ("/" if os.path.isdir(os.path.join(q, n)) else "")
                         for n in sorted(os.listdir(q)) if not n.startswith(".")]
            except OSError:
                pass
    s = "Here's the files and directories up to 2 levels deep in %%s, excluding hidden items:\n%%s\n" %% (
        p, "\n".join(rows))
    if hidden:
        s += "\n%%d hidden files/directories in this directory are excluded. You can use 'ls -la %%s' to see them." %% (
            hidden, p)
    out(s)
if not os.path.exists(p):
    out("ERROR:\nInvalid `path` parameter: %%s. The path %%s does not exist. Please provide a valid path." %% (p, p))
t = open(p, encoding="utf-8", errors="replace").read()
if c == "view":
    r = A.get("view_range")
    if isinstance(r, list) and len(r) == 2:
        lines = t.split("\n"); end = len(lines) if r[1] == -1 else r[1]
        out(numbered("\n".join(lines[r[0] - 1:end]), p, r[0]))
    out(numbered(t, p, 1))
tail = "Review the changes and make sure they are as expected%%s. Edit the file again if necessary."
if c == "str_replace":
    o, n = A.get("old_str") or "", A.get("new_str") or ""
    line = t.split(o)[0].count("\n") if o else 0
    start, end = max(0, line - W), line + W + n.count("\n")
    snippet = "\n".join(t.replace(o, n, 1).split("\n")[start:end + 1])
    out("The file %%s has been edited. " %% p + numbered(snippet, "a snippet of " + p, start + 1) + tail %% "")
if c == "insert":
    i, lines, new = A.get("insert_line") or 0, t.split("\n"), (A.get("new_str") or "").split("\n")
    snippet = "\n".join(lines[max(0, i - W):i] + new + lines[i:i + W])
    s = numbered(snippet, "a snippet of the edited file", max(1, i - W + 1))
    out("The file %%s has been edited. " %% p + s + tail %% " (correct indentation, no duplicate lines, etc)")
out("ERROR:\nUnrecognized command %%s." %% c)
"""


def _render_command(args: dict[str, Any]) -> str:
    """The read-only shell command that prints the editor's answer to `args` (the file as it is now)."""
    keys = ("command", "path", "file_text", "old_str", "new_str", "insert_line", "view_range")
    payload = base64.b64encode(json.dumps({k: args[k] for k in keys if k in args}).encode()).decode()
    script = "import base64\n" + _RENDER % payload
    encoded = base64.b64encode(script.encode()).decode()
    return f"python3 -c \"import base64;exec(base64.b64decode('{encoded}'))\""
