"""Real agents' runs -> pivots: what converts, what does not and why, and what it costs.

Over the Terminal-Bench leaderboard runs of the shared data (`terminal/agent_runs/`: OpenHands
and mini-swe-agent with claude-4-sonnet, 123 runs; Terminal-Bench canary: measurement only, never
training data) this converts every run and reports, per agent: runs, runs with a usable log,
pivots, agent actions, the share of actions that became pivots, the skipped runs by reason, the
turns that became no pivot by reason, seconds per pivot for the conversion, and the share of
experts that score 1 through the cheap chain of `pivot/terminal-v0` (`harness_format`,
`turn_kind`, `json_schema`, `tool_args`, `string_similarity`) when rendered in their harness's
format. With `--tasks-dir`, each pivot also gets its task image's sandbox (images are built from
the task folders, or reused by hash) and the sandboxed share and the reasons a pivot stays
unsandboxed are counted. Replay fidelity (`--check-replay`) is not measured here.

    python bench/agent_runs.py [--runs DIR] [--tasks-dir DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

CHEAP = ["harness_format", "turn_kind", "json_schema", "tool_args", "string_similarity"]


def measure(runs_dir: Path, tasks_dir: Path | None) -> dict:
    import gymnasium as gym

    import pivot_envs  # noqa: F401  (registers the env ids)
    from pivot_core import convert_runs, write_pivots
    from pivot_envs import render_completion

    started = time.perf_counter()
    pivots, report = convert_runs(runs_dir)
    convert_seconds = time.perf_counter() - started
    sandbox = {}
    if tasks_dir is not None:
        from pivot_tasks import sandbox_pivots

        started = time.perf_counter()
        pivots, sandbox = sandbox_pivots(pivots, tasks_dir)
        sandbox["seconds"] = round(time.perf_counter() - started, 1)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pivots.jsonl"
        write_pivots(pivots, path)
        env = gym.make("pivot/terminal-v0", dataset=str(path), verifiers=CHEAP).unwrapped
        accepted: Counter[str] = Counter()
        for pivot in env.pivots:
            (result,) = env.score(pivot, [render_completion(pivot.expert, pivot.domain)])
            accepted[pivot.context["harness"]] += result.reward == 1.0
    skipped_by_agent: dict[str, Counter[str]] = {}
    for row in report["skipped"]:
        agent = "openhands" if "openhands" in row["run"] else "mini-swe-agent"
        skipped_by_agent.setdefault(agent, Counter())[row["reason"]] += 1
    sandboxed: Counter[str] = Counter(p.context["harness"] for p in pivots if p.context.get("sandbox"))
    agents = {}
    for agent, counts in report["per_agent"].items():
        n = counts.get("pivots", 0)
        agents[agent] = {
            "runs": counts["runs"],
            "runs_with_log": counts["runs"] - counts.get("skipped_runs", 0),
            "pivots": n,
            "actions": counts.get("actions", 0),
            "converted_share": round(n / counts["actions"], 4) if counts.get("actions") else None,
            "expert_cheap_chain_share": round(accepted[agent] / n, 4) if n else None,
            "skipped_runs": dict(skipped_by_agent.get(agent, {})),
            **({"sandboxed_share": round(sandboxed[agent] / n, 4) if n else None} if tasks_dir else {}),
        }
    return {
        "runs": report["runs"],
        "pivots": report["pivots"],
        "actions": report["actions"],
        "converted_share": report["converted_share"],
        "skipped_turns": report["skipped_turns"],
        "seconds_per_pivot": round(convert_seconds / max(1, report["pivots"]), 6),
        "agents": agents,
        **({"sandbox": sandbox} if tasks_dir else {}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=None, help="the runs folder (default: shared data)")
    parser.add_argument("--tasks-dir", type=Path, default=None, help="task folders: sandbox the pivots too")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    from pivot_core import shared_data_file

    runs = args.runs or shared_data_file("terminal/agent_runs")
    if runs is None:
        sys.exit("no shared data: pass --runs DIR (terminal/agent_runs of the shared data)")
    result = measure(runs, args.tasks_dir)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"{result['runs']} runs, {result['pivots']} pivots of {result['actions']} actions "
        f"({result['converted_share']:.1%}), {result['seconds_per_pivot'] * 1000:.2f} ms per pivot"
    )
    print("| agent | runs | with a log | pivots | actions | converted | expert = 1 (cheap chain) |")
    print("|---|---|---|---|---|---|---|")
    for agent, row in result["agents"].items():
        print(
            f"| {agent} | {row['runs']} | {row['runs_with_log']} | {row['pivots']} | {row['actions']} | "
            f"{row['converted_share']:.1%} | {row['expert_cheap_chain_share']:.1%} |"
        )
    for agent, row in result["agents"].items():
        for reason, n in row["skipped_runs"].items():
            print(f"skipped {agent}: {n} x {reason}")
    for reason, n in result["skipped_turns"].items():
        print(f"turns without a pivot: {n} x {reason}")
    if "sandbox" in result:
        print(json.dumps(result["sandbox"], indent=2))


if __name__ == "__main__":
    main()
