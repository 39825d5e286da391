"""Real agents' runs on Terminal-Bench tasks: find them, read them, and report what became pivots.

A *run* is one log: an OpenHands event stream (`agent-logs/<id>.json`), a mini-swe-agent
transcript (`sessions/agent.log`) or an ATIF `trajectory.json`. In a Terminal-Bench trial folder
the log sits beside `results.json`, which gives the pivots' `context`: `task_id`, `run` (the
trial's name) and `is_resolved`. A trial folder without a log is a skipped run, with its reason.
"""

from __future__ import annotations

import fnmatch
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pivot_core._harnesses import HARNESSES, MINI_SWE_AGENT, OPENHANDS, TERMINUS
from pivot_core._model import Message, Pivot, Trajectory
from pivot_core._pivots import extract_pivots
from pivot_core.convert import atif, harbor_trials, mini_swe_agent, mini_swe_agent_log, openhands
from pivot_core.convert._documents import read_document
from pivot_core.convert.mini_swe_agent import FORMAT_ERROR
from pivot_core.errors import DataFileError, InvalidTrajectory

RUN_FORMATS = ("openhands", "mini-swe-agent-log", "atif")
# mini-swe-agent's own `<instance>.traj.json` (its SWE-bench runs), `<instance>.report.json` beside it; read
# as runs when a command says so (`pivot convert --swe-instances`): a converted mini-swe-agent JSONL is a
# trajectory file, not a run
TRAJ_JSON = "mini-swe-agent"
HARNESS_OF = {"openhands": OPENHANDS, "mini-swe-agent-log": MINI_SWE_AGENT, TRAJ_JSON: MINI_SWE_AGENT}
REJECTED = "the harness rejected the turn (format error): no action"


@dataclass(frozen=True)
class Run:
    """One run found under a folder: its log (None when the trial recorded none) and its trial's facts."""

    name: str
    log: Path | None
    format: str | None
    context: Mapping[str, Any] = field(default_factory=dict)
    missing: str = ""


def trial_context(folder: Path) -> dict[str, Any]:
    """`task_id`, `run`, `is_resolved` (and the instruction) from a trial folder's `results.json`; {} without one.

    A Harbor trial folder (`result.json` beside `agent/`, `verifier/`) gives `task_id`, `run` and the
    verifier's float as `trial_reward` (`harbor_trials.py`).
    """
    if harbor_trials.is_harbor_trial(folder) and not (folder / "results.json").is_file():
        return harbor_trials.harbor_trial_context(folder)
    path = folder / "results.json"
    if not path.is_file():
        return {}
    data = read_document(path)  # bounded, and a bad file is a DataFileError naming it
    if not isinstance(data, dict):
        return {}
    out = {"task_id": data.get("task_id"), "run": data.get("trial_name") or folder.name}
    if data.get("is_resolved") is not None:
        out["is_resolved"] = bool(data["is_resolved"])
    return {k: v for k, v in out.items() if v is not None}


def sniff(path: Path) -> str | None:
    """The run format of one log file by its name and content, None when it is none of them."""
    if path.suffix == ".log":
        head = path.read_bytes().decode("utf-8", errors="replace")
        return "mini-swe-agent-log" if mini_swe_agent_log.detect_log(head) else None
    if path.suffix != ".json":
        return None
    try:
        data = read_document(path)
    except DataFileError:
        return None
    if isinstance(data, list) and data and isinstance(data[0], Mapping) and openhands.detect(data[0]):
        return "openhands"
    if isinstance(data, Mapping) and atif.detect(data):
        return "atif"
    return None


def _trial_log(folder: Path) -> Path | None:
    for pattern in ("agent-logs/*.json", "sessions/agent.log", "agent/trajectory.json", "trajectory.json"):
        found = sorted(folder.glob(pattern))
        if found:
            return found[0]
    return None


