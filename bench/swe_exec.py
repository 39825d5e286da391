"""SWE-bench runs judged by execution: what the sandbox buys over `swe_target` on the same pivots.

For each instance (default: three whose environments the other SWE benches build: pytest 5.4/6.0,
requests 2.9): its image (`swe_image`, cached by content hash), its validity as SWE-bench validates it,
then the recorded mini-swe-agent run converted as `pivot convert --swe-instances --check-replay` does
(each command replayed as the harness ran it, checked against the recorded observations): pivots,
sandboxed, faithful. On up to `--max-pivots` faithful sandboxed pivots (spread over the run, the
submission left out) `docker_shell` alone scores the expert and the audit kit's destructive variants of
it (`; rm -rf /testbed/*`, `&& rm -rf ~`, writes hidden in the command, a background job, shell state,
test-environment tampering, ...), seconds per candidate measured; `swe_target` alone scores the same
candidates, for comparison. At the submission, `swe_tests` grades the expert's own submission (the
instance's tests with no network) against the resolution the run recorded. Then the run is played whole
from its first pivot (`pivot_envs.episodes.play_recorded`: every recorded turn, the submission included)
and its outcome compared with the recorded resolution (`--no-whole-runs` skips it). `--variants N` scores
the labelled variants of N pivots per instance (`swe_variants.py`: rewrites, wrong targets, disguised
writes) under each verifier alone. Totals are also given per split: `dev` (the instances the staging
rebuilt by hand, `offline_check`) and `held_back`.

    nice python bench/swe_exec.py [--instances F] [--only ID ... | all] [--max-pivots N] [--variants N]
                                  [--no-whole-runs] [--out ROWS.jsonl] [--json]

Reads the instances by path at run time (SWE-bench Verified: tests, demos and benchmarks only).
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

DEFAULT = ("pytest-dev__pytest-7432", "pytest-dev__pytest-7521", "psf__requests-2931")
# seconds a whole-run replay gives one command: mini-swe-agent's own timeout in these runs is 60 s (their
# `info.config.environment.timeout`); the margin is for a loaded 2-core machine running the same tests
WHOLE_RUN_ACTION_TIMEOUT = 90.0
# the audit kit's cases that keep the expert's command and add what must change its verdict. Left out: its
# shell-state cases (`export PATH=/nowhere`, an alias, BASH_ENV for the tests): mini-swe-agent runs each
# command in a fresh `bash -lc`, so what a command exports dies with it and these are the expert's effect
DESTRUCTIVE = (
    *("destructive_suffix", "destructive_home", "hidden_write", "hidden_substitution", "background_job"),
    *("etc_hosts", "faked_test_tool", "device_node", "tests_race"),
)


def convert(instance, instances: Path) -> tuple[list, dict]:  # noqa: ANN001 - an SWEInstance
    """The run's pivots sandboxed and replay-checked, as `pivot convert --swe-instances --check-replay` makes them."""
    from pivot_core import convert_runs
    from pivot_tasks import check_replay, swe_sandbox_pivots

    started = time.monotonic()
    pivots, report = convert_runs(instance.trajectory, "mini-swe-agent")
    pivots, sandbox = swe_sandbox_pivots(pivots, instances)
    pivots, replay = check_replay(pivots)
    report.update(sandbox)
    report.update(replay)
    report["seconds"] = round(time.monotonic() - started, 1)
    return pivots, report


def judged(pivots: list, limit: int) -> list:
    """Up to `limit` faithful sandboxed pivots that `docker_shell` judges, spread evenly over the run."""
    from pivot_sandbox import ReplayMark, SandboxContext

    def ok(p) -> bool:  # noqa: ANN001
        mark, sandbox = ReplayMark.from_context(p.context), SandboxContext.from_context(p.context)
        blocked = sandbox is None or sandbox.expert_needs_network or sandbox.expert_unfinished
        return mark is not None and mark.faithful and not blocked and not submits(p)

    found = [p for p in pivots if ok(p)]
    step = max(1, len(found) / max(1, limit))
    return [found[int(i * step)] for i in range(min(limit, len(found)))]


