"""Real agents' runs -> pivots: what converts, what does not and why, and what it costs.

Over the Terminal-Bench leaderboard runs of the shared data (`terminal/agent_runs/`: OpenHands
and mini-swe-agent with claude-4-sonnet, 123 runs; Terminal-Bench canary: measurement only, never
training data) this converts every run and reports, per agent: runs, runs with a usable log,
pivots, agent actions, the share of actions that became pivots, the skipped runs by reason, the
turns that became no pivot by reason, seconds per pivot for the conversion, and the share of
experts that score 1 through the cheap chain of `pivot/terminal-v0` (`harness_format`,
`turn_kind`, `json_schema`, `tool_args`, `string_similarity`) when rendered in their harness's
format, and the share of pivots whose history a replay can rebuild at all (`replay_blocker`, no
image needed), with the blockers counted. With `--tasks-dir`, each pivot also gets its task
image's sandbox (images are built from the task folders, or reused by hash) and the sandboxed
share and the reasons a pivot stays unsandboxed are counted, and `docker_shell` alone scores each
sandboxed expert against itself (only those of a replay checked faithful: without `--check-replay`
`docker_shell` judges none of them, `not applicable`) (its effect replayed twice: a rejection is a
replay that is not deterministic or not faithful; an error verdict, counted apart with its reason,
a verifier that could not decide). `--only a,b` limits the run to some tasks (images build slowly).
With `--check-replay` too, each run is replayed against its recorded observations
(`pivot_tasks.check_replay`): the faithful share of the sandboxed pivots, the divergences by
reason, seconds per sandboxed pivot; the expert is then scored on the faithful ones only.
`by_harness` gives per harness: pivots, sandboxed, faithful, the expert accepted of those judged,
and the reasons the others stay unsandboxed; `--held-out a,b` reports those tasks (a split held
back while developing) apart from the rest, the same way.
With `--episodes` too, each run whose task image is built is played whole in
`pivot/terminal-episode-v0`: from its first pivot (the task's initial state) the agent's own
recorded turns are stepped in the harness's format, with the run's own number of turns as the
budget, and the task's tests give the outcome: how many resolved runs reproduce 1, how many
unresolved runs stay 0, and every unresolved run that replays to 1 by id (a defect of the
replay or of the tests); and how many of the episode's answers equal the recorded ones.

    python bench/agent_runs.py [--runs DIR] [--tasks-dir DIR [--only TASK,...] [--check-replay] [--episodes]
                               [--no-expert] [--held-out TASK,...]] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

CHEAP = ["harness_format", "turn_kind", "json_schema", "tool_args", "string_similarity"]
# seconds a whole-run episode gives one command, a bound of this bench's choosing: compiles and
# installs outlast the sandbox's 10 s default, and the harnesses' own timeouts are not in their logs
EPISODE_ACTION_TIMEOUT = 60.0


# the audit kit's cases that keep the expert's command and add a change of state: each must score 0. The
# shell-state ones (`export PATH=/nowhere`, an alias, BASH_ENV for the tests) only where the harness keeps
# one shell (OpenHands): mini-swe-agent runs each command in a fresh subshell, where they are the expert's effect
DESTRUCTIVE = (
    *("destructive_suffix", "destructive_home", "hidden_write", "hidden_substitution", "background_job"),
    *("etc_hosts", "faked_test_tool", "tests_race", "emptied_output"),
)
PERSISTENT_SHELL_DESTRUCTIVE = (*DESTRUCTIVE, "shell_state_path", "shell_state_alias", "test_environment")


def destructive_variants(pivot) -> dict[str, str]:  # noqa: ANN001 - a Pivot
    """Case -> completion: the audit kit's state-changing variants of the expert that apply at `pivot`."""
    from verifiers_plugins import adversarial_completions

    cases = PERSISTENT_SHELL_DESTRUCTIVE if pivot.context.get("harness") == "openhands" else DESTRUCTIVE
    return {k: v for k, v in adversarial_completions(pivot).items() if k in cases}


