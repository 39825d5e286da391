"""JSONL reading and writing that names the file and line of every bad record.

Lines are decoded here, not by `open(encoding=...)`, so that binary or non-UTF-8 content is a
`DataFileError` naming its line rather than a `UnicodeDecodeError` from deep inside iteration,
and records are decoded with `decode_json`, so a huge integer, deep nesting, NaN or a lone
surrogate is one too.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pivot_core._files import max_data_bytes, open_regular, too_large
from pivot_core._safejson import decode_json
from pivot_core.errors import DataFileError, UnsafeJSON

# A NUL byte in the first block means a binary file (Parquet, an archive, an image), not text.
_SNIFF_BYTES = 8192


def check_text_file(path: Path, head: bytes) -> None:
    """Raise `DataFileError` when a file's first bytes show binary content."""
    if b"\x00" in head:
        kind = "a Parquet file (PAR1 magic) whose name does not end in .parquet" if head[:4] == b"PAR1" else "binary"
        raise DataFileError(str(path), None, f"expected a UTF-8 text file of JSON records, got {kind} content")


def decode_record(path: Path, lineno: int | None, raw: bytes) -> Any:
    """One record's bytes as JSON, or a `DataFileError` naming the file and line."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataFileError(
            str(path), lineno, f"not UTF-8 text (byte {raw[e.start : e.start + 1]!r} at column {e.start + 1})"
        ) from e
    try:
        return decode_json(text)
    except UnsafeJSON as e:
        raise DataFileError(str(path), lineno, f"unusable JSON: {e.msg}") from e
    except json.JSONDecodeError as e:
        where = f"line {e.lineno} column {e.colno}" if lineno is None else f"column {e.colno}"
        raise DataFileError(
            str(path), lineno if lineno is not None else e.lineno, f"invalid JSON: {e.msg} at {where}"
        ) from e


def iter_jsonl(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield `(line_number, object)` for each non-blank line; a bad line raises `DataFileError`.

    The path must be a regular file, and a line may hold at most `max_data_bytes()` bytes
    (`$PIVOT_MAX_DATA_BYTES`): a line past it is an error naming file and line, not a read until
    memory runs out.
    """
    p = Path(path)
    cap = max_data_bytes()
    with open_regular(p) as handle:  # a FIFO or a device is a DataFileError, never a hang
        try:
            check_text_file(p, handle.peek(_SNIFF_BYTES)[:_SNIFF_BYTES])
        except OSError as e:
            raise DataFileError(str(p), None, f"cannot read: {e.strerror or e}") from e
        lineno = 0
        while line := handle.readline(cap + 1):  # one record at most `cap` bytes: never a whole huge line
            lineno += 1
            if len(line) > cap:
                raise too_large(p, cap, "a record", lineno)
            if lineno == 1:
                line = line.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte-order mark some editors write
            if not line.strip():
                continue
            obj = decode_record(p, lineno, line)
            if not isinstance(obj, dict):
                raise DataFileError(str(p), lineno, f"expected a JSON object, got {type(obj).__name__}")
            yield lineno, obj


def write_jsonl(rows: Iterable[dict[str, Any]], path: str | os.PathLike[str]) -> int:
    """Write rows atomically (temp file + rename); returns the number written.

    Raises:
        DataFileError: the file cannot be written (names the path and the reason).
    """
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    n = 0
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        with tmp.open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
                n += 1
        os.replace(tmp, p)
    except OSError as e:  # a directory in the way, no permission, a full disk: the user's to fix
        if tmp.is_file():
            tmp.unlink()
        raise DataFileError(str(p), None, f"cannot write: {e.strerror or e}") from e
    return n


def first_record(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The first JSON object of a JSONL file (None for an empty file)."""
    for _, obj in iter_jsonl(path):
        return obj
    return None