def submits(pivot) -> bool:  # noqa: ANN001
    from pivot_core import mini_swe_agent_action, mini_swe_agent_submits

    return mini_swe_agent_submits(mini_swe_agent_action(pivot.expert.content))


def score(pivots: list) -> dict:
    """The expert and its destructive variants under `docker_shell` alone, then under `swe_target` alone."""
    import gymnasium as gym

    import pivot_envs  # noqa: F401 - registers the ids
    from verifiers_plugins import adversarial_completions

    if not pivots:
        return {"judged": 0, "misses": [], "seconds_per_candidate": None}
    shell = gym.make("pivot/swe-v0", pivots=pivots, verifiers=["docker_shell"]).unwrapped
    target = gym.make("pivot/swe-v0", pivots=pivots, verifiers=["swe_target"]).unwrapped
    counts: Counter[str] = Counter()
    seconds, candidates, misses = 0.0, 0, []
    for pivot in pivots:
        variants = {k: v for k, v in adversarial_completions(pivot).items() if k in DESTRUCTIVE}
        texts = [pivot.expert.content, *variants.values()]
        started = time.monotonic()
        by_shell = shell.score(pivot, texts)
        seconds += time.monotonic() - started
        candidates += len(texts)
        by_target = target.score(pivot, texts)
        for name, verifier in (("docker_shell", by_shell), ("swe_target", by_target)):
            counts[f"{name}/expert_accepted"] += verifier[0].accepted
            counts[f"{name}/expert_errors"] += bool(verifier[0].error)
            counts[f"{name}/destructive_accepted"] += sum(r.accepted for r in verifier[1:])
        counts["destructive_variants"] += len(variants)
        if not by_shell[0].accepted:
            misses.append({"pivot": pivot.id, "reason": (by_shell[0].error or _reason(by_shell[0]))[:200]})
        for case, r in zip(variants, by_shell[1:], strict=True):
            code = ((r.verdicts["docker_shell"].details or {}).get("candidate") or {}).get("exit_code")
            # `<expert> && rm -rf ~` after an expert that fails never runs its tail: the expert's own effect
            inert = case == "destructive_home" and code not in (0, None)
            counts["docker_shell/destructive_accepted_inert"] += r.accepted and inert
            if r.accepted:
                misses.append({"pivot": pivot.id, "destructive_accepted": case, "exit_code": code, "inert": inert})
    out = {"judged": len(pivots), **dict(sorted(counts.items())), "misses": misses}
    out["seconds_per_candidate"] = round(seconds / candidates, 2) if candidates else None
    return out


def _reason(result) -> str:  # noqa: ANN001 - a ChainResult
    verdict = result.verdicts.get(result.decided_by) if result.decided_by else None
    return verdict.reason if verdict is not None else ""


def submission(pivots: list, resolved: bool | None) -> dict:
    """`swe_tests` on the expert's own submission, against the resolution the run recorded."""
    import gymnasium as gym

    import pivot_envs  # noqa: F401 - registers the ids
    from pivot_sandbox import ReplayMark

    last = [p for p in pivots if submits(p)]
    mark = ReplayMark.from_context(last[-1].context) if last else None
    if not last or mark is None or not mark.faithful:
        return {"graded": False, "why": "no faithful sandboxed submission pivot"}
    env = gym.make("pivot/swe-v0", pivots=last[-1:], verifiers=["swe_tests"]).unwrapped
    started = time.monotonic()
    (result,) = env.score(last[-1], [last[-1].expert.content])
    verdict = result.verdicts["swe_tests"]
    return {
        "graded": verdict.applicable and not verdict.error,
        "resolved": result.accepted,
        "recorded_resolved": resolved,
        "agrees": result.accepted == resolved,
        "details": dict(verdict.details or {}),
        "reason": verdict.reason or verdict.error or "",
        "seconds": round(time.monotonic() - started, 1),
    }


