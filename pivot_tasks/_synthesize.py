"""Terminal-Bench oracle solutions -> Terminus expert trajectories with real terminal outputs.

Each task's solution runs command by command in the sandbox; every command becomes one assistant
turn (Terminus JSON with its keystrokes) and its real output the next user turn. The pivots carry
`context.sandbox`, so `docker_shell` can restore their state. With the task folders at hand
(`--tasks-dir`, default `tasks/` beside the JSONL) the solution runs in the task's own image
(`_tasks.task_image`), and replaying it (set-up, not a candidate) gets build-time registry access
(`SandboxSpec.replay_access`): `pip install` in a solution works. A pivot whose expert action itself
needs the network is marked `context.sandbox.expert_needs_network` (no container without a network
can reproduce it: the static part of the chain scores it). Each pivot also carries `context.task`
(the folder, the solution, the test timeout) for `task_tests`. Tasks that need a host outside the
registries, a custom environment, or a folder that cannot build are skipped with one reason; a
solution that reaches such a host only after some commands is synthesized up to that command
(status `partial`, `context.truncated`): the pivots before it have states the sandbox rebuilds, the
pivot at it is scored by the static part of the chain, and `task_tests` skips them all (the expert's
session cannot be finished here, so the tests cannot judge a continuation). A task whose answer the
agent's user can read at the start (`_oracle.py`: blind-maze's ground truth, readable by its root
agent) is reported (`oracle_readable`, per task and in the pivots' context) and its pivots are left
out of the written data unless asked for (`keep_oracle_readable`).
Terminal-Bench data carries a canary: use the output for tests and demos, never training.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pivot_core import Message, Pivot, Trajectory, extract_pivots, iter_jsonl, write_pivots
from pivot_sandbox import (
    HUB_DOWNLOADS,
    NETWORK,
    SandboxContext,
    SandboxSpec,
    docker_backend,
    hosts_in,
    needs_network,
    registry_equivalent,
)
from pivot_sandbox.errors import SandboxError
from pivot_tasks._oracle import oracle_readable

# Words of a command that fetches; a URL in a command without one (a grep pattern, an echo) fetches nothing.
FETCH = re.compile(
    r"\b(curl|wget|aria2c|git\s+(clone|fetch|pull|push|submodule|ls-remote)|urlretrieve|urlopen|requests\.\w+\("
    r"|pip3?\s+install|uv\s+(add|pip|sync|run)|npm|cargo|go\s+get|docker\s+pull)"
)
# Downloads whose host no URL in the command names.
IMPLICIT_HOSTS = (
    HUB_DOWNLOADS,
    (re.compile(r"\bgit\s+clone\s+(?!https?://|git@)\S+/\S+"), "a git remote"),
)
PROMPT = (
    "You are an AI assistant tasked with solving command-line tasks in a Linux environment. You will be given a "
    "task description and the output from previously executed commands. Format your response as JSON with the "
    'fields "analysis", "plan", "commands" (a list of {"keystrokes", "duration"}) and "task_complete".'
)
OUTPUT_CHARS = 4000


def _screen(cwd: str, command: str, output: str) -> str:
    text = output if len(output) <= OUTPUT_CHARS else output[:OUTPUT_CHARS] + "\n[... output truncated]"
    return f"agent@sandbox:{cwd}$ {command}\n{text}".rstrip("\n") + "\n"


def _turn(analysis: str, plan: str, commands: Sequence[str], complete: bool) -> Message:
    body = {
        "analysis": analysis,
        "plan": plan,
        "task_complete": complete,
        "commands": [{"keystrokes": c + "\n", "duration": 1.0} for c in commands],
    }
    return Message("assistant", json.dumps(body, ensure_ascii=False), extra={"synthesized": True})


def terminus_messages(
    instruction: str, workdir: str, steps: Sequence[tuple[str, int, str, str]], cut_at: str | None = None
) -> list[Message]:
    """The Terminus chat of a session: steps are (command, exit code, output, cwd after).

    The chat ends with a turn that declares the task done; with `cut_at` (the command the session
    could not run here) it ends with the turn that runs it instead, and no output after it.
    """
    messages = [
        Message(
            "user",
            f"{PROMPT}\n\nTask Description:\n{instruction}\n\nCurrent terminal state:\nagent@sandbox:{workdir}$ ",
        )
    ]
    cwd = workdir
    for i, (command, _code, output, after) in enumerate(steps):
        messages.append(
            _turn(_analysis(steps, i), f"Step {i + 1} of the solution: run `{command[:200]}`.", [command], False)
        )
        messages.append(Message("user", "New Terminal Output:\n\n" + _screen(cwd, command, output)))
        cwd = after or cwd
    if cut_at is not None:
        i = len(steps)
        messages.append(
            _turn(_analysis(steps, i), f"Step {i + 1} of the solution: run `{cut_at[:200]}`.", [cut_at], False)
        )
        return messages
    messages.append(
        _turn(
            f"The last command finished with exit status {steps[-1][1]}; the task is done.",
            "No further commands are needed.",
            [],
            True,
        )
    )
    return messages


def _analysis(steps: Sequence[tuple[str, int, str, str]], i: int) -> str:
    if i == 0:
        return "The terminal is ready and nothing has run yet."
    return f"The previous command finished with exit status {steps[i - 1][1]}."


def skip_reason(record: Mapping[str, Any], registries: frozenset[str] | None = None) -> str | None:
    """Why a task cannot run here, None when it may.

    Without `registries` (a stock image, no registry access) any network use is a reason; with
    them (the task's own image, replay with registry access) only a host beyond them is.
    """
    if record.get("env_name"):
        return f"needs the custom environment {record['env_name']!r}"
    commands = record.get("solution_commands") or []
    if not commands:
        return "no solution commands"
    for i, command in enumerate(commands):
        if reason := command_skip_reason(command, registries):
            return f"solution command {i + 1} {reason}"
    return None


def command_skip_reason(command: str, registries: frozenset[str] | None) -> str | None:
    """Why one solution command cannot run here ("needs HOST, outside the registries: ..."), None when it may."""
    if registries is None:
        m = NETWORK.search(command)
        return f"needs the network ({m.group(0)!r} in {command.strip()[:60]!r})" if m else None
    hosts = hosts_in(command, registries) if FETCH.search(command) else []
    if hosts:
        return f"needs {hosts[0]}, outside the registries: {command.strip()[:60]!r}"
    for word, host in IMPLICIT_HOSTS:
        if m := word.search(command):
            return f"needs {host} ({m.group(0).strip()!r}): {command.strip()[:60]!r}"
    return None


def synthesize_task(
    record: Mapping[str, Any],
    spec: SandboxSpec,
    backend: Any,
    task: Mapping[str, Any] | None = None,
    registries: frozenset[str] | None = None,
    timeout: float | None = None,
) -> tuple[Trajectory | None, str]:
    """Run one task's solution; (trajectory, "") on success, (None, reason) when skipped.

    `task` (the task folder's `context.task`) and `registries` are given when the solution runs in
    the task's own image with registry access. `timeout` bounds each command (default: the backend's
    replay timeout): a command still running then is a skip, since every pivot's state after it
    would have to replay it again.
    """
    if spec.replay_access:
        record = {
            **record,
            "solution_commands": [registry_equivalent(c) for c in record.get("solution_commands") or []],
        }
    registries = registries if spec.replay_access else None
    commands = [c for c in record.get("solution_commands") or [] if c.strip()]
    # In the task's own image a solution may run up to a command that needs a host outside the
    # registries: the session is synthesized up to it (the pivots before it have states we rebuild).
    cut, why = (None, "") if registries is None or record.get("env_name") else _first_unreachable(commands, registries)
    if cut is None or cut == 0:
        reason = skip_reason(record, registries)
        if reason:
            return None, reason
    truncated = None
    if cut is not None:
        reason = f"solution command {cut + 1} {why}"
        if all(needs_network([c]) for c in commands[:cut]):
            # every pivot before the cut would be scored statically: nothing of this task executes
            return None, f"{reason}; every command before it needs the network"
        truncated = {"at_command": cut + 1, "reason": reason}
    runs = backend.transcript(spec, commands[:cut] if cut is not None else commands, timeout=timeout)
    steps, reason = _session_steps(runs, commands, spec, timeout)
    if reason:
        return None, reason
    task_id = str(record.get("task_id") or record.get("id"))
    context: dict[str, Any] = {"format": "terminus", "task_id": task_id, "synthesized": True}
    context = SandboxContext(spec).into(context)
    if task:
        context["task"] = {**task, "solution": commands}
    if truncated:
        context["truncated"] = truncated
    if record.get("canary_guid"):
        context["canary_guid"] = record["canary_guid"]  # contamination marker: tests and demos only
    cut_at = commands[cut] if cut is not None else None
    traj = Trajectory(
        id=f"synth/{record.get('id') or task_id}",
        domain="terminal",
        messages=tuple(terminus_messages(record.get("instruction", ""), spec.workdir, steps, cut_at)),
        reward=1.0,
        context=context,
        source=str(record.get("source", "")),
    )
    return traj, ""


def _first_unreachable(commands: Sequence[str], registries: frozenset[str]) -> tuple[int | None, str]:
    """The index of the first command that needs a host outside the registries, and why; (None, "") when none."""
    for i, command in enumerate(commands):
        if why := command_skip_reason(command, registries):
            return i, why
    return None, ""


def _session_steps(
    runs: Sequence[tuple[Any, str]], commands: Sequence[str], spec: SandboxSpec, timeout: float | None
) -> tuple[list[tuple[str, int, str, str]], str]:
    """(command, exit code, output, cwd) of each command the solution ran, and "", or ([], why the task is skipped)."""
    steps = []
    for i, (raw, cwd) in enumerate(runs):
        output = raw.stdout.decode(errors="replace")
        if raw.killed == "timeout":
            bound = f"{timeout:.0f} s" if timeout else "the replay timeout"
            return [], f"command {i + 1} ({commands[i].strip()[:60]!r}) still ran after {bound}: the session hangs"
        if raw.killed:
            return [], f"command {i + 1} was stopped by the sandbox ({raw.killed})"
        if raw.exit_code != 0 and not spec.replay_access:
            tail = output.strip().splitlines()[-1][:80] if output.strip() else ""
            return [], f"command {i + 1} exited {raw.exit_code} (task files missing?): {tail}"
        # In the task's own image a failing command is part of the oracle's session (`pkill` of a process
        # that is not there, a solution.sh without `set -e`): kept, with its status in the next turn;
        # whether the session solved the task is the tests' call (`task_tests.oracle_check`).
        steps.append((commands[i], raw.exit_code, output, cwd))
    return steps, ""


def task_spec(record: Mapping[str, Any], image: str) -> SandboxSpec:
    """The sandbox of a task: the base image, the record's own `setup` (if any), /app as working directory."""
    shell = "/bin/sh" if "busybox" in image else "/bin/bash"
    return SandboxSpec(
        image=image, setup=tuple(record.get("setup") or ()), workdir=record.get("workdir", "/app"), shell=shell
    )


# Replaying a solution is set-up: generous limits (package installs), never those of a candidate.
REPLAY_LIMITS = {"memory": "2g", "pids": 1024, "replay_timeout": 900.0}


def synthesize(
    records: Sequence[Mapping[str, Any]], image: str, backend: Any = None, tasks_dir: Path | None = None
) -> Iterator[dict[str, Any]]:
    """Yield one report row per task: `{task_id, status, reason?, trajectory?, image?}`.

    With `tasks_dir`, a task whose folder is there (Terminal-Bench's or Harbor's) runs in its own image
    (built or reused by hash);
    the others, and every task without `tasks_dir`, run in `image`.
    """
    for record in records:
        task_id = str(record.get("task_id") or record.get("id"))
        row: dict[str, Any] = {"task_id": task_id}
        try:
            folder = Path(tasks_dir) / task_id if tasks_dir else None
            if folder is not None and ((folder / "task.yaml").is_file() or (folder / "task.toml").is_file()):
                traj, reason, row["image"] = _in_task_image(record, folder, backend)
            else:
                traj, reason = synthesize_task(record, task_spec(record, image), backend or docker_backend())
        except SandboxError as e:
            traj, reason = None, f"sandbox: {e}"
        if traj is None:
            yield {**row, "status": "skipped", "reason": reason}
        elif truncated := traj.context.get("truncated"):
            yield {**row, "status": "partial", "reason": truncated["reason"], "trajectory": traj}
        else:
            yield {**row, "status": "ok", "trajectory": traj}


def _in_task_image(record: Mapping[str, Any], folder: Path, backend: Any) -> tuple[Trajectory | None, str, str]:
    """Synthesize one task in the image built from its folder: (trajectory, reason, image)."""
    from pivot_sandbox import load_task, registry_hosts, task_context, task_image

    backend = backend or docker_backend(**REPLAY_LIMITS)
    task = load_task(folder)
    built = task_image(backend.client, task)
    if built.status == "skipped":
        return None, f"image: {built.reason}", ""
    spec = SandboxSpec(
        image=built.image,
        setup=tuple(record.get("setup") or ()),
        workdir=built.workdir if built.workdir != "/" else record.get("workdir", "/app"),
        user="root" if built.user in ("", "root", "0") else built.user,
        shell="/bin/bash",
        replay_access=True,
        services=built.services,  # a compose task's other services, started beside each container
    )
    meta = task_context(task)  # the folder, the test timeout, a Harbor task's container limits
    # one command of the oracle session may take what the task gives the whole agent (Terminal-Bench's bound)
    timeout = min(backend.limits.replay_timeout, task.agent_timeout)
    traj, reason = synthesize_task(record, spec, backend, meta, registry_hosts(), timeout)
    found = oracle_readable(backend, spec, folder, task.instruction) if traj is not None else []
    if traj is not None and found:
        traj = dataclasses.replace(traj, context={**traj.context, "oracle_readable": found})
    return traj, reason, built.image


def mark_network_pivots(pivots: Sequence[Pivot]) -> list[Pivot]:
    """Pivots whose expert action needs the network get `context.sandbox.expert_needs_network`."""
    from pivot_core import action_commands, history_commands

    out = []
    for pivot in pivots:
        sandbox = SandboxContext.from_context(pivot.context)
        cut = (pivot.context.get("truncated") or {}).get("at_command")
        # the pivot at a cut runs what no container here can: a host outside the registries
        at_cut = cut is not None and len(history_commands(pivot)) == cut - 1
        services = [s.name for s in sandbox.spec.services] if sandbox is not None else []
        if sandbox is not None and (at_cut or needs_network(action_commands(pivot.expert), services)):
            context = dataclasses.replace(sandbox, expert_needs_network=True).into(pivot.context)
            pivot = dataclasses.replace(pivot, context=context)
        out.append(pivot)
    return out


def _needs_network(pivot: Pivot) -> bool:
    sandbox = SandboxContext.from_context(pivot.context)
    return sandbox is not None and sandbox.expert_needs_network


def default_tasks_dir(src: Path) -> Path | None:
    """The `tasks/` folder beside a task JSONL, None when there is none."""
    folder = Path(src).parent / "tasks"
    return folder if folder.is_dir() else None


def synthesize_file(
    src: Path,
    out: Path,
    *,
    image: str,
    limit: int | None = None,
    tasks_dir: Path | None = None,
    only: Sequence[str] = (),
    check_tests: bool = False,
    keep_oracle_readable: bool = False,
) -> dict[str, Any]:
    """Synthesize every task of a JSONL file and write the pivots; returns the report.

    `tasks_dir` defaults to the `tasks/` folder beside `src`; `only` keeps the named tasks. With
    `check_tests`, each synthesized task's row says whether its tests fail on the initial state and
    pass after the oracle solution (`tests_before`, `tests_after`: None with `tests_reason` when
    they cannot run). Tasks whose answer the agent can read (`oracle_readable` in the report) give
    no pivots unless `keep_oracle_readable`.
    """
    records = [rec for _, rec in iter_jsonl(Path(src))]
    if only:
        records = [r for r in records if str(r.get("task_id") or r.get("id")) in set(only)]
    records = records[: limit or None]
    rows = list(synthesize(records, image, tasks_dir=tasks_dir or default_tasks_dir(src)))
    return write_synthesis(rows, src, out, check_tests=check_tests, keep_oracle_readable=keep_oracle_readable)


def write_synthesis(
    rows: Sequence[dict[str, Any]],
    src: Path,
    out: Path,
    *,
    check_tests: bool = False,
    keep_oracle_readable: bool = False,
) -> dict[str, Any]:
    """Write the pivots of synthesized rows (`synthesize`'s) to `out`; the report (see `synthesize_file`)."""
    rows = list(rows)
    kept = [
        r
        for r in rows
        if r["status"] in ("ok", "partial")
        and (keep_oracle_readable or not r["trajectory"].context.get("oracle_readable"))
    ]
    pivots: list[Pivot] = mark_network_pivots([p for r in kept for p in extract_pivots(r["trajectory"])])
    write_pivots(pivots, out)
    if check_tests:
        from pivot_sandbox import oracle_check, verification_backend

        for r in rows:
            # a partial row's oracle_check says why its tests cannot judge it (context.truncated)
            if r["status"] in ("ok", "partial") and r["trajectory"].context.get("task"):
                check = oracle_check(r["trajectory"].context, verification_backend)
                r["tests_before"], r["tests_after"] = check.get("before"), check.get("after")
                r["tests_reason"] = check.get("after_reason") or check.get("reason", "")
    tasks = [{k: v for k, v in r.items() if k != "trajectory"} for r in rows]
    for task, r in zip(tasks, rows, strict=True):
        if "trajectory" in r:
            task["oracle_readable"] = list(r["trajectory"].context.get("oracle_readable") or [])
    ok = sum(r["status"] == "ok" for r in rows)
    return {
        "input": str(src),
        "output": str(out),
        "total": len(rows),
        "succeeded": ok,
        "partial": sum(r["status"] == "partial" for r in rows),
        "pivots": len(pivots),
        "network_pivots": sum(_needs_network(p) for p in pivots),
        # tasks whose answer the agent's user can read: reported, and their pivots left out by default
        "oracle_readable": {t["task_id"]: t["oracle_readable"] for t in tasks if t.get("oracle_readable")},
        "tasks": tasks,
    }


def bundle(tasks_dir: Path, records: Sequence[Mapping[str, Any]], out: Path) -> dict[str, Any]:
    """Synthesize the package's own tasks (`pivot_core/data/terminal_tasks/`) into `out` with portable contexts.

    A content-hash tag depends on this machine's base images, so the written pivots name the stable
    `pivot-gym/task:<task id>` (built on first use from the bundled folder: `_tasks.ensure_image`) and
    `bundled:<task id>` as their task folder.
    """
    rows = list(synthesize(records, "", tasks_dir=tasks_dir))
    failed = [f"{r['task_id']}: {r['reason']}" for r in rows if r["status"] != "ok"]
    if failed:
        raise SandboxError("bundled tasks must all synthesize: " + "; ".join(failed))
    pivots = []
    for pivot in mark_network_pivots([p for r in rows for p in extract_pivots(r["trajectory"])]):
        task_id = pivot.context["task"]["task_id"]
        sandbox = SandboxContext.from_context(pivot.context)
        assert sandbox is not None  # every synthesized pivot has one
        spec = dataclasses.replace(sandbox.spec, image=f"pivot-gym/task:{task_id}")
        context = dataclasses.replace(sandbox, spec=spec).into(pivot.context)
        task = {**pivot.context["task"], "dir": f"bundled:{task_id}"}
        pivots.append(dataclasses.replace(pivot, context={**context, "task": task}))
    write_pivots(pivots, out)
    return {"tasks": [r["task_id"] for r in rows], "pivots": len(pivots)}
