"""Readers behind the `browse`, `react`, `react-prompts` and `fireact` formats of `load_pivots`.

The ReAct readers replay each trajectory on a local corpus (`annotate`) to learn which pivots are
replayable. The corpus is `corpus=` when given, else a `corpus.jsonl` beside the input file (the
layout of ../shared/data/browse/), else the bundled corpus. Gold documents come the same way from
`questions=` or a `questions.jsonl` beside the input.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pivot_core._jsonl import iter_jsonl
from pivot_core._model import Pivot, Trajectory
from pivot_core.browse._annotate import annotate, browse_pivots
from pivot_core.browse._corpus import BUNDLED_CORPUS, resolve_corpus
from pivot_core.browse._fts import open_backend
from pivot_core.convert import fireact, react
from pivot_core.convert._documents import read_document
from pivot_core.errors import DataFileError, InvalidTrajectory


def _wrap(path: Path, lineno: int | None, fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except DataFileError:
        raise
    except InvalidTrajectory as e:
        raise DataFileError(str(path), lineno, str(e)) from e
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise DataFileError(str(path), lineno, f"{type(e).__name__}: {e}") from e


def corpus_option(path: Path, options: Mapping[str, Any]) -> str:
    """How pivots read from `path` name their corpus: `corpus=`, a sibling corpus.jsonl, or the bundled one."""
    given = options.get("corpus")
    if given is not None:
        # Absolute, so the pivots still find their corpus when read from another directory.
        return str(given) if str(given).startswith("bundled") else str(Path(given).resolve())
    sibling = path.with_name("corpus.jsonl")
    return str(sibling.resolve()) if sibling.exists() else f"bundled:{BUNDLED_CORPUS}"


def gold_docs(path: Path, options: Mapping[str, Any]) -> dict[str, list[str]]:
    """question_id -> gold doc ids, from `questions=` or a sibling questions.jsonl ({} when neither)."""
    source = options.get("questions")
    qpath = Path(source) if source is not None else path.with_name("questions.jsonl")
    if source is None and not qpath.exists():
        return {}
    return {str(q.get("question_id")): list(q.get("gold_doc_ids") or ()) for _, q in iter_jsonl(qpath)}


def detect_browse(record: Mapping[str, Any]) -> bool:
    """True for an annotated browse trajectory (what `pivot synthesize browse` writes)."""
    ctx = record.get("context")
    return record.get("domain") == "browse" and isinstance(ctx, Mapping) and "turns" in ctx


def read_browse_trajectories(path: Path, options: Mapping[str, Any]) -> Iterator[Trajectory]:
    """Annotated browse trajectories, unchanged."""
    for lineno, rec in iter_jsonl(path):
        yield _wrap(path, lineno, lambda rec=rec: Trajectory.from_json(rec))


def read_react_trajectories(path: Path, options: Mapping[str, Any]) -> Iterator[Trajectory]:
    """ReAct trajectories converted to browse tool calls and replayed on the local corpus."""
    corpus = corpus_option(path, options)
    backend = open_backend(resolve_corpus(corpus))
    golds = gold_docs(path, options)
    for lineno, rec in iter_jsonl(path):
        traj = _wrap(path, lineno, lambda rec=rec, n=lineno: react.from_react(rec, default_id=f"{path.stem}/{n}"))
        qid = str(traj.context.get("question_id"))
        if qid in golds and not traj.context.get("gold_doc_ids"):
            traj = dataclasses.replace(traj, context={**traj.context, "gold_doc_ids": golds[qid]})
        yield annotate(traj, backend, corpus)


def read_react_prompt_trajectories(path: Path, options: Mapping[str, Any]) -> Iterator[Trajectory]:
    """The demos of the raw ReAct few-shot prompt file (a JSON object: prompt name -> text)."""
    prompts = read_document(path)  # binary, non-UTF-8 or unusable JSON: a DataFileError naming the file
    if not isinstance(prompts, dict) or not all(isinstance(v, str) for v in prompts.values()):
        raise DataFileError(str(path), None, "expected a JSON object of prompt name -> prompt text")
    corpus = corpus_option(path, options)
    backend = open_backend(resolve_corpus(corpus))
    for name, text in prompts.items():
        for traj in _wrap(path, None, lambda name=name, text=text: react.from_react_prompt(name, text)):
            yield annotate(traj, backend, corpus)


def read_fireact_trajectories(path: Path, options: Mapping[str, Any]) -> Iterator[Trajectory]:
    """FireAct trajectories; never replayed (their searches ran on the live web)."""
    for lineno, rec in iter_jsonl(path):
        yield _wrap(path, lineno, lambda rec=rec, n=lineno: fireact.from_fireact(rec, default_id=f"{path.stem}/{n}"))


def pivot_reader(
    trajectories: Callable[[Path, Mapping[str, Any]], Iterator[Trajectory]],
) -> Callable[[Path, Mapping[str, Any]], Iterator[Pivot]]:
    """A pivot reader over a trajectory reader (each pivot carries its turn's replay facts)."""

    def read(path: Path, options: Mapping[str, Any]) -> Iterator[Pivot]:
        domain = options.get("domain")
        for traj in trajectories(path, options):
            for pivot in browse_pivots(traj, successful_only=bool(options.get("successful_only"))):
                yield dataclasses.replace(pivot, domain=domain) if domain else pivot

    return read