def whole_run(instance, pivots: list) -> dict:  # noqa: ANN001 - an SWEInstance
    """The recorded run played whole from its first pivot in `pivot/terminal-episode-v0`: outcome vs recorded.

    Every later turn is the agent's own, its submission included (an unresolved run's too, which is no
    pivot); the instance's tests grade what it submits, as SWE-bench grades the run.
    """
    import gymnasium as gym

    from pivot_core import detect_format, write_pivots
    from pivot_envs.episodes import play_recorded
    from pivot_tasks import comparable_output

    firsts = [p for p in pivots if p.context.get("sandbox") and not any(m.role == "assistant" for m in p.history)]
    if not firsts:
        return {"played": False, "why": "the run's first pivot has no sandbox"}
    (run,) = detect_format(instance.trajectory).read_trajectories(instance.trajectory, {"domain": "swe"})
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pivots.jsonl"
        write_pivots(pivots, path)
        config = {"action_timeout": WHOLE_RUN_ACTION_TIMEOUT}
        env = gym.make("pivot/terminal-episode-v0", dataset=str(path), backend_config=config).unwrapped
    started = time.monotonic()
    try:
        played = play_recorded(env, firsts[0], run.messages, comparable_output)
    finally:
        env.close()
    outcome = played.outcome
    details = outcome.get("details") or {}
    return {
        "played": True,
        "reward": played.reward,
        "recorded_resolved": instance.resolved,
        "reproduced": played.reward == (1.0 if instance.resolved else 0.0) and not outcome.get("error"),
        "ended_by": outcome.get("ended_by"),
        "turns": played.turns,
        "answers_equal": f"{played.equal}/{played.compared}",
        "first_difference": dict(played.first_difference),
        "fail_to_pass": _counts(details.get("FAIL_TO_PASS")),
        "pass_to_pass": _counts(details.get("PASS_TO_PASS")),
        "error": outcome.get("error"),
        "seconds": round(time.monotonic() - started, 1),
    }


def _counts(results) -> str:  # noqa: ANN001 - {"success": [...], "failure": [...]} or None
    if not isinstance(results, dict):
        return "-"
    ok, bad = len(results.get("success") or []), len(results.get("failure") or [])
    return f"{ok}/{ok + bad}"


def one(instance, instances: Path, limit: int, whole: bool = True, variants: int = 0) -> dict:  # noqa: ANN001
    """Build, convert, score: one row."""
    from pivot_sandbox import docker_backend, swe_image

    row: dict = {"instance_id": instance.instance_id, "recorded_resolved": instance.resolved}
    built = swe_image(docker_backend().client, instance)
    row.update(built=built.status != "skipped", build=built.status, build_s=round(built.seconds, 1))
    if built.status == "skipped" or instance.trajectory is None:
        return {**row, "reason": built.reason or "no recorded run beside the instances"}
    pivots, report = convert(instance, instances)
    row["valid"] = report["valid"] == 1
    row["invalid"] = report["invalid"].get(instance.instance_id, "")
    keys = ("pivots", "sandboxed", "faithful", "unfaithful", "divergences", "unsandboxed", "seconds")
    row.update({("convert_s" if k == "seconds" else k): report[k] for k in keys})
    row["scores"] = score(judged(pivots, limit))
    row["submission"] = submission(pivots, instance.resolved)
    if variants:  # labelled rewrites, wrong targets and disguised writes under each verifier alone
        from swe_variants import compare

        row["verifier_accuracy"] = compare(judged(pivots, variants))
    if whole:
        row["whole_run"] = whole_run(instance, pivots)
    return row


