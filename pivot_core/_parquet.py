"""Pivot files in Parquet: memory-mapped, read by index without building every pivot.

Layout: one row per pivot with three string columns, `id`, `domain` and `pivot` (the pivot's
`to_json()` as JSON text), in small row groups (1,024 rows by default) so that reading one
pivot decodes one small row group. `ParquetPivots` is the lazy view the env holds: `len` comes
from the footer, `pivots[i]` decodes (and caches) the row group that holds row i, and
`find(id)` binary-searches a sort permutation of the `id` column built on the first lookup.

pyarrow is imported here only (the `data` extra); `import pivot_envs` never loads it.
"""

from __future__ import annotations

import bisect
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from pivot_core._files import check_regular
from pivot_core._model import Pivot
from pivot_core._pivotseq import PivotSequence
from pivot_core._safejson import decode_json
from pivot_core.errors import DataFileError, InvalidTrajectory

try:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
except ImportError as e:  # the data extra is optional
    raise ImportError("Parquet pivot files need pyarrow: pip install 'pivot-gym[data]'") from e

COLUMNS = ("id", "domain", "pivot")
SCHEMA = pa.schema(
    [("id", pa.string()), ("domain", pa.string()), ("pivot", pa.string())],
    metadata={b"pivot_envs.format": b"pivots-parquet/1"},
)
ROW_GROUP_SIZE = 512


class ParquetPivotWriter:
    """Streams pivots into a Parquet file (temp file + rename, like the JSONL writer).

    Use as a context manager; `write(pivot)` buffers one row group at a time, and
    `write_rows(ids, domains, payloads)` appends rows whose JSON is already made (bulk
    generators and converters use it to skip building `Pivot` objects).
    """

    def __init__(
        self, path: str | os.PathLike[str], row_group_size: int = ROW_GROUP_SIZE, compression: str = "zstd"
    ) -> None:
        if row_group_size < 1:
            raise ValueError(f"expected row_group_size >= 1, got {row_group_size}")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._tmp = self.path.with_name(self.path.name + ".tmp")
        self.row_group_size = row_group_size
        # Min/max statistics of the long `pivot` strings would bloat the footer every reader parses.
        self._writer = pq.ParquetWriter(self._tmp, SCHEMA, compression=compression, write_statistics=["id", "domain"])
        self._buffer: list[Pivot] = []
        self.count = 0

    def write(self, pivot: Pivot) -> None:
        """Append one pivot."""
        self._buffer.append(pivot)
        if len(self._buffer) >= self.row_group_size:
            self._flush()

    def write_rows(self, ids: Iterable[str], domains: Iterable[str], payloads: Iterable[str]) -> None:
        """Append rows given as parallel columns (payloads are `Pivot.to_json()` as JSON text)."""
        self._flush()
        table = pa.table(
            [pa.array(ids, pa.string()), pa.array(domains, pa.string()), pa.array(payloads, pa.string())], schema=SCHEMA
        )
        self._writer.write_table(table, row_group_size=self.row_group_size)
        self.count += table.num_rows

    def _flush(self) -> None:
        if not self._buffer:
            return
        rows = self._buffer
        self._buffer = []
        payloads = [json.dumps(p.to_json(), ensure_ascii=False) for p in rows]
        table = pa.table(
            [
                pa.array([p.id for p in rows], pa.string()),
                pa.array([p.domain for p in rows], pa.string()),
                pa.array(payloads, pa.string()),
            ],
            schema=SCHEMA,
        )
        self._writer.write_table(table, row_group_size=self.row_group_size)
        self.count += len(rows)

    def close(self) -> int:
        """Flush, close and move the file into place; returns the number of rows written."""
        self._flush()
        self._writer.close()
        os.replace(self._tmp, self.path)
        return self.count

    def __enter__(self) -> ParquetPivotWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:  # leave no half-written file behind
            self._writer.close()
            self._tmp.unlink(missing_ok=True)


def write_parquet(pivots: Iterable[Pivot], path: str | os.PathLike[str], row_group_size: int = ROW_GROUP_SIZE) -> int:
    """Write pivots to a Parquet file; returns the count."""
    with ParquetPivotWriter(path, row_group_size) as writer:
        for p in pivots:
            writer.write(p)
    return writer.count