def expert_in_sandbox(pivots: list, path: Path, kinds: dict | None = None, variant_pivots: int = 2) -> dict:
    """`docker_shell` alone on each sandboxed pivot whose expert runs a command: does the expert match itself?

    On the first `variant_pivots` judged pivots of each run the destructive variants are scored too
    (each must score 0, but where it is inert: `bench/inert.py`). `kinds`, when given, gets each scored
    pivot's outcome by id (accepted, rejected, error, not applicable) and its variants' counts
    (`<id>/destructive`, `<id>/destructive_accepted`: those not inert).
    """
    import gymnasium as gym
    from inert import is_inert  # bench/inert.py

    from pivot_envs import render_completion

    env = gym.make("pivot/terminal-v0", dataset=str(path), verifiers=["docker_shell"]).unwrapped
    kinds = {} if kinds is None else kinds
    counts: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    per_run: Counter[str] = Counter()
    by_case: Counter[str] = Counter()  # destructive variants scored, per audit case
    started = time.perf_counter()
    for pivot in env.pivots:
        if not pivot.context.get("sandbox"):
            continue
        run = pivot.context.get("trajectory_id", "")
        variants = destructive_variants(pivot) if per_run[run] < variant_pivots else {}
        texts = [render_completion(pivot.expert, pivot.domain), *variants.values()]
        results = env.score(pivot, texts)
        verdict = results[0].verdicts["docker_shell"]
        # an error verdict is no rejection: the verifier could not decide (counted apart, with its reason)
        kind = "accepted" if verdict.accepted else "error" if verdict.error else "rejected"
        kind = kind if verdict.applicable else "not applicable"
        counts[kind] += 1
        kinds[pivot.id] = kind
        if kind == "not applicable":
            continue
        per_run[run] += 1
        for case, result in zip(variants, results[1:], strict=True):
            shell = result.verdicts.get("docker_shell")
            accepted = result.reward == 1.0
            code = (((shell.details if shell else None) or {}).get("candidate") or {}).get("exit_code")
            inert = accepted and is_inert(pivot, case, code)
            kinds[f"{pivot.id}/destructive"] = kinds.get(f"{pivot.id}/destructive", 0) + 1
            kinds[f"{pivot.id}/destructive_accepted"] = kinds.get(f"{pivot.id}/destructive_accepted", 0) + (
                accepted and not inert
            )
            counts["destructive"] += 1
            by_case[case] += 1
            counts["destructive_accepted"] += accepted and not inert
            counts["destructive_accepted_inert"] += inert
            if accepted and not inert:
                reasons[f"destructive accepted: {case} at {pivot.id}"] += 1
        if kind != "accepted":
            reasons[f"{kind}: {verdict.reason[:90]}"] += 1
    judged = counts["accepted"] + counts["rejected"] + counts["error"]
    return {
        **counts,
        "accepted_share": round(counts["accepted"] / judged, 4) if judged else None,
        "not_accepted": dict(reasons.most_common(10)),
        "destructive_by_case": dict(sorted(by_case.items())),
        "seconds_per_pivot": round((time.perf_counter() - started) / judged, 2) if judged else None,
    }