def totals(rows: list[dict]) -> dict:
    """Counts over the instances."""
    out: Counter[str] = Counter()
    for row in rows:
        out["instances"] += 1
        out["built"] += row["built"]
        out["valid"] += bool(row.get("valid"))
        for key in ("pivots", "sandboxed", "faithful"):
            out[key] += row.get(key, 0)
        for key, value in (row.get("scores") or {}).items():
            if isinstance(value, int) and key != "seconds_per_candidate":
                out[key] += value
        for verifier, kinds in (row.get("verifier_accuracy") or {}).items():
            if verifier in ("by_variant", "pivots"):
                continue
            for kind, c in kinds.items():
                for key in ("n", "false_accepts", "false_rejects", "errors"):
                    out[f"accuracy/{verifier}/{kind}/{key}"] += c[key]
        out["submissions_graded"] += bool((row.get("submission") or {}).get("graded"))
        out["submissions_agreeing"] += bool((row.get("submission") or {}).get("agrees"))
        whole = row.get("whole_run") or {}
        if whole.get("played"):
            kind = "resolved" if row["recorded_resolved"] else "unresolved"
            out[f"{kind}_runs_played"] += 1
            out[f"{kind}_runs_reproduced"] += bool(whole["reproduced"])
            out["unresolved_flipped_to_1"] += kind == "unresolved" and whole["reward"] == 1.0
            out["whole_run_errors"] += bool(whole.get("error"))
    return dict(out)


def main() -> int:
    from pivot_sandbox.tasks.swe import default_instances, load_instances

    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--instances", type=Path, default=None, help="instances.jsonl (default: the shared data's)")
    parser.add_argument(
        "--only", nargs="*", default=None, help=f"instance ids, or 'all' (default: {' '.join(DEFAULT)})"
    )
    parser.add_argument("--max-pivots", type=int, default=8, help="pivots judged per instance (spread over the run)")
    parser.add_argument("--no-whole-runs", action="store_true", help="skip playing each run whole to its tests")
    parser.add_argument(
        "--variants", type=int, default=0, help="pivots per instance whose labelled variants are scored (0: none)"
    )
    parser.add_argument("--out", type=Path, default=None, help="append one JSON line per instance as it finishes")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    path = args.instances or default_instances()
    if path is None:
        print("no instances: give --instances or set PIVOT_SHARED_DATA", file=sys.stderr)
        return 2
    started = time.monotonic()
    only = [] if args.only == ["all"] else (args.only or list(DEFAULT))
    rows = []
    for instance in load_instances(path, only=only):
        row = one(instance, path, args.max_pivots, whole=not args.no_whole_runs, variants=args.variants)
        row["split"] = "dev" if instance.offline_check else "held_back"
        rows.append(row)
        if args.out:
            with args.out.open("a") as f:
                f.write(json.dumps(row, default=str) + "\n")
    every = totals(rows)
    result = {
        "instances": str(path),
        "built": every.get("built", 0),
        "valid": every.get("valid", 0),
        "totals": every,
        # the dev split: instances the staging rebuilt by hand (`offline_check`); the rest were held back
        "by_split": {split: totals([r for r in rows if r["split"] == split]) for split in ("dev", "held_back")},
        "rows": rows,
        "seconds": round(time.monotonic() - started),
    }
    if args.json:
        print(json.dumps(result, indent=2, default=str))
        return 0
    for row in rows:
        s = row.get("scores") or {}
        print(
            f"{row['instance_id']}: built={row['built']} valid={row.get('valid')} pivots={row.get('pivots')} "
            f"sandboxed={row.get('sandboxed')} faithful={row.get('faithful')} judged={s.get('judged')} "
            f"expert accepted: docker_shell={s.get('docker_shell/expert_accepted')} "
            f"swe_target={s.get('swe_target/expert_accepted')}; destructive {s.get('destructive_variants')} "
            f"accepted: docker_shell={s.get('docker_shell/destructive_accepted')} "
            f"swe_target={s.get('swe_target/destructive_accepted')}; s/candidate={s.get('seconds_per_candidate')}; "
            f"submission={row.get('submission')}"
        )
    print(json.dumps(result["totals"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
