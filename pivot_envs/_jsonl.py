"""JSONL reading and writing that names the file and line of every bad record."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pivot_envs.errors import DataFileError


def iter_jsonl(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield `(line_number, object)` for each non-blank line; a bad line raises `DataFileError`."""
    p = Path(path)
    try:
        handle = p.open(encoding="utf-8")
    except OSError as e:
        raise DataFileError(str(p), None, f"cannot open: {e.strerror or e}") from e
    with handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataFileError(str(p), lineno, f"invalid JSON: {e.msg} at column {e.colno}") from e
            if not isinstance(obj, dict):
                raise DataFileError(str(p), lineno, f"expected a JSON object, got {type(obj).__name__}")
            yield lineno, obj


def write_jsonl(rows: Iterable[dict[str, Any]], path: str | os.PathLike[str]) -> int:
    """Write rows atomically (temp file + rename); returns the number written."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    n = 0
    with tmp.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    os.replace(tmp, p)
    return n


def first_record(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The first JSON object of a JSONL file (None for an empty file)."""
    for _, obj in iter_jsonl(path):
        return obj
    return None
