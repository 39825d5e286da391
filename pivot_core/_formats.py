"""The format registry behind `load_pivots`, `write_pivots` and `pivot convert`.

A format reads a file into pivots (trajectory formats go through `extract_pivots`) and may
write pivots back. Detection looks at the first record; `format=` skips it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pivot_core._files import check_regular, open_regular
from pivot_core._jsonl import first_record, iter_jsonl, write_jsonl
from pivot_core._model import Pivot, Trajectory
from pivot_core._pivots import SkipTurn, extract_pivots
from pivot_core.browse import _io as browse_io
from pivot_core.convert import (
    agent_runs,
    atif,
    fireact,
    mini_swe_agent,
    nemo_gym,
    openai,
    openhands,
    react,
    swe_agent,
    swe_agent_enigma,
    tau2,
    tau_bench,
)
from pivot_core.convert._documents import document_records, is_document
from pivot_core.errors import DataFileError, InvalidTrajectory, UnknownFormat, did_you_mean

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class Format:
    """One on-disk format.

    Attributes:
        name: the `--from` / `format=` name.
        detect: `record -> bool` on the first record of a file.
        read: `(path, options) -> Iterator[Pivot]`.
        write: `(pivots, path) -> int`, None when the format is read-only.
        read_trajectories: `(path, options) -> Iterator[Trajectory]` for trajectory formats.
        open: `(path, options) -> Sequence[Pivot]`, a lazy random-access view for formats that
            can read one pivot without reading the file (Parquet); None reads everything.
    """

    name: str
    detect: Callable[[Mapping[str, Any]], bool]
    read: Callable[[Path, Mapping[str, Any]], Iterator[Pivot]]
    write: Callable[[Iterable[Pivot], Path], int] | None = None
    read_trajectories: Callable[[Path, Mapping[str, Any]], Iterator[Trajectory]] | None = None
    open: Callable[[Path, Mapping[str, Any]], Sequence[Pivot]] | None = None


def _records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """JSONL records, or the items of a JSON list file (original tau-bench releases)."""
    if is_document(path):  # JSON lists/objects, tau2 Results, SWE-agent .traj and .yaml demos
        yield from enumerate(document_records(path), start=1)
        return
    yield from iter_jsonl(path)


def _wrap(path: Path, lineno: int, fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except DataFileError:  # already names its file (a tools file beside the data, say)
        raise
    except InvalidTrajectory as e:
        raise DataFileError(str(path), lineno, str(e)) from e
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise DataFileError(str(path), lineno, f"{type(e).__name__}: {e}") from e
    except RecursionError as e:  # a converter walking a record nested past the interpreter's limit
        raise DataFileError(str(path), lineno, "record nested too deeply") from e


def trajectory_format(
    name: str,
    detect: Callable[[Mapping[str, Any]], bool],
    convert: Callable[[Mapping[str, Any], Path, int, Mapping[str, Any]], Trajectory],
    write_one: Callable[[Trajectory], dict[str, Any]] | None = None,
    skip: SkipTurn | None = None,
) -> Format:
    """Build a Format for files of trajectories (one per record); pivots come from `extract_pivots`.

    `skip(trajectory, index, message)` drops turns that demonstrate nothing (e.g. a turn the
    agent's harness rejected as malformed); they stay in the later pivots' history.
    """

    def read_trajs(path: Path, options: Mapping[str, Any]) -> Iterator[Trajectory]:
        for lineno, rec in _records(path):
            yield _wrap(path, lineno, lambda rec=rec, lineno=lineno: convert(rec, path, lineno, options))

    def read(path: Path, options: Mapping[str, Any]) -> Iterator[Pivot]:
        for traj in read_trajs(path, options):
            yield from extract_pivots(traj, successful_only=bool(options.get("successful_only")), skip=skip)

    return Format(name, detect, read, None, read_trajs)


def _stamp(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_mtime_ns, st.st_size


@functools.lru_cache(maxsize=8)
def _tau2_tools(path: Path, mtime_ns: int, size: int) -> tuple[dict[str, Any], ...]:
    """tau2 runs record no schemas: infer them once per file version from all its agent calls."""
    return tau2.infer_tools(rec for _, rec in _records(path))


def _read_pivot_jsonl(path: Path, options: Mapping[str, Any]) -> Iterator[Pivot]:
    for lineno, rec in iter_jsonl(path):
        yield _wrap(path, lineno, lambda rec=rec: Pivot.from_json(rec))


def _write_pivot_jsonl(pivots: Iterable[Pivot], path: Path) -> int:
    return write_jsonl((p.to_json() for p in pivots), path)


def _read_nemo(path: Path, options: Mapping[str, Any]) -> Iterator[Pivot]:
    # Rows without a uuid get an id from their content, so it survives renames and round trips;
    # a repeated row gets its line number appended to stay unique within the file.
    seen: set[str] = set()
    for lineno, rec in iter_jsonl(path):
        digest = hashlib.sha256(json.dumps(rec, sort_keys=True).encode()).hexdigest()[:12]
        default_id = f"nemo-{digest}" if f"nemo-{digest}" not in seen else f"nemo-{digest}-{lineno}"
        seen.add(default_id)
        yield _wrap(
            path,
            lineno,
            lambda rec=rec, d=default_id: nemo_gym.from_nemo_gym(rec, default_id=d, domain=options.get("domain")),
        )


def _write_nemo(pivots: Iterable[Pivot], path: Path) -> int:
    return write_jsonl((nemo_gym.to_nemo_gym(p) for p in pivots), path)


# pyarrow is imported only when a Parquet file is actually read or written (the `data` extra).
def _read_parquet(path: Path, options: Mapping[str, Any]) -> Iterator[Pivot]:
    from pivot_core._parquet import read_parquet

    return read_parquet(path, options)


def _open_parquet(path: Path, options: Mapping[str, Any]) -> Sequence[Pivot]:
    from pivot_core._parquet import open_parquet

    return open_parquet(path, options)


def _write_parquet(pivots: Iterable[Pivot], path: Path) -> int:
    from pivot_core._parquet import write_parquet

    return write_parquet(pivots, path)


def _is_parquet(path: Path) -> bool:
    try:
        with open_regular(path) as f:  # a FIFO or a device: a DataFileError naming it, never a hang
            return f.read(4) == b"PAR1"
    except OSError:
        return False


def _write_atif(pivots: Iterable[Pivot], path: Path) -> int:
    """One ATIF document per trajectory (its longest pivot's chat); a list when there are several."""
    longest: dict[str, Pivot] = {}
    for p in pivots:
        key = str(p.context.get("trajectory_id") or p.id)
        if key not in longest or len(p.history) > len(longest[key].history):
            longest[key] = p
    docs = [
        atif.to_atif(
            [*p.history, p.expert],
            session_id=key,
            agent={"name": p.context.get("harness") or "unknown", "model_name": p.context.get("model")},
            tools=p.tools,
        )
        for key, p in longest.items()
    ]
    path.write_text(json.dumps(docs[0] if len(docs) == 1 else docs, ensure_ascii=False, indent=1), encoding="utf-8")
    return len(docs)


def _run_format(name: str, detect: Callable[[Mapping[str, Any]], bool], write: Any = None) -> Format:
    """A format whose file is one agent run (its folder's results.json gives the context)."""
    return Format(name, detect, lambda path, options: agent_runs.iter_file_pivots(path, name), write)


FORMATS: dict[str, Format] = {
    "pivots": Format("pivots", lambda r: "expert" in r and "history" in r, _read_pivot_jsonl, _write_pivot_jsonl),
    # One run per file: an OpenHands event stream, an ATIF document, a mini-swe-agent transcript (text:
    # sniffed by `detect_format`, never by a JSON record).
    "openhands": _run_format("openhands", openhands.detect),
    "atif": _run_format("atif", atif.detect, _write_atif),
    "mini-swe-agent-log": _run_format("mini-swe-agent-log", lambda r: False),
    "nemo-gym": Format("nemo-gym", nemo_gym.detect, _read_nemo, _write_nemo),
    "tau-bench": trajectory_format(
        "tau-bench",
        tau_bench.detect,
        lambda r, p, n, o: tau_bench.from_tau_bench(r, data_path=p, default_id=f"{p.stem}/{n}"),
    ),
    # Browse formats come before "openai": their records also carry a `messages` list.
    "browse": Format(
        "browse",
        browse_io.detect_browse,
        browse_io.pivot_reader(browse_io.read_browse_trajectories),
        None,
        browse_io.read_browse_trajectories,
    ),
    "react": Format(
        "react",
        react.detect,
        browse_io.pivot_reader(browse_io.read_react_trajectories),
        None,
        browse_io.read_react_trajectories,
    ),
    "fireact": Format(
        "fireact",
        fireact.detect,
        browse_io.pivot_reader(browse_io.read_fireact_trajectories),
        None,
        browse_io.read_fireact_trajectories,
    ),
    # A JSON object of prompt texts: never detected, read with `--from react-prompts`.
    "react-prompts": Format(
        "react-prompts",
        lambda r: False,
        browse_io.pivot_reader(browse_io.read_react_prompt_trajectories),
        None,
        browse_io.read_react_prompt_trajectories,
    ),
    "tau2": trajectory_format(
        "tau2",
        tau2.detect,
        lambda r, p, n, o: tau2.from_tau2(r, default_id=f"{p.stem}/{n}", tools=_tau2_tools(p, *_stamp(p))),
    ),
    "mini-swe-agent": trajectory_format(
        "mini-swe-agent",
        mini_swe_agent.detect,
        lambda r, p, n, o: mini_swe_agent.from_mini_swe_agent(r, default_id=f"{p.stem}/{n}"),
        skip=mini_swe_agent.rejected_by_harness,
    ),
    "swe-agent": trajectory_format(
        "swe-agent",
        swe_agent.detect,
        lambda r, p, n, o: swe_agent.from_swe_agent(r, default_id=f"swe-agent/{p.stem}"),
    ),
    # before "openai": EnIGMA records also hold a `messages` list
    "swe-agent-enigma": trajectory_format(
        "swe-agent-enigma",
        swe_agent_enigma.detect,
        lambda r, p, n, o: swe_agent_enigma.from_enigma(r, default_id=f"{p.stem}/{n}"),
    ),
    "openai": trajectory_format(
        "openai",
        openai.detect,
        lambda r, p, n, o: openai.from_openai(r, domain=o.get("domain"), default_id=f"{p.stem}/{n}"),
    ),
    # Binary: detected by its magic bytes in `detect_format`, never by a JSON record.
    "parquet": Format("parquet", lambda r: False, _read_parquet, _write_parquet, open=_open_parquet),
}
# `write_pivots(..., format="openai")` writes pivot JSONL: histories in OpenAI chat shape.
WRITE_ALIASES = {"openai": "pivots", "jsonl": "pivots"}


def register_format(fmt: Format) -> None:
    """Add a format (domains and plugins call this); re-registering a name raises."""
    if fmt.name in FORMATS:
        raise ValueError(f"format {fmt.name!r} is already registered")
    FORMATS[fmt.name] = fmt


def get_format(name: str) -> Format:
    """The format registered under `name`, or UnknownFormat with the valid names."""
    if name not in FORMATS:
        raise UnknownFormat(f"expected a format in {sorted(FORMATS)}, got {name!r}.{did_you_mean(name, FORMATS)}")
    return FORMATS[name]


def detect_format(path: PathLike) -> Format:
    """The first registered format whose `detect` accepts the file's first record."""
    p = Path(path)
    check_regular(p)
    if _is_parquet(p):
        return FORMATS["parquet"]
    if p.suffix.lower() == ".log" and agent_runs.sniff(p) == "mini-swe-agent-log":
        return FORMATS["mini-swe-agent-log"]
    if p.suffix.lower() == ".parquet":
        raise DataFileError(
            str(p), None, "named .parquet but not a Parquet file (no PAR1 magic bytes); rename it if it holds JSONL"
        )
    rec = next((r for _, r in _records(p)), None)
    if rec is None:  # an empty file is an empty pivot file (e.g. `pivot select` that kept nothing)
        return FORMATS["pivots"]
    for fmt in FORMATS.values():
        if fmt.detect(rec):
            return fmt
    raise UnknownFormat(
        f"{p}: no known format matches the first record (keys {sorted(rec)[:8]}); pass format= one of {sorted(FORMATS)}"
    )


def load_pivots(path: PathLike, format: str | None = None, **options: Any) -> list[Pivot]:
    """Read every pivot of a file (trajectory formats are split into one pivot per assistant turn).

    Args:
        path: a JSONL file (or a JSON list for original tau-bench releases).
        format: a name from `FORMATS`; detected from the first record when None.
        **options: passed to the reader (`domain=`, `successful_only=`).

    Raises:
        DataFileError: the path is not a regular file, a whole-file document or one record is past
            `$PIVOT_MAX_DATA_BYTES`, or a record is not valid JSON or not a valid record (names file and line).
        UnknownFormat: the format name is unknown or the content matches none.
    """
    check_regular(path)  # a FIFO, a device or a directory: named at once, before any format opens it
    fmt = get_format(format) if format else detect_format(path)
    return list(fmt.read(Path(path), options))


def open_pivots(path: PathLike, format: str | None = None, **options: Any) -> Sequence[Pivot]:
    """Like `load_pivots`, but a lazy random-access view where the format has one (Parquet).

    The env holds what this returns, so a million-pivot Parquet file costs no Python object
    per pivot until a pivot is read.
    """
    check_regular(path)
    fmt = get_format(format) if format else detect_format(path)
    if fmt.open is not None:
        return fmt.open(Path(path), options)
    return list(fmt.read(Path(path), options))


def write_pivots(pivots: Iterable[Pivot], path: PathLike, format: str = "openai") -> int:
    """Write pivots as pivot JSONL (`"openai"`), NeMo Gym rows, `"parquet"` or `"atif"`; returns the count.

    `"atif"` writes one ATIF document per trajectory (a JSON list when there are several) and
    returns the number of documents.
    """
    fmt = get_format(WRITE_ALIASES.get(format, format))
    if fmt.write is None:
        raise UnknownFormat(
            f"format {format!r} is read-only; write one of "
            f"{sorted(n for n, f in FORMATS.items() if f.write) + ['openai']}"
        )
    return fmt.write(pivots, Path(path))


__all__ = [
    "FORMATS",
    "Format",
    "detect_format",
    "first_record",
    "get_format",
    "load_pivots",
    "open_pivots",
    "register_format",
    "trajectory_format",
    "write_pivots",
]
