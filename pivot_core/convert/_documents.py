"""Whole-file documents (not JSONL): JSON lists, single JSON objects, SWE-agent `.traj` and YAML demos.

`document_records(path)` returns the records such a file holds: the items of a JSON list
(original tau-bench releases), the simulations of a tau2 `Results` object (each with its task
attached), or the one object of a single-trajectory file (mini-swe-agent `.traj.json`,
SWE-agent `.traj`, SWE-agent demonstration `.yaml`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pivot_core._jsonl import check_text_file, decode_record
from pivot_core.convert import tau2
from pivot_core.errors import DataFileError

DOCUMENT_SUFFIXES = (".json", ".traj", ".yaml", ".yml")


def is_document(path: Path) -> bool:
    """True for files read whole rather than line by line."""
    return path.suffix.lower() in DOCUMENT_SUFFIXES


def read_document(path: Path) -> Any:
    """The JSON (or YAML) value of a whole file; unreadable content is a `DataFileError` naming the file and line."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise DataFileError(str(path), None, f"cannot open: {e.strerror or e}") from e
    check_text_file(path, raw[:8192])
    raw = raw.removeprefix(b"\xef\xbb\xbf")
    if path.suffix.lower() not in (".yaml", ".yml"):
        return decode_record(path, None, raw)
    import yaml  # only YAML demonstrations need it

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise DataFileError(str(path), line, "not UTF-8 text") from e
    try:
        return yaml.safe_load(text)
    except RecursionError as e:
        raise DataFileError(str(path), None, "invalid YAML: nested too deeply") from e
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise DataFileError(str(path), mark.line + 1 if mark else None, f"invalid YAML: {e}") from e


def document_records(path: Path) -> list[dict[str, Any]]:
    """The records of a whole-file document (see the module docstring)."""
    data = read_document(path)
    if isinstance(data, list):
        bad = next((i for i, r in enumerate(data, start=1) if not isinstance(r, dict)), None)
        if bad is not None:
            got = type(data[bad - 1]).__name__
            raise DataFileError(str(path), None, f"item {bad}: expected a JSON object, got {got}")
        return data
    if isinstance(data, dict) and tau2.is_results(data):
        return tau2.results_records(data)
    if isinstance(data, dict):
        return [data]
    raise DataFileError(str(path), None, f"expected a JSON list or object, got {type(data).__name__}")