def swe_run(log: Path) -> Run:
    """One mini-swe-agent `<instance>.traj.json`, its SWE-bench report (`resolved`) beside it when there is one."""
    name = log.name.removesuffix(".traj.json")
    report = log.with_name(f"{name}.report.json")
    data = read_document(report) if report.is_file() else None
    resolved = data.get("resolved") if isinstance(data, Mapping) else None
    return Run(name, log, TRAJ_JSON, {"resolved": resolved} if isinstance(resolved, bool) else {})


def _found(src: Path, pattern: str) -> list[Path]:
    """Files under `src` whose name matches `pattern`, sorted; linked folders followed (each real folder once).

    `Path.rglob` does not enter a symlinked folder, and job folders are often links to where runs were
    written (`runs/latest -> runs/2025-11-19__10-22`): those runs would be silently missing.
    """
    out, seen = [], set()
    for root, dirs, files in os.walk(src, followlinks=True):
        real = os.path.realpath(root)
        if real in seen:  # a link back up the tree, or two links to one folder
            dirs[:] = []
            continue
        seen.add(real)
        out += [Path(root) / f for f in files if fnmatch.fnmatch(f, pattern)]
    return sorted(out)


def find_runs(src: Path, fmt: str | None = None) -> list[Run]:
    """The runs of a file or a folder (trial folders hold `results.json`; other `trajectory.json` are ATIF runs).

    `fmt` "mini-swe-agent": the `*.traj.json` files of mini-swe-agent's own SWE-bench runs (`swe_run`).
    """
    src = Path(src)
    if fmt == TRAJ_JSON:
        return [swe_run(p) for p in (_found(src, "*.traj.json") if src.is_dir() else [src])]
    if src.is_file():
        folder = src.parent.parent if src.parent.name in ("agent-logs", "sessions", "agent") else src.parent
        ctx = trial_context(folder)
        return [Run(ctx.get("run") or src.stem, src, fmt or sniff(src), ctx)]
    runs: list[Run] = []
    trials = sorted(p.parent for p in _found(src, "results.json"))
    # Harbor's trial folders (`result.json` beside agent/ and verifier/; the job's own result.json is none)
    trials += sorted(p.parent for p in _found(src, "result.json") if harbor_trials.is_harbor_trial(p.parent))
    for folder in trials:
        ctx = trial_context(folder)
        log = _trial_log(folder)
        name = ctx.get("run") or folder.name
        if log is None:
            results = "results.json" if (folder / "results.json").is_file() else "result.json"  # TB1's, Harbor's
            runs.append(Run(name, None, None, ctx, f"the trial folder holds {results} but no agent log"))
        else:
            runs.append(Run(name, log, fmt or sniff(log), ctx))
    inside = {r.log for r in runs}
    for log in _found(src, "trajectory.json"):
        if log not in inside and not any(t in log.parents for t in trials):
            runs.append(Run(log.parent.name, log, fmt or sniff(log), trial_context(log.parent)))
    return runs


def read_run(run: Run) -> Trajectory:
    """The Trajectory of one run (raises InvalidTrajectory / DataFileError with the reason)."""
    if run.log is None:
        raise InvalidTrajectory(run.missing)
    ctx = dict(run.context)
    task = ctx.get("task_id") or "run"
    if run.format == "openhands":
        data = read_document(run.log)
        if not isinstance(data, list):
            raise InvalidTrajectory("expected a JSON list of OpenHands events")
        return openhands.from_openhands(data, run_id=f"openhands/{task}/{run.name}", context=ctx)
    if run.format == "mini-swe-agent-log":
        text = run.log.read_bytes().decode("utf-8", errors="replace")
        return mini_swe_agent_log.from_log(text, run_id=f"mini-swe-agent/{task}/{run.name}", context=ctx)
    if run.format == TRAJ_JSON:
        data = read_document(run.log)
        if not isinstance(data, Mapping):
            raise InvalidTrajectory("expected one mini-swe-agent trajectory (a JSON object)")
        return mini_swe_agent.from_mini_swe_agent({**data, **ctx}, default_id=f"mini-swe-agent/{run.name}")
    if run.format == "atif":
        data = read_document(run.log)
        if not isinstance(data, Mapping):
            raise InvalidTrajectory("expected one ATIF JSON object")
        traj = atif.from_atif(data, default_id=run.name, context=ctx)
        return traj
    if run.log.suffix == ".log":
        raise InvalidTrajectory("a terminal transcript with no agent step in it (the agent's install never finished)")
    raise InvalidTrajectory(f"not a run log this reads ({', '.join(RUN_FORMATS)}): {run.log.name}")


