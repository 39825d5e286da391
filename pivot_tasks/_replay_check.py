"""Replay fidelity of converted runs (`pivot convert --check-replay`): measured, never assumed.

A sandboxed pivot's state is rebuilt by replaying its history. Whether that state is the one the
agent saw is checked once per run: the run's state-changing actions (up to its last sandboxed
pivot) run in order in one fresh container of the task image, twice, and each action's result is
compared with what the run recorded:

- the exit code, always (an OpenHands editor call: refused or not);
- the output, where the two replays agree with each other (output that changes from run to run,
  such as timestamps, PIDs or temporary names, is no evidence either way) and the recording holds
  it whole (a truncated or elided output is not compared). Outputs (the two replays' with each
  other too) are compared after the differences no state explains: blanks at the ends, CRLF,
  bash's `line N:` in error messages, clock readings (`Aug  8 06:50`, ISO dates, `HH:MM:SS`, durations
  such as pytest's `in 0.01s`), 12-hex-digit container names and the interpreter's patch release
  (`Python 3.9.20`: a rebuilt SWE-bench environment has the machine's), a diff's blob ids past seven
  digits (git abbreviates them by the repository's size), and the order of lines alone (a directory
  listed in the filesystem's order: `find`). An OpenHands editor call is compared by its exit code only (its
  output is the editor's message).

Each command replays the way its harness ran it (`pivot_core.harness_action`, as every sandbox
replay of the pivots does). Each may run `CHECK_TIMEOUT` seconds, or the longest timeout the agent
gave its own commands in the run: a command that waits longer here (a download from a host outside
the registries) is stopped, and the replay diverges there. A mini-swe-agent command the harness
killed at its timeout runs for that timeout and is killed the same way; one that ends by itself
here before it, failing or not, is no divergence by itself (a `pip install` that waited on a
download in the run fails at once here, or completes from the registries' mirror): what it left is
checked by the next observations like any state (the run's next `pip install` of the same package
downloads it, the replay's finds it installed).

The first action whose result differs (typically a command that reached the network during the
run) marks the pivot at that turn and every later pivot of the run `context.replay = {"faithful":
false, "diverged_at": TURN, "reason": ...}`: `docker_shell` judges none of them (they are scored by
the static part of the chain), and the later ones lose their sandbox (`unsandboxed` says why),
never restored to a state that differs from the agent's. The pivot at that turn keeps it, marked
`"state_faithful": true`: its state is the agent's, only its own action's effect is not, so an
episode may start there. The pivots before it get `{"faithful": true}`.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pivot_core import (
    IPYTHON_TOOL,
    KILLED_STATUS,
    MINI_SWE_AGENT,
    MINI_SWE_AGENT_TIMED_OUT,
    OPENHANDS,
    SHELL_TOOLS,
    Message,
    Pivot,
    harness_action,
    mini_swe_agent_action,
    mini_swe_agent_timeout,
    recorded_cell,
    runtime_note,
    shell_actions,
)
from pivot_sandbox import ReplayMark, SandboxContext, SandboxSpec, mask_durations, unsandbox
from pivot_sandbox.errors import SandboxError
from verifiers_plugins import sandbox_backend

_RETURNCODE = re.compile(r"<returncode>(-?\d+)</returncode>")
_OUTPUT = re.compile(r"<output>\n?(.*?)\n?</output>", re.DOTALL)
_PARTIAL = ("<output_head>", "elided", "[... Observation truncated", "<response clipped>", "timed out")
# bash names its script and line in an error ("pivot: line 12: x: command not found"); a terminal says "bash: x: ..."
_BASH_LINE = re.compile(r"^[\w./-]+: line \d+: ", re.M)


@dataclass(frozen=True)
class Step:
    """One recorded action: the turn (message index) it belongs to, its commands, what it recorded."""

    turn: int
    commands: tuple[str, ...]
    exit_code: int | None
    output: str | None
    finished: bool = True  # False: the run moved on while it still ran (OpenHands' -1)
    # the harness killed it at its timeout and the replay kills it the same way (`KILLED_STATUS` then)
    timed_out: bool = False
    written: str = ""  # the command as the agent wrote it, where its harness ran it wrapped ("": `commands`)
    cell: bool = False  # an OpenHands IPython cell, replayed in a kernel-equivalent process (`pivot_core._ipython`)
    # the recording printed tabs as spaces to the next multiple of 8 (mini-swe-agent's agent.log, through rich;
    # OpenHands' shell, read off a tmux pane)
    tabs_expanded: bool = False

    def as_recorded(self, replayed: str) -> str:
        """The replayed output as the recording shows outputs (tabs expanded where it expanded them)."""
        return replayed.expandtabs(8) if self.tabs_expanded else replayed

    @property
    def named(self) -> str:
        """The step's command for a reason: as the agent wrote it, cut at 60 characters, quoted."""
        return repr((self.written or self.commands[-1])[:60])

    def exit_code_differs(self, replayed: int | None) -> bool:
        """The replay's exit code is not the recorded one (-1, a command still running, is no record)."""
        return self.exit_code is not None and self.exit_code != -1 and replayed != self.exit_code

    def ended_early(self, replayed: int | None) -> bool:
        """A command the harness killed at its timeout ended here before it (its own exit code, not killed).

        No divergence by itself (a `pip install` that waited on a download in the run fails at once
        here, or completes from the registries' mirror): what it left is checked by the next observations.
        """
        return self.timed_out and self.exit_code_differs(replayed) and replayed is not None


