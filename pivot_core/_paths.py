"""Where pivot-gym keeps what it builds once and reuses (indexes, compiled helpers, reward caches)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    """`$PIVOT_CACHE_DIR`, else `$XDG_CACHE_HOME/pivot-gym` (`~/.cache/pivot-gym`), joined with `parts`."""
    env = os.environ.get("PIVOT_CACHE_DIR")
    base = Path(env) if env else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pivot-gym"
    return base.joinpath(*parts)
