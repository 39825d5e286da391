"""Random-access pivot sequences that an env can hold instead of a list.

A `PivotSequence` is a read-only `Sequence[Pivot]` that builds a pivot only when it is indexed
(the Parquet reader is one), plus an id lookup that costs no Python object per pivot. The env
keeps plain lists for small in-memory datasets and one of these for large files.
"""

from __future__ import annotations

import abc
import bisect
from collections.abc import Iterator, Mapping, Sequence
from typing import overload

from pivot_core._model import Pivot


class PivotSequence(Sequence[Pivot], abc.ABC):
    """A lazy, read-only sequence of pivots with an id lookup.

    Subclasses implement `__len__`, `get(index)`, `find(pivot_id)` and `near(pivot_id)`.
    Iteration and slicing build pivots one at a time; nothing here materializes the whole set.
    """

    @abc.abstractmethod
    def __len__(self) -> int: ...

    @abc.abstractmethod
    def get(self, index: int) -> Pivot:
        """The pivot at `index` (0 <= index < len), built on demand."""

    @abc.abstractmethod
    def find(self, pivot_id: str) -> int | None:
        """The index of the pivot with that id, None when absent."""

    @abc.abstractmethod
    def near(self, pivot_id: str, n: int = 8) -> list[str]:
        """A few ids close to `pivot_id` (for "did you mean" on a failed lookup)."""

    @overload
    def __getitem__(self, index: int) -> Pivot: ...

    @overload
    def __getitem__(self, index: slice) -> list[Pivot]: ...

    def __getitem__(self, index: int | slice) -> Pivot | list[Pivot]:
        if isinstance(index, slice):
            return [self.get(i) for i in range(*index.indices(len(self)))]
        n = len(self)
        i = index + n if index < 0 else index
        if not 0 <= i < n:
            raise IndexError(f"pivot index out of range: expected -{n} <= index < {n}, got {index}")
        return self.get(i)

    def __iter__(self) -> Iterator[Pivot]:
        for i in range(len(self)):
            yield self.get(i)

    def __contains__(self, item: object) -> bool:
        if not isinstance(item, Pivot):
            return False
        i = self.find(item.id)
        return i is not None and self.get(i) == item


class ConcatPivots(PivotSequence):
    """Several pivot sequences (lists or lazy) read as one; ids resolve in the first part that has them."""

    def __init__(self, parts: Sequence[Sequence[Pivot]]) -> None:
        self.parts = [p for p in parts if len(p)]
        self._starts: list[int] = []
        total = 0
        for part in self.parts:
            self._starts.append(total)
            total += len(part)
        self._len = total
        self._indexes = [index_of(p) for p in self.parts]

    def __len__(self) -> int:
        return self._len

    def get(self, index: int) -> Pivot:
        """The pivot at `index`, read from the part that holds it."""
        k = bisect.bisect_right(self._starts, index) - 1
        return self.parts[k][index - self._starts[k]]

    def find(self, pivot_id: str) -> int | None:
        """The first index whose pivot has that id."""
        for start, index in zip(self._starts, self._indexes, strict=True):
            if pivot_id in index:
                return start + index[pivot_id]
        return None

    def near(self, pivot_id: str, n: int = 8) -> list[str]:
        """Ids close to `pivot_id` in any part."""
        return [c for index in self._indexes for c in candidate_ids(index, pivot_id, n)]


class LazyIdIndex(Mapping[str, int]):
    """`{pivot id: index}` backed by `PivotSequence.find` (no dict of every id)."""

    def __init__(self, pivots: PivotSequence) -> None:
        self.pivots = pivots

    def __getitem__(self, pivot_id: str) -> int:
        i = self.pivots.find(pivot_id) if isinstance(pivot_id, str) else None
        if i is None:
            raise KeyError(pivot_id)
        return i

    def __contains__(self, pivot_id: object) -> bool:
        return isinstance(pivot_id, str) and self.pivots.find(pivot_id) is not None

    def __iter__(self) -> Iterator[str]:
        return (p.id for p in self.pivots)

    def __len__(self) -> int:
        return len(self.pivots)


def index_of(pivots: Sequence[Pivot]) -> Mapping[str, int]:
    """An id -> index mapping: a dict for in-memory lists, a lazy view for `PivotSequence`s."""
    if isinstance(pivots, PivotSequence):
        return LazyIdIndex(pivots)
    return {p.id: i for i, p in enumerate(pivots)}


def candidate_ids(index: Mapping[str, int], pivot_id: str, n: int = 8) -> list[str] | Mapping[str, int]:
    """Ids worth comparing in a "did you mean" message (never a scan of a lazy sequence)."""
    if isinstance(index, LazyIdIndex):
        return index.pivots.near(pivot_id, n)
    return index


__all__ = ["ConcatPivots", "LazyIdIndex", "PivotSequence", "candidate_ids", "index_of"]