def _recorded_mini(turn: int, message: Message, answer: Message | None, context: Mapping[str, Any]) -> Step | None:
    commands = harness_action(message, context, answer=answer).commands
    if not commands:
        return None
    written = mini_swe_agent_action(message.content) or ""
    text = answer.text if answer is not None else ""
    if MINI_SWE_AGENT_TIMED_OUT in text:  # killed at its timeout: so is its replay, which exits `KILLED_STATUS`
        return Step(turn, commands, KILLED_STATUS, None, timed_out=True, written=written)
    code = _RETURNCODE.search(text)
    output = _OUTPUT.search(text)
    recorded = output.group(1) if output is not None and not any(mark in text for mark in _PARTIAL) else None
    rendered = context.get("format") == "mini-swe-agent-log"  # printed through rich: tabs became spaces
    return Step(turn, commands, int(code.group(1)) if code else None, recorded, written=written, tabs_expanded=rendered)


def _recorded_cell(turn: int, commands: tuple[str, ...], recorded: Mapping[str, Any], args: Any) -> Step:
    """An IPython cell's step: its exit code and output as the replayed kernel prints them (`recorded_cell`)."""
    text = recorded.get("output") if isinstance(recorded.get("output"), str) else ""
    code, output = recorded_cell(text)
    written = str(args.get("code") or "") if isinstance(args, dict) else ""
    whole = output if not any(mark in text for mark in _PARTIAL) else None
    return Step(turn, commands, code, whole, finished=code is not None, written=written, cell=True)