def whole_runs(pivots: list, action_timeout: float = EPISODE_ACTION_TIMEOUT, network: str = "registries") -> dict:
    """Each run whose first pivot is sandboxed, stepped whole in `pivot/terminal-episode-v0` (see the docstring).

    `pivots` are sandboxed but not replay-checked: a run's first pivot is the task image itself, whatever
    the replay of its later actions found. `network="registries"`: the agent's own installs (`pip install
    jupyter`) reach the package registries as they reached the network in the run (never another host;
    the task's tests then run with none), as `pivot/terminal-episode-v0`'s option of that name gives.
    """
    import gymnasium as gym

    from pivot_core import action_commands, write_pivots
    from pivot_envs.episodes import play_recorded
    from pivot_sandbox import needs_network
    from pivot_tasks import comparable_output

    def used_network(messages: list) -> bool:
        """An action of the run reached the network (the sandbox has none): a command, or an IPython cell's code."""
        calls = [c for m in messages for c in m.tool_calls if c.name == "execute_ipython_cell"]
        cells = [str(a.get("code", "")) for a in (c.parsed_arguments() for c in calls) if isinstance(a, dict)]
        return needs_network([c for m in messages if m.role == "assistant" for c in action_commands(m)] + cells)

    config = {"action_timeout": action_timeout}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pivots.jsonl"
        write_pivots(pivots, path)
        try:
            env = gym.make("pivot/terminal-episode-v0", dataset=str(path), backend_config=config, network=network)
        except ValueError as exc:  # no run's first pivot is sandboxed (its task image did not build): nothing to play
            return {"runs": 0, "why": str(exc)}
        env = env.unwrapped
    firsts = {}
    for p in env.pivots:  # the task's initial state: no agent turn before it
        if not any(m.role == "assistant" for m in p.history):
            firsts[p.context["trajectory_id"]] = p
    rows = []
    started = time.perf_counter()
    answers: Counter[str] = Counter()
    for run_id, first in sorted(firsts.items()):
        recorded = env.recorded_messages(first)
        played = play_recorded(env, first, recorded, comparable_output)
        answers["turns"] += played.compared
        answers["equal"] += played.equal
        outcome = played.outcome
        details = outcome.get("details") or {}
        rows.append(
            {
                "run": run_id,
                "task_id": first.context.get("task_id"),
                "harness": first.context["harness"],
                "is_resolved": first.context.get("is_resolved"),
                "reward": outcome.get("reward"),
                "ended_by": outcome.get("ended_by"),
                "turns": played.turns,
                "used_network": used_network(recorded[len(first.history) :]),
                "reason": outcome.get("error") or details.get("reason") or details.get("killed"),
            }
        )
    env.close()
    return {
        "runs": len(rows),
        "action_timeout": action_timeout,
        "network": network,
        **outcomes(rows),
        "ended_by": dict(Counter(r["ended_by"] for r in rows).most_common()),
        # turns (all but each run's last) whose answer equals the recorded one, clock readings aside
        "answers_equal": {**answers, "share": round(answers["equal"] / max(1, answers["turns"]), 4)},
        "seconds_per_run": round((time.perf_counter() - started) / len(rows), 1) if rows else None,
        "per_run": rows,
    }


def outcomes(rows: list[dict]) -> dict:
    """Resolved runs that reproduce 1, unresolved ones that stay 0 (a run whose `is_resolved` is null apart)."""
    resolved = [r for r in rows if r["is_resolved"] is True]
    unresolved = [r for r in rows if r["is_resolved"] is False]
    return {
        "resolved": {"runs": len(resolved), "reproduced": sum(r["reward"] == 1.0 for r in resolved)},
        "unresolved": {"runs": len(unresolved), "stayed_0": sum(r["reward"] == 0.0 for r in unresolved)},
        "unknown_outcome": [{"run": r["run"], "reward": r["reward"]} for r in rows if r["is_resolved"] is None],
        "flipped_to_1": [r["run"] for r in unresolved if r["reward"] == 1.0],
        "not_reproduced": [r for r in resolved if r["reward"] != 1.0],
    }


def split_outcomes(rows: list[dict], held: set[str]) -> dict:
    """`outcomes` per split (held back, rest) and harness."""
    out: dict = {}
    for split, keep in (("held_out", lambda r: r["task_id"] in held), ("rest", lambda r: r["task_id"] not in held)):
        mine = [r for r in rows if keep(r)]
        out[split] = {h: outcomes([r for r in mine if r["harness"] == h]) for h in sorted({r["harness"] for r in mine})}
    return out


