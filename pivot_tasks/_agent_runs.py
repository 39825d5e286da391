"""Sandbox contexts for pivots converted from real agents' runs (`pivot convert --tasks-dir`).

A run's pivots get the sandbox `pivot synthesize` gives a task: the image built from the task's
own folder (`task_image`, reused by content hash), its working directory and user, registry
access for the replay. `docker_shell` restores a pivot's state by running the set-up and then the
state-changing actions of its history (shell commands, OpenHands editor calls as the shell
commands that make the same file change: `pivot_core._editor`).

Each command replays the way its harness ran it (`pivot_core.harness_action`): OpenHands' in one
shell whose `cd` and `export` persist; mini-swe-agent's each in a fresh subshell from the
harness's working directory, and one the harness killed at its timeout run for that timeout and
killed the same way (whether the state it left is the run's is the replay check's to say).

A pivot whose history holds an action a replay cannot reproduce is left unsandboxed, with the
reason in `context.unsandboxed` (it and every later pivot of the run: their histories hold it):
OpenHands' IPython cells with a magic no replay runs (`pivot_core._ipython`; the others replay in a
kernel-equivalent process), `undo_edit` (the editor's own history), input sent
to a running process (`is_input`), a command still running when the agent moved on (exit code -1:
its process is not replayed).

Such pivots are scored by the static part of the chain, as pivots without a sandbox are.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pivot_core import IPYTHON_TOOL, MINI_SWE_AGENT_TIMED_OUT, Pivot, ipython_refusal, runtime_setup
from pivot_sandbox import RunFacts, SandboxContext, SandboxSpec
from pivot_sandbox.errors import SandboxError
from pivot_tasks._synthesize import REPLAY_LIMITS, mark_network_pivots

_REPLAYED_EDITS = ("view", "create", "str_replace", "insert")
# (the sandbox, what the pivots' context gets beside it, "") or (None, {}, why there is none)
Sandbox = tuple[SandboxSpec | None, dict[str, Any], str]


def task_sandbox(folder: Path, backend: Any) -> tuple[SandboxSpec | None, dict[str, Any], str]:
    """(the sandbox, context.task, "") for a task folder, or (None, {}, reason) when it gives none."""
    from pivot_sandbox import load_task, task_context, task_image

    if not (folder / "task.yaml").is_file() and not (folder / "task.toml").is_file():  # Terminal-Bench's or Harbor's
        return None, {}, f"no task folder {folder.name!r} under the tasks folder"
    task = load_task(folder)
    built = task_image(backend.client, task)
    if built.status == "skipped":
        return None, {}, f"image not built: {built.reason}"
    spec = SandboxSpec(
        image=built.image,
        workdir=built.workdir if built.workdir != "/" else "/app",
        shell="/bin/bash",
        user="root" if built.user in ("", "root", "0") else built.user,
        replay_access=True,
        services=built.services,  # a compose task's other services, started beside each container
    )
    meta = task_context(task)  # the folder, the test timeout, a Harbor task's container limits
    return spec, meta, ""


def with_runtime_files(spec: SandboxSpec, files: Sequence[Mapping[str, str]]) -> SandboxSpec:
    """The spec whose set-up also makes what the harness's runtime left (`context.runtime_files`).

    Made before the history, as root, so they are part of every restored state, the expert's and
    each candidate's alike, and in no action's change set (`pivot_core._openhands_runtime`).
    """
    setup, env = runtime_setup(files)
    if not setup:
        return spec
    return dataclasses.replace(spec, setup=(*spec.setup, *setup), env={**spec.env, **env})


def replay_blocker(pivot: Pivot, workdir: str) -> str | None:
    """Why the pivot's state cannot be rebuilt by replaying its history, None when it can.

    `workdir`: where the harness's shell starts (kept for callers; no blocker depends on it now).
    """
    codes = RunFacts.from_context(pivot.context).exit_codes
    turn = 0
    for message in pivot.history:
        if message.role != "assistant":
            continue
        turn += 1
        for call in message.tool_calls:
            args = call.parsed_arguments() if isinstance(call.parsed_arguments(), dict) else {}
            refused = ipython_refusal(args.get("code") or "") if call.name == IPYTHON_TOOL else None
            if refused:
                return f"turn {turn}: an IPython cell: {refused}"
            if call.name == "str_replace_editor" and args.get("command") not in (
                "view",
                "create",
                "str_replace",
                "insert",
            ):
                return f"turn {turn}: str_replace_editor {args.get('command')!r} (the editor's history is not replayed)"
            if call.name == "execute_bash" and str(args.get("is_input", "")).lower() == "true":
                return f"turn {turn}: input sent to a running process (is_input)"
            if codes.get(call.id) == -1:
                return f"turn {turn}: a command was still running when the agent moved on (exit -1)"
    for call in pivot.expert.tool_calls:
        args = call.parsed_arguments() if isinstance(call.parsed_arguments(), dict) else {}
        if call.name == "execute_bash" and str(args.get("is_input", "")).lower() == "true":
            return "the expert sends input to a running process (is_input)"
        if call.name == IPYTHON_TOOL and (refused := ipython_refusal(args.get("code") or "")):
            return f"the expert's IPython cell: {refused}"
    return None


def unfinished_expert(pivot: Pivot, later: Pivot | None) -> str | None:
    """Why the expert's own command did not finish in the run; None when it finished or cannot be told.

    Read from `later`, a pivot of the same run whose history holds the expert's turn and what came
    back: mini-swe-agent killed it at its timeout; OpenHands moved on while it still ran (exit -1).
    """
    codes = RunFacts.from_context(pivot.context).exit_codes
    if any(codes.get(call.id) == -1 for call in pivot.expert.tool_calls):
        return "the expert's command was still running when the agent moved on (exit -1)"
    at = len(pivot.history)
    if later is None or len(later.history) <= at + 1 or list(later.history)[: at + 1] != [*pivot.history, pivot.expert]:
        return None
    answer = later.history[at + 1]
    if (
        pivot.context.get("harness") == "mini-swe-agent"
        and answer.role == "user"
        and MINI_SWE_AGENT_TIMED_OUT in answer.text
    ):
        return "the expert's command timed out in the run and was killed"
    return None


def mark_unfinished_experts(pivots: Sequence[Pivot]) -> list[Pivot]:
    """Sandboxed pivots whose expert's own command did not finish in the run get `sandbox.expert_unfinished`.

    What a command killed at a timeout did is no reference for any candidate's effect (a `vim` that
    waited on a terminal: two different commands stopped the same way look alike), so `docker_shell`
    does not judge these; the static part of the chain does.
    """

    def run_of(pivot: Pivot) -> str:
        return str(pivot.context.get("trajectory_id") or pivot.context.get("run"))

    by_run: dict[str, list[Pivot]] = {}
    for pivot in pivots:
        by_run.setdefault(run_of(pivot), []).append(pivot)
    out = []
    for pivot in pivots:
        sandbox = SandboxContext.from_context(pivot.context)
        longer = [q for q in by_run[run_of(pivot)] if len(q.history) > len(pivot.history) + 1]
        why = unfinished_expert(pivot, min(longer, key=lambda q: len(q.history), default=None))
        if sandbox is not None and why:
            context = dataclasses.replace(sandbox, expert_unfinished=why).into(pivot.context)
            pivot = dataclasses.replace(pivot, context=context)
        out.append(pivot)
    return out


def sandbox_pivots(pivots: Sequence[Pivot], tasks_dir: Path, backend: Any = None) -> tuple[list[Pivot], dict[str, Any]]:
    """The pivots with `context.sandbox` (and `context.task`) where their state can be rebuilt; the report.

    The report: `sandboxed` (count), `images` (`{task_id: image or reason}`), `unsandboxed`
    (reasons counted, the run-level part of each reason kept).
    """
    from pivot_sandbox import docker_backend

    backend = backend or docker_backend(**REPLAY_LIMITS)
    by_task: dict[str, Sandbox] = {}
    for task_id in sorted({str(p.context.get("task_id")) for p in pivots if p.context.get("task_id")}):
        try:
            by_task[task_id] = task_sandbox(Path(tasks_dir) / task_id, backend)
        except SandboxError as e:
            by_task[task_id] = (None, {}, f"image not built: {e}")
    return apply_sandboxes(pivots, by_task, "task_id", "task")


def apply_sandboxes(
    pivots: Sequence[Pivot], sandboxes: Mapping[str, Sandbox], key: str, meta_key: str
) -> tuple[list[Pivot], dict[str, Any]]:
    """Give each pivot the sandbox of `sandboxes[context[key]]` (and its facts as `context[meta_key]`); the report.

    A pivot whose history a replay cannot rebuild (`replay_blocker`) gets `unsandboxed` instead; the
    report: `sandboxed` (count), `images` (`{name: image or reason}`), `unsandboxed` (reasons
    counted, the run-level part of each reason kept), `expert_needs_network`, `expert_unfinished`.
    """
    out: list[Pivot] = []
    for pivot in pivots:
        spec, meta, why = sandboxes.get(str(pivot.context.get(key)), (None, {}, f"the run names no {key}"))
        if spec is not None:
            why = replay_blocker(pivot, spec.workdir) or ""
        facts = RunFacts.from_context(pivot.context)
        if why:
            context = dataclasses.replace(facts, unsandboxed=why).into(pivot.context)
        else:
            assert spec is not None  # a task without a sandbox always says why
            if facts.start_dir and facts.start_dir != spec.workdir:
                spec = dataclasses.replace(spec, start_dir=facts.start_dir)  # the harness's shell started elsewhere
            spec = with_runtime_files(spec, pivot.context.get("runtime_files") or [])
            context = {**SandboxContext(spec).into(pivot.context), meta_key: meta}
        out.append(dataclasses.replace(pivot, context=context))
    out = mark_unfinished_experts(mark_network_pivots(out))
    marks = [m for m in (SandboxContext.from_context(p.context) for p in out) if m is not None]
    report = {
        "sandboxed": len(marks),
        "expert_needs_network": sum(m.expert_needs_network for m in marks),
        "expert_unfinished": sum(bool(m.expert_unfinished) for m in marks),
        "images": {t: (s.image if s else why) for t, (s, _, why) in sandboxes.items()},
        "unsandboxed": unsandboxed_counts(out),
    }
    return out, report


def unsandboxed_counts(pivots: Sequence[Pivot]) -> dict[str, int]:
    """Why the pivots without a sandbox have none (`context.unsandboxed`), counted most common first.

    A reason is counted without its turn and the command it quotes (`the replay diverged at turn 8:
    output differs from the recorded one: 'ls -la'` counts as `the replay diverged: output differs
    from the recorded one`), so that one kind of reason is one row over many runs.
    """
    reasons: Counter[str] = Counter()
    for pivot in pivots:
        why = RunFacts.from_context(pivot.context).unsandboxed
        if why and SandboxContext.from_context(pivot.context) is None:
            why = re.sub(r" at turn \d+", "", re.sub(r"^turn \d+: ", "", why))
            reasons[re.sub(r": ['\"].*$", "", why, flags=re.S)] += 1  # the command, quoted either way
    return dict(reasons.most_common())