def recorded_steps(messages: Sequence[Message], context: Mapping[str, Any]) -> list[Step]:
    """The state-changing actions of a run's chat, in order, with what the run recorded for each.

    `context`: the run's pivot context (`harness`, ...): each turn's commands are those its harness
    ran (`harness_action`).
    """
    steps: list[Step] = []
    tools = {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id}
    for i, message in enumerate(messages):
        if message.role != "assistant":
            continue
        if context.get("harness") == MINI_SWE_AGENT:
            step = _recorded_mini(i, message, messages[i + 1] if i + 1 < len(messages) else None, context)
            steps.extend([step] if step is not None else [])
            continue
        for call in message.tool_calls:
            commands = tuple(shell_actions(Message("assistant", tool_calls=(call,))))
            if not commands:
                continue
            recorded = (tools.get(call.id).extra.get("recorded") if tools.get(call.id) else None) or {}
            if call.name == IPYTHON_TOOL:
                steps.append(_recorded_cell(i, commands, recorded, call.parsed_arguments()))
                continue
            output = recorded.get("output")
            # an editor call's output is the editor's own message, not its shell equivalent's: exit code only;
            # a command still running when the agent moved on (-1) had printed part of its output
            code = recorded.get("exit_code")
            whole = call.name in SHELL_TOOLS and isinstance(output, str) and not any(m in output for m in _PARTIAL)
            # OpenHands reads its shell's output off a tmux pane, where a tab is spaces to the next 8-column stop
            # (no tab in any of the 478 command outputs of the public runs; git's `hint:\tgit config` is two spaces)
            tmux = context.get("harness") == OPENHANDS
            recorded_output = output if whole and code != -1 else None
            if tmux and recorded_output is not None:
                args = call.parsed_arguments()
                typed = str(args.get("command") or "") if isinstance(args, dict) else ""
                recorded_output = _without_echo(recorded_output, typed)
            steps.append(Step(i, commands, code, recorded_output, code != -1, tabs_expanded=tmux))
    return steps


def _without_echo(output: str, command: str) -> str:
    """An OpenHands output less the echo of its multi-line command that the tmux pane held before it.

    A command of several lines (`git commit -m "title` then the body's lines, `python -c "` then a script)
    showed in the pane as it was typed, and OpenHands kept those lines as the start of the output in
    13 of the 24 such commands of the public runs (some blank lines of the command left out): the
    command's non-blank lines, in order, at the output's start are the echo, not what it printed.
    """
    wanted = [line.expandtabs(8).rstrip() for line in command.strip().splitlines() if line.strip()]
    if len(wanted) < 2:
        return output
    lines = output.split("\n")
    at = 0
    for want in wanted:
        while at < len(lines) and not lines[at].strip():
            at += 1
        if at == len(lines) or lines[at].rstrip() != want:
            return output
        at += 1
    return "\n".join(lines[at:])


# what differs between the run and any replay whatever the state: clock readings and the container's name;
# date(1)'s own format whole (processing-pipeline's report: `Generated on: Sat Jul 12 00:02:54 UTC 2025`),
# weekday, seconds, zone and year with it, as C's ctime() prints it too
_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_CLOCK = re.compile(
    rf"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)\s+{_MONTH}\s+\d{{1,2}}\s+"
    r"\d\d:\d\d:\d\d(?:\s+(?:[A-Z]{2,5}|[+-]\d{4}))?\s+\d{4}\b"
    rf"|\b{_MONTH}\s+\d{{1,2}}\s+(?:\d\d:\d\d|\d{{4}})\b"
    r"|\b\d{4}-\d\d-\d\d(?:[ T]\d\d:\d\d(?::\d\d(?:\.\d+)?)?)?\b|\b\d\d:\d\d:\d\d\b|\b[0-9a-f]{12}\b"
)


