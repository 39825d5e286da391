"""Rebuild the small real samples shipped in pivot_core/data/ from ../shared/data (run from the repo root).

    python scripts/bundle_data.py [--shared ../shared/data]

Every sample keeps its source records unchanged except where noted; SOURCES.md in the same folder
states origins and licenses. Terminal-Bench tasks are never bundled (they carry a canary).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "pivot_core" / "data"


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write(name: str, rows: list[dict]) -> None:
    with (OUT / name).open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"{name}: {len(rows)} records, {(OUT / name).stat().st_size / 1024:.0f} KiB")


def bundle_browse(src: Path, questions: int = 8) -> None:
    """Oracle + fully replayable successful ReAct trajectories for a few questions, and their corpus subset.

    Both trajectory files are annotated (replayed) on the bundled corpus subset itself, because the
    env's verifiers search that subset.
    """
    sys.path.insert(0, str(OUT.parent.parent))  # this checkout's pivot_envs, not an installed one
    from pivot_core.browse import FtsBackend, annotate, synthesize
    from pivot_core.browse._io import read_react_trajectories

    full = list(read_react_trajectories(src / "react_wikipedia_trajectories.jsonl", {}))
    replayable = [t for t in full if t.reward == 1.0 and all(f["replayable"] for f in t.context["turns"].values())]
    react = sorted(replayable, key=lambda t: len(json.dumps(t.to_json())))[:questions]
    qids = {t.context["question_id"] for t in react}
    write("browse_questions.jsonl", [q for q in read(src / "questions.jsonl") if q["question_id"] in qids])
    write("browse_corpus.jsonl", [d for d in read(src / "corpus.jsonl") if qids & set(d.get("question_ids") or ())])
    with tempfile.TemporaryDirectory() as cache:
        backend = FtsBackend(OUT / "browse_corpus.jsonl", index=Path(cache) / "index.sqlite")
        ref = "bundled:browse_corpus.jsonl"
        oracle = list(synthesize(OUT / "browse_questions.jsonl", backend, ref))
        write("browse_oracle.jsonl", [t.to_json() for t in oracle])
        write("browse_react.jsonl", [annotate(t, backend, ref).to_json() for t in react])
        backend.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default="../shared/data")
    data = Path(ap.parse_args().shared)
    OUT.mkdir(parents=True, exist_ok=True)

    tools = json.loads((data / "tool_use/tau_bench_airline_tools.json").read_text())
    airline = [r for r in read(data / "tool_use/tau_bench_airline_gpt4o.jsonl") if r["reward"] == 1.0]
    airline = sorted(airline, key=lambda r: len(json.dumps(r)))[:4]
    for r in airline:
        r.pop("tools_file", None)
        r["tools"] = tools
    write("tool_use_tau_airline.jsonl", airline)

    nemo = data / "nemo_gym_pivot_rows"
    write(
        "tool_use_nemo.jsonl",
        read(nemo / "single_step_tool_use_with_argument_comparison.example.jsonl")
        + read(nemo / "single_step_tool_use_with_argument_comparison.parallel_example.jsonl"),
    )
    write("swe_nemo.jsonl", read(nemo / "swe_pivot.example.jsonl"))
    write(
        "terminal_nemo.jsonl",
        read(nemo / "terminus_judge.example.jsonl") + read(nemo / "terminal_multi_harness.example.jsonl"),
    )

    mini = sorted(
        read(data / "swe/mini_swe_agent_gemini3pro_swebench_verified.jsonl"), key=lambda r: len(json.dumps(r))
    )[:1]
    for r in mini:
        r["domain"] = "swe"
        r["reward"] = 1.0 if r.get("resolved") else 0.0
        r["context"] = {"instance_id": r["instance_id"], "repo": r["repo"], "agent": r["agent"]}
        for key in ("submission_patch", "eval_report", "model_stats"):
            r.pop(key, None)
    write("swe_mini_swe_agent.jsonl", mini)

    bundle_browse(data / "browse")
    shutil.copy(data / "tool_use/tau_bench_airline_tools.json", OUT / "tau_bench_airline_tools.json")


if __name__ == "__main__":
    main()