class ParquetPivots(PivotSequence):
    """A memory-mapped Parquet pivot file seen as a lazy `Sequence[Pivot]`.

    Args:
        path: the file (written by `write_parquet` or any tool with the same three columns).
        cache_row_groups: how many decoded row groups to keep (least recently used go first).

    Raises:
        DataFileError: the file cannot be opened as Parquet or lacks a needed column.
    """

    def __init__(self, path: str | os.PathLike[str], cache_row_groups: int = 8) -> None:
        self.path = Path(path)
        check_regular(self.path)  # pyarrow opens the path itself: a FIFO would block it
        try:
            self._file = pq.ParquetFile(self.path, memory_map=True, pre_buffer=False)
        except (OSError, pa.ArrowException) as e:
            raise DataFileError(str(self.path), None, f"cannot read as Parquet: {e}") from e
        names = self._file.schema_arrow.names
        missing = [c for c in ("id", "pivot") if c not in names]
        if missing:
            raise DataFileError(str(self.path), None, f"expected columns {list(COLUMNS)}, got {names}")
        meta = self._file.metadata
        self._starts: list[int] = []
        total = 0
        for g in range(meta.num_row_groups):
            self._starts.append(total)
            total += meta.row_group(g).num_rows
        self._len = total
        self._cache: OrderedDict[int, Any] = OrderedDict()
        self._cache_size = max(1, cache_row_groups)
        self._sorted_ids: Any = None  # (sorted id array, permutation), built on the first find()
        # pyarrow readers are not documented thread-safe; the HTTP server reads from threads.
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self._len

    def __reduce__(self) -> tuple[Any, ...]:
        # Reopen by path in another process (Ray workers) rather than pickling the mapping.
        return (type(self), (str(self.path), self._cache_size))

    def _row_group(self, g: int) -> Any:
        with self._lock:
            if g in self._cache:
                self._cache.move_to_end(g)
                return self._cache[g]
            try:
                column = self._file.read_row_group(g, columns=["pivot"], use_threads=False).column(0).combine_chunks()
            except (OSError, pa.ArrowException) as e:
                raise DataFileError(str(self.path), None, f"row group {g}: cannot decode: {e}") from e
            self._cache[g] = column
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
            return column

    def get(self, index: int) -> Pivot:
        """Decode the pivot at row `index` (one row-group read on a cache miss)."""
        g = bisect.bisect_right(self._starts, index) - 1
        payload = self._row_group(g)[index - self._starts[g]].as_py()
        return _parse_row(self.path, index, payload)

    def __iter__(self) -> Iterator[Pivot]:
        index = 0
        for batch in self._file.iter_batches(batch_size=ROW_GROUP_SIZE, columns=["pivot"]):
            for payload in batch.column(0).to_pylist():
                yield _parse_row(self.path, index, payload)
                index += 1

    def _ids(self) -> tuple[Any, Any]:
        with self._lock:
            if self._sorted_ids is None:
                ids = self._file.read(columns=["id"], use_threads=False).column(0).combine_chunks()
                order = pc.sort_indices(ids)
                sorted_ids = ids.take(order)
                perm = order.to_numpy().astype(np.uint32 if self._len < 2**32 else np.uint64)
                del ids, order  # only the sorted copy and the compact permutation stay
                pa.default_memory_pool().release_unused()  # hand the transient buffers back to the OS
                self._sorted_ids = (sorted_ids, perm)
            return self._sorted_ids

    def find(self, pivot_id: str) -> int | None:
        """Binary search over the sorted ids (O(log N) lookups, no Python object per pivot)."""
        ids, order = self._ids()
        keys = _ArrowKeys(ids)
        k = bisect.bisect_left(keys, pivot_id)
        if k < len(keys) and keys[k] == pivot_id:
            return int(order[k])
        return None

    def near(self, pivot_id: str, n: int = 8) -> list[str]:
        """The ids that sort next to `pivot_id`."""
        ids, _ = self._ids()
        keys = _ArrowKeys(ids)
        k = bisect.bisect_left(keys, pivot_id)
        return [keys[j] for j in range(max(0, k - n // 2), min(len(keys), k + n // 2))]


class _ArrowKeys:
    """A string array as a bisect-able Python sequence (one scalar conversion per probe)."""

    def __init__(self, array: Any) -> None:
        self.array = array

    def __len__(self) -> int:
        return len(self.array)

    def __getitem__(self, i: int) -> str:
        return self.array[i].as_py()


def _parse_row(path: Path, index: int, payload: str | None) -> Pivot:
    if payload is None:
        raise DataFileError(str(path), None, f"row {index}: the pivot column is null")
    try:
        return Pivot.from_json(decode_json(payload))
    except json.JSONDecodeError as e:  # UnsafeJSON too: a huge integer, deep nesting, NaN, a lone surrogate
        raise DataFileError(str(path), None, f"row {index}: invalid JSON: {e.msg}") from e
    except InvalidTrajectory as e:
        raise DataFileError(str(path), None, f"row {index}: {e}") from e


def open_parquet(path: Path, options: Mapping[str, Any]) -> ParquetPivots:
    """The lazy view (the `open` of the `parquet` format)."""
    return ParquetPivots(path)


def read_parquet(path: Path, options: Mapping[str, Any]) -> Iterator[Pivot]:
    """Every pivot in file order (the `read` of the `parquet` format)."""
    yield from ParquetPivots(path)


__all__ = ["ParquetPivotWriter", "ParquetPivots", "open_parquet", "read_parquet", "write_parquet"]