# what the environment prints of itself, not the state: the interpreter's patch release (`Python 3.9.20` in
# SWE-bench's image, the machine's 3.9.18 in its rebuild: pivot_sandbox.swe_image); durations: `mask_durations`
_PYTHON_PATCH = re.compile(r"\b(Python \d+\.\d+)\.\d+\b")
# ... and how it was built and where it runs, as `sys.version` and `platform.platform()` print them (astropy's
# test header: `3.9.20 (main, Oct  3 2024, 07:27:41) [GCC 11.2.0]`, `Linux-6.8.0-1040-aws-x86_64-with-glibc2.35`)
_PYTHON_BUILD = re.compile(r"^\d+\.\d+\.\d+ \((?:main|default|tags/)[^)]*\) *$|^\[(?:GCC|Clang) [^\]]*\]$", re.M)
_PLATFORM = re.compile(r"\bLinux-[\w.+-]+?-(?:x86_64|aarch64)-with-glibc[\d.]+")
# setuptools_scm's local version: the commit abbreviated to as many digits as the repository's size asks (as
# for blob ids, seven are compared) and the date its tree was dirty on (`+gd16bfe05a7.d20241024`)
# pytest's header lists its plugins in the order the environment's metadata is found on disk (installation
# and file system order, not the state): compared as a set
_PYTEST_PLUGINS = re.compile(r"^plugins: (.+)$", re.M)
# a development build's version names the commit checked out (`Sphinx v7.1.0+/71db08c05`, `4.3.0+/f050a7775`):
# upstream's base commit there, the bundle's commit here (the same tree, another id)
_DEV_COMMIT = re.compile(r"(\bv?\d+(?:\.\d+)+\+)/[0-9a-f]{7,40}\b")
# a broken `.pth` of the environment reported by every interpreter start (SWE-bench's pylint 3.0 environment:
# `distutils-precedence.pth` without its `_distutils_hack`): the environment's, on every Python command alike
_BROKEN_PTH = re.compile(r"^Error processing line \d+ of \S+\.pth:\n.*?^Remainder of file ignored\n?", re.M | re.S)
_SCM_LOCAL = re.compile(r"\+g([0-9a-f]{7})[0-9a-f]*(?:\.d\d{8})?")
# a diff's blob ids, abbreviated to as many digits as the repository's size asks (SWE-bench's clone holds the
# whole history, the rebuild one commit): the same blobs, so the first seven digits are compared
_GIT_INDEX = re.compile(r"^(index [0-9a-f]{7})[0-9a-f]*\.\.([0-9a-f]{7})[0-9a-f]*", re.M)


# `ls -l`'s first line counts the blocks the filesystem gave the listed files (a 58-byte file takes 4 KiB on
# ext4, none when a filesystem stores it inline): the sizes on each line are the state's, this sum is not
_LS_TOTAL = re.compile(r"^total \d+$", re.M)


# a directory's link count in an `ls -l` line: the filesystem's, not the state's (overlayfs gives a
# directory of a lower layer 1, ext4 2 plus its subdirectories; its subdirectories show in listings)
_DIR_LINKS = re.compile(r"^(d[rwxsStT-]{9}[.+@]?\s+)\d+(?=\s)", re.M)
# an `ls -l` line: its columns are padded to the widest entry, so a directory's link count of 11 here
# (1 there) widens every line's padding; the blanks between columns are compared as one
_LS_LINE = re.compile(r"^[-dlcbps][rwxsStT-]{9}[.+@]? .*$", re.M)


def _same_output(replayed: str, recorded: str) -> bool:
    """The two outputs are the same but for what no state explains (blanks, CRLF, `line N:`, clocks, link counts).

    Also how the two replays are compared with each other: two listings a minute apart (the
    sandbox's own folder times) still agree, and disagree with a recording that lacks a file.
    """
    return comparable_output(replayed) == comparable_output(recorded)


def comparable_output(text: str) -> str:
    """An output without what no state explains (see `_same_output`): what two replays of one state share."""
    # a lone carriage return (a progress line redrawn) is a new line to mini-swe-agent, whose subprocess reads
    # text with universal newlines: sphinx's `reading sources... [ 50%]` lines come apart in the run's record
    text = _BASH_LINE.sub("bash: ", text.replace("\r\n", "\n").replace("\r", "\n"))
    text = _DEV_COMMIT.sub(r"\1/<commit>", _BROKEN_PTH.sub("", text))
    text = _PYTHON_PATCH.sub(r"\1.<n>", mask_durations(text))
    text = _PYTHON_BUILD.sub("<python build>", _PLATFORM.sub("<platform>", _SCM_LOCAL.sub(r"+g\1", text)))
    text = _PYTEST_PLUGINS.sub(lambda m: "plugins: " + ", ".join(sorted(m.group(1).split(", "))), text)
    text = _LS_TOTAL.sub("total <n>", _GIT_INDEX.sub(r"\1..\2", text))
    text = _LS_LINE.sub(lambda m: " ".join(m.group(0).split()), text)
    return _DIR_LINKS.sub(r"\1<n>", _CLOCK.sub("<t>", text)).strip()