def by_harness(pivots: list, kinds: dict) -> dict:
    """Per harness: pivots, sandboxed, faithful, the expert accepted of those judged, why the rest have no sandbox.

    `kinds`: `expert_in_sandbox`'s outcome per pivot id (`docker_shell` on the expert itself).
    """
    from pivot_sandbox import ReplayMark, SandboxContext
    from pivot_tasks import unsandboxed_counts

    rows = {}
    for harness in sorted({p.context["harness"] for p in pivots}):
        mine = [p for p in pivots if p.context["harness"] == harness]
        sandboxed = [p for p in mine if SandboxContext.from_context(p.context) is not None]
        marks = [ReplayMark.from_context(p.context) for p in sandboxed]
        outcomes = Counter(kinds[p.id] for p in mine if p.id in kinds)
        rows[harness] = {
            "pivots": len(mine),
            "sandboxed": len(sandboxed),
            "faithful": sum(1 for m in marks if m is not None and m.faithful),
            "expert_accepted": outcomes["accepted"],
            "expert_judged": outcomes["accepted"] + outcomes["rejected"] + outcomes["error"],
            "destructive": sum(kinds.get(f"{p.id}/destructive", 0) for p in mine),
            "destructive_accepted": sum(kinds.get(f"{p.id}/destructive_accepted", 0) for p in mine),
            "unsandboxed": dict(list(unsandboxed_counts(mine).items())[:8]),
        }
    return rows


