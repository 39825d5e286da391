"""`pivot synthesize browse`, `pivot browse index` and `pivot browse search`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import typer

from pivot_cli._common import JSON_OPTION, console, emit_json, print_table, user_errors
from pivot_cli._synthesize import synthesize_app

browse_app = typer.Typer(name="browse", no_args_is_help=True, help="The browse domain's local search engine.")


def register(app: typer.Typer) -> None:
    """Add `synthesize browse` and the `browse` group."""
    synthesize_app.command("browse")(synthesize_browse)
    browse_app.command("index")(index)
    browse_app.command("search")(search)
    app.add_typer(browse_app, name="browse")


def _open_timed(corpus: Path | None) -> tuple[Any, dict[str, Any]]:
    from pivot_core.browse import FtsBackend

    start = time.perf_counter()
    backend = FtsBackend(corpus)
    seconds = time.perf_counter() - start
    return backend, {
        "corpus": str(backend.corpus),
        "documents": len(backend),
        "index": str(backend.index),
        "index_bytes": backend.index.stat().st_size,
        "built": backend.built,
        "open_seconds": round(seconds, 4),
    }


def synthesize_browse(
    questions: Path = typer.Option(..., "--questions", help="HotpotQA questions JSONL (questions.jsonl layout)."),
    corpus: Path = typer.Option(..., "--corpus", help="Corpus JSONL holding every gold document."),
    out: Path = typer.Option(..., "--out", help="Output file of annotated browse trajectories."),
    as_json: bool = JSON_OPTION,
) -> None:
    """One oracle expert trajectory per question: search, open, find the bridge, search, open, answer."""
    from pivot_core import write_jsonl
    from pivot_core.browse import browse_pivots, synthesize

    with user_errors():
        backend, index_info = _open_timed(corpus)
        ref = str(corpus.resolve())
        trajectories = list(synthesize(questions, backend, ref))
        n = write_jsonl((t.to_json() for t in trajectories), out)
    pivots = sum(1 for t in trajectories for _ in browse_pivots(t))
    summary = {"questions": str(questions), "output": str(out), "trajectories": n, "pivots": pivots, **index_info}
    if as_json:
        emit_json(summary)
    else:
        console.print(f"wrote {n} trajectories ({pivots} pivots) to {out}")


def index(
    corpus: Path | None = typer.Option(None, "--corpus", help="Corpus JSONL (default: the bundled corpus)."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Build (or reuse) the corpus's FTS5 index and report its size and the time it took."""
    with user_errors():
        _, info = _open_timed(corpus)
    if as_json:
        emit_json(info)
    else:
        console.print(info)


def search(
    query: str = typer.Argument(..., help="Free-text query."),
    corpus: Path | None = typer.Option(None, "--corpus", help="Corpus JSONL (default: the bundled corpus)."),
    k: int = typer.Option(5, "--k", min=1, help="Number of results."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Search the corpus exactly as the `search` tool does."""
    from pivot_core.browse import open_backend

    with user_errors():
        hits = open_backend(corpus).search(query, k)
    if as_json:
        emit_json({"query": query, "hits": [h.__dict__ for h in hits]})
    else:
        print_table(
            f"search: {query}",
            ["rank", "title", "doc_id", "score", "snippet"],
            [(i, h.title, h.doc_id, f"{h.score:.2f}", h.snippet[:80]) for i, h in enumerate(hits, start=1)],
        )