def agent_of(run: Run) -> str:
    """The agent a run belongs to: its format's harness, else the folder names (a trial with no usable log)."""
    if run.format in HARNESS_OF:
        return HARNESS_OF[run.format]
    path = str(run.log or "") + " " + " ".join(str(v) for v in run.context.values())
    for name in (*HARNESSES, TERMINUS):
        if name in path:
            return name
    return run.format or "unknown"


def rejected_turn(trajectory: Trajectory, index: int, message: Message) -> bool:
    """A mini-swe-agent turn answered by its format error: the agent saw it, but it is no action."""
    nxt = trajectory.messages[index + 1] if index + 1 < len(trajectory.messages) else None
    return nxt is not None and nxt.role == "user" and nxt.text.lstrip().startswith(FORMAT_ERROR)


def run_pivots(trajectory: Trajectory) -> tuple[list[Pivot], Counter[str]]:
    """The pivots of a run, and the turns that became none, counted by reason."""
    skipped: Counter[str] = Counter()

    def skip(traj: Trajectory, index: int, message: Message) -> bool:
        if rejected_turn(traj, index, message):
            skipped[REJECTED] += 1
            return True
        return False

    pivots = list(extract_pivots(trajectory, skip=skip))
    actions = int(trajectory.context.get("actions", 0))
    others = actions - len(pivots) - sum(skipped.values())
    if others > 0:
        skipped["an empty turn (no text, no call)"] += others
    return pivots, skipped


def convert_runs(
    src: Path, fmt: str | None = None, progress: Callable[[Run], None] | None = None
) -> tuple[list[Pivot], dict[str, Any]]:
    """Every pivot of the runs under `src`, and the report (`runs`, `pivots`, `skipped`, per agent, timings)."""
    pivots: list[Pivot] = []
    skipped: list[dict[str, str]] = []
    turns: Counter[str] = Counter()
    per_agent: dict[str, Counter[str]] = {}
    started = time.perf_counter()
    runs = find_runs(src, fmt)
    for run in runs:
        agent = agent_of(run)
        counts = per_agent.setdefault(agent, Counter())
        counts["runs"] += 1
        try:
            traj = read_run(run)
        except (InvalidTrajectory, DataFileError) as e:
            skipped.append({"run": run.name, "reason": str(e)})
            counts["skipped_runs"] += 1
        else:
            found, why = run_pivots(traj)
            pivots.extend(found)
            turns.update(why)
            counts["pivots"] += len(found)
            counts["actions"] += int(traj.context.get("actions", 0))
        if progress is not None:
            progress(run)
    seconds = time.perf_counter() - started
    actions = sum(c["actions"] for c in per_agent.values())
    report = {
        "input": str(src),
        "runs": len(runs),
        "pivots": len(pivots),
        "actions": actions,
        "converted_share": round(len(pivots) / actions, 4) if actions else None,
        "skipped": skipped,
        "skipped_turns": dict(turns),
        "per_agent": {k: dict(v) for k, v in sorted(per_agent.items())},
        "seconds_per_pivot": round(seconds / len(pivots), 6) if pivots else None,
    }
    return pivots, report


def iter_file_pivots(path: Path, fmt: str) -> Iterator[Pivot]:
    """The pivots of one run file (what `load_pivots(path, format=fmt)` reads)."""
    (run,) = find_runs(path, fmt)
    try:
        traj = read_run(run)
    except InvalidTrajectory as e:
        raise DataFileError(str(path), None, str(e)) from e
    yield from run_pivots(traj)[0]