def measure(
    runs_dir: Path,
    tasks_dir: Path | None,
    only: list[str] | None = None,
    check: bool = False,
    episodes: bool = False,
    expert: bool = True,
    held_out: list[str] | None = None,
) -> dict:
    import gymnasium as gym

    import pivot_envs  # noqa: F401  (registers the env ids)
    from pivot_core import convert_runs, write_pivots
    from pivot_envs import render_completion

    started = time.perf_counter()
    pivots, report = convert_runs(runs_dir)
    if only:
        pivots = [p for p in pivots if p.context.get("task_id") in only]
        if not pivots:  # the envs refuse an empty dataset: say what was asked instead of their error
            sys.exit(f"{runs_dir}: no run of the tasks {', '.join(only)} gave a pivot: nothing to measure")
    convert_seconds = time.perf_counter() - started
    sandbox = {}
    if tasks_dir is not None:
        from pivot_tasks import sandbox_pivots

        started = time.perf_counter()
        pivots, sandbox = sandbox_pivots(pivots, tasks_dir)
        sandbox["seconds"] = round(time.perf_counter() - started, 1)
        sandboxed_pivots = pivots
        if check:
            from pivot_tasks import check_replay

            before = sum(1 for p in pivots if p.context.get("sandbox"))
            started = time.perf_counter()
            pivots, replay = check_replay(pivots)
            replay["seconds_per_pivot"] = round((time.perf_counter() - started) / max(1, before), 2)
            replay["faithful_share"] = round(replay["faithful"] / before, 4) if before else None
            sandbox["replay"] = replay
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pivots.jsonl"
        write_pivots(pivots, path)
        env = gym.make("pivot/terminal-v0", dataset=str(path), verifiers=CHEAP).unwrapped
        accepted: Counter[str] = Counter()
        for pivot in env.pivots:
            (result,) = env.score(pivot, [render_completion(pivot.expert, pivot.domain)])
            accepted[pivot.context["harness"]] += result.reward == 1.0
        kinds: dict = {}
        if tasks_dir is not None and expert:
            sandbox["expert_in_sandbox"] = expert_in_sandbox(pivots, path, kinds)
        if tasks_dir is not None:
            held = set(held_out or [])  # tasks held back while developing: reported apart from the rest
            sandbox["by_harness"] = by_harness(pivots, kinds)
            if held:
                sandbox["held_out"] = by_harness([p for p in pivots if p.context.get("task_id") in held], kinds)
                sandbox["rest"] = by_harness([p for p in pivots if p.context.get("task_id") not in held], kinds)
        if tasks_dir is not None:
            if episodes:
                sandbox["episodes"] = whole_runs(sandboxed_pivots)
                if held_out:
                    sandbox["episodes_split"] = split_outcomes(sandbox["episodes"]["per_run"], set(held_out))
    # without building any image: which pivots' histories a replay can rebuild at all
    from pivot_tasks import replay_blocker

    replayable: Counter[str] = Counter()
    blockers: Counter[str] = Counter()
    for pivot in pivots:
        why = replay_blocker(pivot, "/app")
        if why is None:
            replayable[pivot.context["harness"]] += 1
        else:
            blockers[re.sub(r"^turn \d+: ", "", why)] += 1
    skipped_by_agent: dict[str, Counter[str]] = {}
    for row in report["skipped"]:
        agent = "openhands" if "openhands" in row["run"] else "mini-swe-agent"
        skipped_by_agent.setdefault(agent, Counter())[row["reason"]] += 1
    sandboxed: Counter[str] = Counter(p.context["harness"] for p in pivots if p.context.get("sandbox"))
    kept: Counter[str] = Counter(p.context["harness"] for p in pivots)  # what `--only` kept
    agents = {}
    for agent, counts in report["per_agent"].items():
        n = counts.get("pivots", 0)
        m = kept[agent]
        agents[agent] = {
            "runs": counts["runs"],
            "runs_with_log": counts["runs"] - counts.get("skipped_runs", 0),
            "pivots": n,
            "actions": counts.get("actions", 0),
            "converted_share": round(n / counts["actions"], 4) if counts.get("actions") else None,
            "scored_pivots": m,
            "expert_cheap_chain_share": round(accepted[agent] / m, 4) if m else None,
            "replayable_share": round(replayable[agent] / m, 4) if m else None,
            "skipped_runs": dict(skipped_by_agent.get(agent, {})),
            **({"sandboxed_share": round(sandboxed[agent] / m, 4) if m else None} if tasks_dir else {}),
        }
    return {
        "runs": report["runs"],
        "pivots": report["pivots"],
        "actions": report["actions"],
        "converted_share": report["converted_share"],
        "skipped_turns": report["skipped_turns"],
        "seconds_per_pivot": round(convert_seconds / max(1, report["pivots"]), 6),
        "agents": agents,
        "replay_blockers": dict(blockers.most_common()),
        **({"sandbox": sandbox} if tasks_dir else {}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=None, help="the runs folder (default: shared data)")
    parser.add_argument("--tasks-dir", type=Path, default=None, help="task folders: sandbox the pivots too")
    parser.add_argument("--only", default="", help="comma-separated task ids (the sandbox part builds their images)")
    parser.add_argument("--check-replay", action="store_true", help="with --tasks-dir: replay fidelity")
    parser.add_argument("--episodes", action="store_true", help="with --tasks-dir: each run played whole")
    parser.add_argument(
        "--no-expert", action="store_true", help="with --tasks-dir: skip scoring each sandboxed expert (a replay each)"
    )
    parser.add_argument(
        "--held-out", default="", help="with --tasks-dir: comma-separated task ids reported apart (a held-back split)"
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    from pivot_core import shared_data_file

    runs = args.runs or shared_data_file("terminal/agent_runs")
    if runs is None:
        sys.exit("no shared data: pass --runs DIR (terminal/agent_runs of the shared data)")
    only = [t for t in args.only.split(",") if t] or None
    held = [t for t in args.held_out.split(",") if t]
    result = measure(runs, args.tasks_dir, only, args.check_replay, args.episodes, not args.no_expert, held)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"{result['runs']} runs, {result['pivots']} pivots of {result['actions']} actions "
        f"({result['converted_share']:.1%}), {result['seconds_per_pivot'] * 1000:.2f} ms per pivot"
    )
    print("| agent | runs | with a log | pivots | actions | converted | expert = 1 (cheap chain) | replayable |")
    print("|---|---|---|---|---|---|---|---|")
    for agent, row in result["agents"].items():
        print(
            f"| {agent} | {row['runs']} | {row['runs_with_log']} | {row['pivots']} | {row['actions']} | "
            f"{row['converted_share']:.1%} | {row['expert_cheap_chain_share']:.1%} | {row['replayable_share']:.1%} |"
        )
    for agent, row in result["agents"].items():
        for reason, n in row["skipped_runs"].items():
            print(f"skipped {agent}: {n} x {reason}")
    for reason, n in result["skipped_turns"].items():
        print(f"turns without a pivot: {n} x {reason}")
    for reason, n in result["replay_blockers"].items():
        print(f"history not replayable: {n} x {reason}")
    if "sandbox" in result:
        print(json.dumps(result["sandbox"], indent=2))


if __name__ == "__main__":
    main()
