"""Terminal-Bench oracle solutions -> Terminus expert trajectories with real terminal outputs.

Each task's solution runs command by command in the sandbox; every command becomes one assistant
turn (Terminus JSON with its keystrokes) and its real output the next user turn. The pivots carry
`context.sandbox`, so `docker_shell` can restore their state. Tasks that need the network, a
custom environment, or files their (unshipped) Dockerfile would have made are skipped with a
reason. Terminal-Bench data carries a canary: use the output for tests and demos, never training.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pivot_envs._formats import write_pivots
from pivot_envs._jsonl import iter_jsonl
from pivot_envs._model import Message, Pivot, Trajectory
from pivot_envs._pivots import extract_pivots
from verifiers_plugins.sandbox._plugin import docker_backend
from verifiers_plugins.sandbox._spec import SandboxError, SandboxSpec

NETWORK = re.compile(
    r"\b(pip3?\s+install|uv\s+(add|init|run|pip)|apt(-get)?\s+(install|update)|curl|wget|git\s+(clone|fetch|pull|push)"
    r"|npm|cargo\s+(install|build)|conda|huggingface|from_pretrained|urlretrieve|load_dataset|ssh|scp|docker)\b"
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


def terminus_messages(instruction: str, workdir: str, steps: Sequence[tuple[str, int, str, str]]) -> list[Message]:
    """The Terminus chat of a session: steps are (command, exit code, output, cwd after)."""
    messages = [
        Message(
            "user",
            f"{PROMPT}\n\nTask Description:\n{instruction}\n\nCurrent terminal state:\nagent@sandbox:{workdir}$ ",
        )
    ]
    cwd = workdir
    for i, (command, _code, output, after) in enumerate(steps):
        analysis = (
            "The terminal is ready and nothing has run yet."
            if i == 0
            else f"The previous command finished with exit status {steps[i - 1][1]}."
        )
        messages.append(_turn(analysis, f"Step {i + 1} of the solution: run `{command[:200]}`.", [command], False))
        messages.append(Message("user", "New Terminal Output:\n\n" + _screen(cwd, command, output)))
        cwd = after or cwd
    messages.append(
        _turn(
            f"The last command finished with exit status {steps[-1][1]}; the task is done.",
            "No further commands are needed.",
            [],
            True,
        )
    )
    return messages


def skip_reason(record: Mapping[str, Any]) -> str | None:
    """Why a task cannot run offline in a stock image, None when it may."""
    if record.get("env_name"):
        return f"needs the custom environment {record['env_name']!r}"
    commands = record.get("solution_commands") or []
    if not commands:
        return "no solution commands"
    for command in commands:
        m = NETWORK.search(command)
        if m:
            return f"needs the network ({m.group(0)!r} in {command.strip()[:60]!r})"
    return None


def synthesize_task(record: Mapping[str, Any], spec: SandboxSpec, backend: Any) -> tuple[Trajectory | None, str]:
    """Run one task's solution; (trajectory, "") on success, (None, reason) when skipped."""
    reason = skip_reason(record)
    if reason:
        return None, reason
    commands = [c for c in record["solution_commands"] if c.strip()]
    runs = backend.transcript(spec, commands)
    steps = []
    for i, (raw, cwd) in enumerate(runs):
        output = raw.stdout.decode(errors="replace")
        if raw.killed:
            return None, f"command {i + 1} was stopped by the sandbox ({raw.killed})"
        if raw.exit_code != 0:
            tail = output.strip().splitlines()[-1][:80] if output.strip() else ""
            return None, f"command {i + 1} exited {raw.exit_code} (task files missing?): {tail}"
        steps.append((commands[i], raw.exit_code, output, cwd))
    task_id = str(record.get("task_id") or record.get("id"))
    context = {
        "format": "terminus",
        "task_id": task_id,
        "synthesized": True,
        "sandbox": {
            "image": spec.image,
            "setup": list(spec.setup),
            "workdir": spec.workdir,
            "shell": spec.shell,
            "user": spec.user,
        },
    }
    if record.get("canary_guid"):
        context["canary_guid"] = record["canary_guid"]  # contamination marker: tests and demos only
    traj = Trajectory(
        id=f"synth/{record.get('id') or task_id}",
        domain="terminal",
        messages=tuple(terminus_messages(record.get("instruction", ""), spec.workdir, steps)),
        reward=1.0,
        context=context,
        source=str(record.get("source", "")),
    )
    return traj, ""


def task_spec(record: Mapping[str, Any], image: str) -> SandboxSpec:
    """The sandbox of a task: the base image, the record's own `setup` (if any), /app as working directory."""
    shell = "/bin/sh" if "busybox" in image else "/bin/bash"
    return SandboxSpec(
        image=image, setup=tuple(record.get("setup") or ()), workdir=record.get("workdir", "/app"), shell=shell
    )


def synthesize(records: Sequence[Mapping[str, Any]], image: str, backend: Any = None) -> Iterator[dict[str, Any]]:
    """Yield one report row per task: `{task_id, status, reason?, trajectory?}`."""
    backend = backend or docker_backend()
    for record in records:
        task_id = str(record.get("task_id") or record.get("id"))
        try:
            traj, reason = synthesize_task(record, task_spec(record, image), backend)
        except SandboxError as e:
            traj, reason = None, f"sandbox: {e}"
        if traj is None:
            yield {"task_id": task_id, "status": "skipped", "reason": reason}
        else:
            yield {"task_id": task_id, "status": "ok", "trajectory": traj}


def synthesize_file(src: Path, out: Path, *, image: str, limit: int | None = None) -> dict[str, Any]:
    """Synthesize every task of a JSONL file and write the pivots; returns the report."""
    records = [rec for _, rec in iter_jsonl(Path(src))][: limit or None]
    rows = list(synthesize(records, image))
    pivots: list[Pivot] = [p for r in rows if r["status"] == "ok" for p in extract_pivots(r["trajectory"])]
    write_pivots(pivots, out)
    tasks = [{k: v for k, v in r.items() if k != "trajectory"} for r in rows]
    ok = sum(r["status"] == "ok" for r in rows)
    return {
        "input": str(src),
        "output": str(out),
        "total": len(rows),
        "succeeded": ok,
        "pivots": len(pivots),
        "tasks": tasks,
    }
