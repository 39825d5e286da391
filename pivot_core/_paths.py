"""Where pivot-gym keeps what it builds once and reuses (indexes, compiled helpers, reward caches)."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterable
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    """`$PIVOT_CACHE_DIR`, else `$XDG_CACHE_HOME/pivot-gym` (`~/.cache/pivot-gym`), joined with `parts`."""
    env = os.environ.get("PIVOT_CACHE_DIR")
    return Path(env).joinpath(*parts) if env else user_cache_dir(*parts)


def user_cache_dir(*parts: str) -> Path:
    """`$XDG_CACHE_HOME/pivot-gym` (`~/.cache/pivot-gym`) joined with `parts`, whatever `$PIVOT_CACHE_DIR` says.

    For what belongs beside a store every process shares (the Docker engine's images), not to one process.
    """
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").joinpath("pivot-gym", *parts)


def least_recently_used(entries: Iterable[Path], keep: int, in_use_seconds: float) -> list[Path]:
    """The cache entries past the `keep` most recently used (by mtime: a reader touches what it uses).

    One used within `in_use_seconds` is never among them (a live reader may still hold it).
    """
    aged = []
    for entry in entries:
        try:
            aged.append((time.time() - entry.stat().st_mtime, entry))
        except OSError:
            continue  # removed meanwhile
    aged.sort(key=lambda x: x[0])
    return [entry for age, entry in aged[keep:] if age > in_use_seconds]


def remove_entries(entries: Iterable[Path]) -> int:
    """Remove cache entries (folders or files), each as a whole; how many were given."""
    n = 0
    for entry in entries:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
        n += 1
    return n


SHARED_DATA_ENV = "PIVOT_SHARED_DATA"
NO_SHARED_DATA_ENV = "PIVOT_NO_SHARED_DATA"


def shared_data_file(relative: str) -> Path | None:
    """`relative` under the first shared-data folder that holds it, else None.

    The folders, in order: `$PIVOT_SHARED_DATA`; `shared/data` beside the checkout (a development
    tree); `cache_dir("shared-data")`, where `pivot data fetch` lays the public sources out.
    """
    for root in shared_data_roots():
        if (root / relative).exists():
            return root / relative
    return None


def shared_data_roots() -> list[Path]:
    """The folders searched for the full public data, in order (see `shared_data_file`).

    `PIVOT_NO_SHARED_DATA=1` makes the list empty: everything then runs on the bundled samples, as
    on a fresh clone (how the test suite's newcomer path is checked on a machine that has the data).
    """
    if os.environ.get(NO_SHARED_DATA_ENV, "") not in ("", "0"):
        return []
    env = os.environ.get(SHARED_DATA_ENV)
    roots = [Path(env)] if env else []
    roots.append(Path(__file__).resolve().parents[1].parent / "shared" / "data")
    roots.append(cache_dir("shared-data"))
    return roots
