"""`WorldState`: named tables of JSON records, copy-on-write at record granularity.

A world's initial tables are loaded once and never mutated. A state is that base plus an
overlay of the records changed since; `fork()` copies only the overlay's index (not the records),
so forking the state at a pivot for each of K candidates costs K small dict copies, and a record
is cloned the first time a fork edits it. The changes between two states are computed from the
overlays alone.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

Key = tuple[str, str]
Tables = Mapping[str, Mapping[str, Any]]


class _Deleted:
    """Marks a record removed from a table (an explicit type, not None: None is a valid JSON record)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<deleted>"


DELETED = _Deleted()


def clone_json(value: Any) -> Any:
    """Deep copy of plain JSON data (dicts, lists, scalars); several times faster than `copy.deepcopy`."""
    if isinstance(value, dict):
        return {k: clone_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone_json(v) for v in value]
    return value


class WorldState:
    """A copy-on-write view of a world's tables.

    Tool implementations read with `get`/`items` (the returned records must be treated as
    read-only: they may be shared with other states) and write with `edit` (a private copy),
    `put` and `delete`.

    Args:
        base: the initial tables, `{table: {key: record}}`; never mutated.
    """

    __slots__ = ("_base", "_overlay", "_owned")

    def __init__(self, base: Tables) -> None:
        self._base = base
        self._overlay: dict[Key, Any] = {}
        self._owned: set[Key] = set()

    # -- reading -------------------------------------------------------------------------------

    def get(self, table: str, key: str) -> Any:
        """The record, or None when the table has no such key (read-only)."""
        value = self._overlay.get((table, key), self._base.get(table, {}).get(key))
        return None if value is DELETED else value

    def __contains__(self, item: Key) -> bool:
        return self.get(*item) is not None

    def items(self, table: str) -> Iterator[tuple[str, Any]]:
        """Every `(key, record)` of a table: base order first, then records added since (read-only)."""
        base = self._base.get(table, {})
        for key, value in base.items():
            value = self._overlay.get((table, key), value)
            if value is not DELETED:
                yield key, value
        for (t, key), value in self._overlay.items():
            if t == table and key not in base and value is not DELETED:
                yield key, value

    # -- writing -------------------------------------------------------------------------------

    def edit(self, table: str, key: str) -> Any:
        """A private, mutable copy of the record (cloned on the first edit in this state)."""
        k = (table, key)
        if k not in self._owned:
            current = self.get(table, key)
            if current is None:
                raise KeyError(f"{table}/{key}: no such record to edit")
            self._overlay[k] = clone_json(current)
            self._owned.add(k)
        return self._overlay[k]

    def put(self, table: str, key: str, record: Any) -> None:
        """Insert or replace a record (the state takes ownership of `record`)."""
        self._overlay[(table, key)] = record
        self._owned.add((table, key))

    def delete(self, table: str, key: str) -> None:
        """Remove a record."""
        self._overlay[(table, key)] = DELETED
        self._owned.add((table, key))

    # -- forking and diffing ---------------------------------------------------------------------

    def fork(self) -> WorldState:
        """A child state sharing every record with this one until it edits them."""
        child = WorldState.__new__(WorldState)
        child._base = self._base
        child._overlay = dict(self._overlay)
        child._owned = set()
        return child

    def changes_since(self, parent: WorldState) -> dict[str, Any]:
        """`{"table/key": new record or None when deleted}` for every record that differs from `parent`.

        Only records this state touched can differ, so the cost is the size of the overlay, not of
        the tables. Records shared by identity are equal by construction and skipped fast.
        """
        out: dict[str, Any] = {}
        for k, value in self._overlay.items():
            before = parent._overlay.get(k, self._base.get(k[0], {}).get(k[1]))
            if value is before:
                continue
            if before is DELETED:
                before = None
            after = None if value is DELETED else value
            if after != before:
                out[f"{k[0]}/{k[1]}"] = after
        return out

    @property
    def overlay_size(self) -> int:
        """Number of records that differ from the base (a cost measure for tests and benchmarks)."""
        return len(self._overlay)