# a compressed archive's size: its members' headers hold their times (tar's mtime, gzip's, gpg's literal
# packet), which are the image build's clock for the files the build made, and the same bytes compress to a
# few bytes more or less (decommissioning-service's `tar -czf` of the image's data: 245 bytes in the
# OpenHands run, 246 in mini-swe-agent's, 247 here); the name, mode, owner and the rest of the line still count
_ARCHIVE = re.compile(r"\.(?:t?gz|tar\.(?:bz2|xz|zst)|tbz2?|txz|bz2|xz|zst|zip|7z|gpg|pgp|asc)$")
ARCHIVE_SLACK = (16, 0.01)  # bytes, share of the larger size: what a clock in the headers moves


def _archive_size(line: str) -> tuple[str, int] | None:
    """(the line without its size, the size) for an `ls -l` line (blanks as one) of a compressed archive."""
    parts = line.split(" ")
    if len(parts) < 6 or not _LS_LINE.fullmatch(line) or not line.startswith("-") or not _ARCHIVE.search(line):
        return None
    if not parts[4].isdigit():
        return None
    return " ".join(parts[:4] + parts[5:]), int(parts[4])


def _same_but_archive_sizes(replayed: list[str], recorded: list[str]) -> bool:
    """Line by line the same, but for compressed archives' sizes within `ARCHIVE_SLACK` of each other."""
    if len(replayed) != len(recorded):
        return False
    for a, b in zip(replayed, recorded, strict=True):
        if a == b:
            continue
        x, y = _archive_size(a), _archive_size(b)
        if x is None or y is None or x[0] != y[0]:
            return False
        if abs(x[1] - y[1]) > max(ARCHIVE_SLACK[0], ARCHIVE_SLACK[1] * max(x[1], y[1])):
            return False
    return True


def _same_lines(replayed: str, recorded: str) -> bool:
    """`_same_output`, or the same lines in another order: the order in which a filesystem lists a directory.

    `find` and `os.listdir` print entries in the order the filesystem keeps them, which differs
    between the run's container and the replay's (overlayfs on another disk) for the same state.
    A compressed archive's size may differ by what the clock in its headers explains (`_ARCHIVE`).
    """
    if _same_output(replayed, recorded):
        return True
    a, b = comparable_output(replayed).split("\n"), comparable_output(recorded).split("\n")
    return sorted(a) == sorted(b) or _same_but_archive_sizes(a, b) or _same_but_archive_sizes(sorted(a), sorted(b))


def first_divergence(steps: Sequence[Step], runs: Sequence[Sequence[Any]]) -> tuple[int, str] | None:
    """(turn, reason) of the first step whose replayed result differs from the recorded one; None when none does.

    `runs` are two transcripts of the steps' commands (`(raw, cwd)` per command, as
    `backend.transcript` returns them; a transcript stops at a command the sandbox stopped).
    """
    first, second = runs
    k = 0
    for step in steps:
        end = k + len(step.commands)
        if end > len(first):
            return step.turn, f"the replay stopped before {step.named}"
        raw, _ = first[end - 1]
        if raw.killed and not step.finished:
            # it did not finish in the run either; nothing after it is replayed (a replay blocker)
            return None
        if raw.killed:
            return step.turn, f"the replay of {step.named} was stopped ({raw.killed})"
        if step.ended_early(raw.exit_code):
            k = end
            continue
        if step.exit_code_differs(raw.exit_code):
            return step.turn, f"exit code {raw.exit_code}, recorded {step.exit_code}: {step.named}"
        if end > len(second):  # the first replay alone decides the two above (`check_replay` replays no further)
            return step.turn, f"the replay stopped before {step.named}"
        out1 = b"".join(r.stdout for r, _ in first[k:end]).decode(errors="replace")
        out2 = b"".join(r.stdout for r, _ in second[k:end]).decode(errors="replace")
        if (
            step.output is not None
            and _same_output(out1, out2)
            and not _same_lines(step.as_recorded(out1), step.output)
        ):
            return step.turn, f"output differs from the recorded one: {step.named}"
        k = end
    return None


