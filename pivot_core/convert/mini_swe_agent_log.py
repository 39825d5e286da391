"""mini-swe-agent's own terminal transcript (`sessions/agent.log`) -> one Trajectory.

The log is what the agent printed through rich, recorded with ANSI codes: a `System` message, a
`User` message (the task), then per step a `mini-swe-agent (step N, $cost)` header with the
model's reply (THOUGHT and one fenced bash block) and a `User` message with the observation
(`<returncode>` and `<output>`, or mini-swe-agent's timeout / format-error / long-output
templates). The transcript is read back into those messages:

- headers are found in the raw text by their colours (so a command printing "User:" is no header);
- ANSI codes go; so does what is no message: the "Waiting for the LM to respond..." spinner,
  rules (`────`), and LiteLLM's logging errors that the run interleaved (a traceback ending in
  `ImportError: Missing dependency ...`) and its notes around a retried model call;
- rich wrapped every line at 160 columns; a break is undone where rich would have made it: the
  line ends in a blank and the next word would not have fitted (word wrap), or the line fills the
  160 columns (a folded long word). Tabs were printed as spaces and stay so;
- a carriage return inside a line let the terminal overwrite it (the spinner, progress bars):
  the line's last written part is what the screen showed, and what is kept;
- timeouts, truncated outputs (`<output_head>` / `<elided_chars>`) and format errors are kept as
  recorded. A timed-out step repeats its command (`The last command <command>...</command>`):
  the joined command is checked against the reply's block (`context.wrap_check`).

Each command ran in a fresh subshell (`cd` does not persist): `context.fresh_shell` says so; and
under the harness's timeout, which the transcript does not print (`mini` leaves its environment's
default, 30 s, in the versions of these runs): `context.command_timeout`, seconds.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from pivot_core._harnesses import MINI_SWE_AGENT, MINI_SWE_AGENT_ACTION, MINI_SWE_AGENT_TIMEOUT
from pivot_core._model import Message, Trajectory
from pivot_core.errors import InvalidTrajectory

WIDTH = 160
# rich's colours for the three message headers (bold green System/User, bold red mini-swe-agent)
_HEADER = re.compile(
    r"\x1b\[1;32m(?P<role>System|User)\x1b\[0m:\r?\n"
    r"|\x1b\[1;31mmini-swe-agent\x1b\[0m\x1b\[31m \(step \x1b\[0m\x1b\[1;31m(?P<step>\d+)\x1b\[0m.*?\):\x1b\[0m\r?\n"
)
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78]")
_SPINNER = re.compile(r"^(?:[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] Waiting for the LM to respond\.\.\.)+")
_RULE = re.compile(r"^─{20,}\s*$")
_LITELLM = re.compile(r"^\d\d:\d\d:\d\d - LiteLLM[:.]")
_LITELLM_END = re.compile(r"^ImportError: Missing dependency ")
_TRAILER = re.compile(r"^Saved trajectory to ")
# LiteLLM's lines around a retried request (the model call failed and mini-swe-agent retried it)
_RETRY = re.compile(
    r"^(Give Feedback / Get Help: https://github\.com/BerriAI/litellm|LiteLLM\.Info: |Provider List: https://docs\.litellm\.ai"
    r"|Retrying minisweagent\.|- .* Handle with `litellm\.\w+`\.\.$)"
)
_TIMED_OUT = re.compile(r"The last command <command>(.*?)</command> timed out", re.DOTALL)
VERSION = re.compile(r"mini-swe-agent\x1b\[0m version \x1b\[1;32m([\d.]+)")


def detect_log(head: str) -> bool:
    """True for a mini-swe-agent transcript (one whose agent never started included: its log is the same kind)."""
    named = "mini-swe-agent" in head or "mini -m " in head
    return named and ("\x1b[" in head or "asciinema" in head)


def cell_len(text: str) -> int:
    """Terminal columns of `text` (wide East Asian characters take two, combining marks none)."""
    n = 0
    for ch in text:
        if unicodedata.combining(ch):
            continue
        n += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return n


def strip_ansi(text: str) -> str:
    """`text` without ANSI escape sequences."""
    return _ANSI.sub("", text)


def _clean_lines(body: str) -> list[str]:
    """A message's printed lines without ANSI and without the lines that are no part of it."""
    out: list[str] = []
    in_litellm = False
    for raw in body.split("\n"):
        # a carriage return lets the terminal overwrite the line (the spinner does): what stays is the last part
        parts = [strip_ansi(part) for part in raw.rstrip("\r").split("\r")]
        line = next((part for part in reversed(parts) if part.strip()), parts[-1])
        if _SPINNER.match(line):  # the spinner, and whatever was printed on its line after it
            line = _SPINNER.sub("", line)
            if not line.strip():
                continue
        if in_litellm:
            in_litellm = not _LITELLM_END.match(line)
            continue
        if _LITELLM.match(line):
            in_litellm = True
            continue
        if _RULE.match(line) or _TRAILER.match(line) or _RETRY.match(line):
            continue
        out.append(line)
    while out and not out[-1].strip():
        out.pop()
    while out and not out[0].strip():
        out.pop(0)
    return out


