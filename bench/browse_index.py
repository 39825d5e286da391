"""Browse search engine figures: index build vs cached open, FTS5 search vs a linear scan, data coverage.

    python bench/browse_index.py [--shared ../shared/data]

Prints three tables: index timing and size (cold build vs reuse of the cached index, with the
ratio), query timing for the gold-title queries (FTS5 BM25 vs scanning every document in Python,
with the ratio), and the pivots per source with the share of converted ReAct searches whose
target document the local corpus can serve.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from pivot_cli._common import print_table
from pivot_core.browse import FtsBackend, browse_pivots, iter_corpus, synthesize
from pivot_envs import load_pivots


def timed(fn, repeat: int = 1) -> tuple[float, object]:
    """Median seconds of `repeat` runs, and the last result."""
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def index_table(corpus: Path, cache: Path) -> FtsBackend:
    index = cache / "bench.fts5.sqlite"

    def cold() -> FtsBackend:
        index.unlink(missing_ok=True)
        return FtsBackend(corpus, index=index)

    build_s, backend = timed(cold, repeat=3)
    reopen_s, again = timed(lambda: FtsBackend(corpus, index=index), repeat=5)
    assert backend.built and not again.built
    size = index.stat().st_size
    print_table(
        "FTS5 index: cold build vs cached open",
        ["corpus docs", "corpus bytes", "index bytes", "build s", "cached open s", "ratio"],
        [
            (
                len(backend),
                corpus.stat().st_size,
                size,
                f"{build_s:.3f}",
                f"{reopen_s:.4f}",
                f"{build_s / reopen_s:.0f}x",
            )
        ],
    )
    return again


def query_table(backend: FtsBackend, corpus: Path, questions: Path) -> None:
    docs = list(iter_corpus(corpus))
    titles = [backend.get(g).title for line in questions.open() for g in json.loads(line)["gold_doc_ids"]]

    def scan(query: str) -> list[str]:
        words = query.casefold().split()
        scored = [
            (sum(d.title.casefold().count(w) * 10 + d.text.casefold().count(w) for w in words), d.doc_id) for d in docs
        ]
        return [i for s, i in sorted(scored, reverse=True)[:5] if s > 0]

    fts_s, _ = timed(lambda: [backend.search(t, 5) for t in titles], repeat=3)
    scan_s, _ = timed(lambda: [scan(t) for t in titles], repeat=3)
    first = sum(backend.search(t, 5)[0].title == t for t in titles)
    print_table(
        f"{len(titles)} gold-title queries, top-5",
        ["way", "total s", "per query ms", "ratio"],
        [
            ("FTS5 BM25", f"{fts_s:.4f}", f"{1000 * fts_s / len(titles):.3f}", "1x"),
            (
                "Python linear scan",
                f"{scan_s:.4f}",
                f"{1000 * scan_s / len(titles):.3f}",
                f"{scan_s / fts_s:.1f}x slower",
            ),
        ],
    )
    print(f"gold title ranked first: {first}/{len(titles)}")


def coverage_table(data: Path, backend: FtsBackend) -> None:
    oracle = [
        p for t in synthesize(data / "questions.jsonl", backend, str(data / "corpus.jsonl")) for p in browse_pivots(t)
    ]
    react = load_pivots(data / "react_wikipedia_trajectories.jsonl")
    react_ok = load_pivots(data / "react_wikipedia_trajectories.jsonl", successful_only=True)
    fireact = load_pivots(data / "fireact_gpt4_react_hotpotqa.jsonl")
    prompts = load_pivots(data / "raw" / "react_webthink_fewshot_prompts.json", format="react-prompts")
    rows = [
        (name, len(ps), sum(bool(p.context["replayable"]) for p in ps))
        for name, ps in [
            ("oracle (synthesized)", oracle),
            ("ReAct (all)", react),
            ("ReAct (successful)", react_ok),
            ("FireAct", fireact),
            ("ReAct few-shot prompts", prompts),
        ]
    ]
    print_table("pivots per source", ["source", "pivots", "replayable"], rows)
    opens = [p for p in react if p.expert.tool_calls and p.expert.tool_calls[0].name == "open"]
    served = [p for p in opens if p.context["replayable"]]
    in_top5 = [
        p
        for p in served
        if p.context["target_doc_id"]
        in {h.doc_id for h in backend.search(json.loads(p.expert.tool_calls[0].arguments)["title"], 5)}
    ]
    print_table(
        "converted ReAct Search[...] actions",
        ["searches", "target in corpus (exact title)", "share", "target in search top-5", "share"],
        [
            (
                len(opens),
                len(served),
                f"{len(served) / len(opens):.1%}",
                len(in_top5),
                f"{len(in_top5) / len(opens):.1%}",
            )
        ],
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    data = Path(ap.parse_args().shared) / "browse"
    with tempfile.TemporaryDirectory() as cache:
        backend = index_table(data / "corpus.jsonl", Path(cache))
        query_table(backend, data / "corpus.jsonl", data / "questions.jsonl")
        coverage_table(data, backend)
        backend.close()


if __name__ == "__main__":
    main()
