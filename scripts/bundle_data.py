"""Rebuild the small real samples shipped in pivot_envs/data/ from ../shared/data (run from the repo root).

    python scripts/bundle_data.py [--shared ../shared/data]

Every sample keeps its source records unchanged except where noted; SOURCES.md in the same folder
states origins and licenses. Terminal-Bench tasks are never bundled (they carry a canary).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "pivot_envs" / "data"

BROWSE_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the corpus; returns ranked titles, ids and snippets.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}, "k": {"type": "integer", "minimum": 1}},
                "required": ["query"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "open",
            "description": "Open a document by exact title or doc id; returns its text.",
            "parameters": {
                "type": "object",
                "properties": {"title": {"type": "string"}},
                "required": ["title"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "find",
            "description": "Find a keyword in the open document; returns the next matching sentence.",
            "parameters": {
                "type": "object",
                "properties": {"keyword": {"type": "string"}},
                "required": ["keyword"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "answer",
            "description": "Give the final answer and end the episode.",
            "parameters": {
                "type": "object",
                "properties": {"answer": {"type": "string"}},
                "required": ["answer"],
                "additionalProperties": False,
            },
        },
    },
]
_REACT_ACTION = re.compile(r"Action \d+:\s*(Search|Lookup|Finish)\[(.*)\]\s*$", re.DOTALL)
_REACT_TOOL = {"Search": ("open", "title"), "Lookup": ("find", "keyword"), "Finish": ("answer", "answer")}


def react_to_tool_calls(record: dict) -> dict:
    """ReAct text turns -> assistant turns with a tool call (Search=open by title, Lookup=find, Finish=answer)."""
    messages = []
    n = 0
    for m in record["messages"]:
        if m["role"] == "assistant":
            match = _REACT_ACTION.search(m["content"])
            if match is None:
                messages.append({"role": "assistant", "content": m["content"]})
                continue
            tool, arg = _REACT_TOOL[match.group(1)]
            n += 1
            thought = m["content"][: match.start()].strip()
            messages.append(
                {
                    "role": "assistant",
                    "content": thought or None,
                    "tool_calls": [
                        {
                            "id": f"call_{n}",
                            "type": "function",
                            "function": {
                                "name": tool,
                                "arguments": json.dumps({arg: match.group(2)}, ensure_ascii=False),
                            },
                        }
                    ],
                }
            )
        elif m["role"] == "tool":
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": f"call_{n}",
                    "name": messages[-1]["tool_calls"][0]["function"]["name"]
                    if messages and messages[-1].get("tool_calls")
                    else m.get("name"),
                    "content": m["content"],
                }
            )
        else:
            messages.append({"role": m["role"], "content": m["content"]})
    return {
        "id": record["id"],
        "domain": "browse",
        "source": record["source"],
        "reward": 1.0 if record["success"] else 0.0,
        "messages": messages,
        "tools": BROWSE_TOOLS,
        "context": {
            "question_id": record["question_id"],
            "gold_answer": record["gold_answer"],
            "corpus": "bundled:browse_corpus.jsonl",
        },
    }


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write(name: str, rows: list[dict]) -> None:
    with (OUT / name).open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"{name}: {len(rows)} records, {(OUT / name).stat().st_size / 1024:.0f} KiB")


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

    react = [r for r in read(data / "browse/react_wikipedia_trajectories.jsonl") if r["success"]][:6]
    write("browse_react.jsonl", [react_to_tool_calls(r) for r in react])
    qids = {r["question_id"] for r in react}
    write("browse_questions.jsonl", [q for q in read(data / "browse/questions.jsonl") if q["question_id"] in qids])
    write(
        "browse_corpus.jsonl",
        [d for d in read(data / "browse/corpus.jsonl") if qids & set(d.get("question_ids") or ())],
    )
    shutil.copy(data / "tool_use/tau_bench_airline_tools.json", OUT / "tau_bench_airline_tools.json")


if __name__ == "__main__":
    main()