def unwrap(lines: list[str], width: int = WIDTH) -> str:
    """Join the lines rich broke at `width` columns (see the module docstring); other breaks stay."""
    if not lines:
        return ""
    joined = [lines[0]]
    for line in lines[1:]:
        prev = joined[-1]
        last = prev.split("\n")[-1]
        first_word = line.split(" ", 1)[0] if line else ""
        cells = cell_len(last)
        word_wrapped = last.endswith(" ") and line[:1] not in ("", " ") and cells + cell_len(first_word) > width
        folded = cells == width and not last.endswith(" ")
        if word_wrapped or folded:
            joined[-1] = prev + line
        else:
            joined[-1] = prev + "\n" + line
    return joined[0]


def parse_log(text: str) -> tuple[list[tuple[str, str, int | None]], dict[str, Any]]:
    """The messages of a transcript as `(role, text, step)` and facts (`version`, `wrap_check`)."""
    text = text.replace("\r\n", "\n")
    found = list(_HEADER.finditer(text))
    messages: list[tuple[str, str, int | None]] = []
    for i, m in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(text)
        body = text[m.end() : end]
        if i + 1 == len(found):  # after the last message: the shell prompt and asciinema's goodbye
            body = body.split("\x1b[?2004h", 1)[0]
        content = unwrap(_clean_lines(body))
        if m.group("step"):
            messages.append(("assistant", content, int(m.group("step"))))
        elif content:  # the empty User header printed after the submission holds nothing
            messages.append(("system" if m.group("role") == "System" else "user", content, None))
    version = VERSION.search(text)
    checked = agreed = 0
    for i, (role, content, _) in enumerate(messages):
        timed = _TIMED_OUT.search(content) if role == "user" else None
        if timed and i > 0 and messages[i - 1][0] == "assistant":
            blocks = MINI_SWE_AGENT_ACTION.findall(messages[i - 1][1])
            if len(blocks) == 1:
                checked += 1
                agreed += blocks[0].strip() == timed.group(1).strip()
    return messages, {
        "version": version.group(1) if version else None,
        "wrap_check": {"checked": checked, "agreed": agreed},
    }


def from_log(text: str, *, run_id: str, context: Mapping[str, Any] | None = None) -> Trajectory:
    """One transcript -> Trajectory (domain terminal; assistant turns keep THOUGHT + bash block).

    Raises:
        InvalidTrajectory: the transcript holds no step (the agent never started: e.g. its install failed).
    """
    parsed, facts = parse_log(text)
    steps = [p for p in parsed if p[0] == "assistant"]
    if not steps:
        reason = (
            "the agent never started (mini: command not found)"
            if "mini: command not found" in text
            else "no step recorded (the agent stopped before its first step)"
        )
        raise InvalidTrajectory(f"mini-swe-agent transcript: {reason}")
    messages = tuple(Message(role, content, extra={"step": step} if step else {}) for role, content, step in parsed)
    ctx = {
        "harness": MINI_SWE_AGENT,
        "format": "mini-swe-agent-log",
        "action_format": "bash_block",
        "fresh_shell": True,
        "command_timeout": MINI_SWE_AGENT_TIMEOUT,
        **dict(context or {}),
        "actions": len(steps),
        "wrap_check": facts["wrap_check"],
    }
    if facts["version"]:
        ctx["agent"] = f"mini-swe-agent {facts['version']}"
    resolved = ctx.get("is_resolved")
    return Trajectory(
        id=run_id,
        domain="terminal",
        messages=messages,
        reward=None if resolved is None else float(bool(resolved)),
        context=ctx,
        source="mini-swe-agent-log",
    )