# seconds one replayed command may run: the harnesses return to the agent sooner (OpenHands after
# 120 s unless the agent asks for more, mini-swe-agent kills its command), so a command that ran to
# its end in the run did within this; one that waits longer here (a download from a host outside
# the registries) diverges, instead of holding the replay for the sandbox's 900 s
CHECK_TIMEOUT = 300.0


def _exit_code_differs(steps: Sequence[Step]) -> Callable[[int, Any], bool]:
    """`stop` for a transcript of the steps' commands: true after a step whose exit code is a divergence.

    The rule `first_divergence` applies: a killed command that ended early here goes on (`Step.ended_early`).
    """
    last, k = {}, 0  # the index of each step's last command -> the step
    for step in steps:
        k += len(step.commands)
        last[k - 1] = step
    return lambda i, raw: (
        i in last and last[i].exit_code_differs(raw.exit_code) and not last[i].ended_early(raw.exit_code)
    )


def _asked_timeouts(chat: Sequence[Message]) -> list[float]:
    """The timeouts the agent gave its own commands (OpenHands' `execute_bash(timeout=...)`), in seconds."""
    found = []
    for message in chat:
        for call in message.tool_calls:
            args = call.parsed_arguments()
            value = args.get("timeout") if isinstance(args, dict) else None
            if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value <= 3600:
                found.append(float(value))
    return found


def marked(pivot: Pivot, found: tuple[int, str] | None) -> Pivot:
    """The pivot with its `context.replay`, given where its run's replay first diverged (None: nowhere)."""
    turn = int(pivot.context.get("turn_index", 0))
    if found is None or turn < found[0]:
        return dataclasses.replace(pivot, context=ReplayMark(faithful=True).into(pivot.context))
    at, reason = found
    if turn > at:  # its state differs from the agent's
        mark = ReplayMark(faithful=False, diverged_at=at, reason=reason)
        context = unsandbox(mark.into(pivot.context), f"the replay diverged at turn {at}: {reason}")
    else:  # its state is the agent's (an episode may start here); its own action's effect is not
        context = ReplayMark(faithful=False, diverged_at=at, reason=reason, state_faithful=True).into(pivot.context)
    return dataclasses.replace(pivot, context=context)


def _check_run(backend: Any, spec: SandboxSpec | None, steps: Sequence[Step], limit: float) -> tuple[int, str] | None:
    """Replay a run's steps twice in fresh sandboxes at the set-up state: where it first diverges (None: nowhere).

    A divergence at a step that reached the package registries (`pip install numpy`: exit 1 once in
    two benches' concurrent replays, exit 0 alone) is checked once more from the start: a registry's
    hiccup is not the state's. A second divergence stands.
    """
    from pivot_sandbox import needs_network

    found = _replay_twice(backend, spec, steps, limit)
    step = next((s for s in steps if found and s.turn == found[0]), None)
    if step is not None and "could not run" not in found[1] and needs_network(list(step.commands)):
        found = _replay_twice(backend, spec, steps, limit)
    return found


def _replay_twice(
    backend: Any, spec: SandboxSpec | None, steps: Sequence[Step], limit: float
) -> tuple[int, str] | None:
    """`_check_run`'s one attempt: two replays compared with each other and with the recording."""
    commands = [c for s in steps for c in s.commands]
    stop = _exit_code_differs(steps)
    try:
        first = backend.transcript(spec, commands, timeout=limit, stop=stop) if commands else []
        # the second replay stops short of where the first diverged (a command stopped at the time
        # limit, an exit code that differs): the first alone decides there, nothing after it counts
        diverged = bool(first) and (bool(first[-1][0].killed) or stop(len(first) - 1, first[-1][0]))
        again = commands[: len(first) - diverged]
        runs = [first, backend.transcript(spec, again, timeout=limit, stop=stop) if again else []]
        return first_divergence(steps, runs)
    except SandboxError as e:
        return 0, f"the replay could not run: {e}"


def _explained(found: tuple[int, str] | None, steps: Sequence[Step]) -> tuple[int, str] | None:
    """The divergence, with why it is the harness's runtime where the diverging action shows it (`runtime_note`)."""
    step = next((s for s in steps if found is not None and s.turn == found[0]), None)
    if found is None or step is None:
        return found
    return found[0], found[1] + runtime_note(step.written or " ".join(step.commands), step.cell, step.output)


def check_replay(
    pivots: Sequence[Pivot], backend: Any = None, timeout: float = CHECK_TIMEOUT
) -> tuple[list[Pivot], dict[str, Any]]:
    """Mark every sandboxed pivot `context.replay` (see the module docstring); the report.

    The report: `faithful` (pivots), `unfaithful` (pivots), `runs_checked`, `sandboxed` and
    `unsandboxed` (reason -> count, `unsandboxed_counts`) as the check left them, `diverged` (reasons,
    the command part left out, counted per run), `divergences` (`[{run, turn, reason}]`, whole).
    """
    from pivot_tasks._agent_runs import unsandboxed_counts
    from pivot_tasks._synthesize import REPLAY_LIMITS

    # the backend that will judge the pivots replays them (`PIVOT_SANDBOX`, else the machine's default)
    backend = backend or sandbox_backend(**REPLAY_LIMITS)
    by_run: dict[str, list[int]] = {}
    longest: dict[str, Pivot] = {}  # the run's last pivot: its history holds what each action recorded
    for i, p in enumerate(pivots):
        run = str(p.context.get("trajectory_id") or p.id)
        if run not in longest or p.context.get("turn_index", 0) > longest[run].context.get("turn_index", 0):
            longest[run] = p
        if SandboxContext.from_context(p.context) is not None:
            by_run.setdefault(run, []).append(i)
    out = list(pivots)
    reasons: Counter[str] = Counter()
    divergences: list[dict[str, Any]] = []
    for run, indices in by_run.items():
        pivot = pivots[max(indices, key=lambda i: pivots[i].context.get("turn_index", 0))]
        chat = [*longest[run].history, longest[run].expert]
        last_turn = int(pivot.context.get("turn_index", 0))
        steps = [s for s in recorded_steps(chat, longest[run].context) if s.turn <= last_turn]
        # a command the harness killed at its timeout runs that long here: the check lets it
        killed = [mini_swe_agent_timeout(longest[run].context) + 30] if any(s.timed_out for s in steps) else []
        limit = max([timeout, *_asked_timeouts(chat), *killed])
        found = _explained(_check_run(backend, SandboxSpec.from_context(pivot.context), steps, limit), steps)
        if found is not None:
            reasons[found[1].split(":")[0]] += 1
            divergences.append({"run": run, "turn": found[0], "reason": found[1]})
        for i in indices:
            out[i] = marked(pivots[i], found)
    marks = [m for m in (ReplayMark.from_context(p.context) for p in out) if m is not None]
    faithful = sum(1 for m in marks if m.faithful)
    unfaithful = len(marks) - faithful
    report = {
        "runs_checked": len(by_run),
        # after the check: the pivots past a divergence lost their sandbox, and say why
        "sandboxed": sum(SandboxContext.from_context(p.context) is not None for p in out),
        "unsandboxed": unsandboxed_counts(out),
        "faithful": faithful,
        "unfaithful": unfaithful,
        "diverged": dict(reasons.most_common()),
        "divergences": sorted(divergences, key=lambda d: d["run"]),
    }
    return out, report
