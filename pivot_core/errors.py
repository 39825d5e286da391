"""Errors of the ground floor, and `PivotGymError`, the root of every package's error tree (one `errors.py` each)."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable


class PivotGymError(Exception):
    """Base of every error this project raises on purpose."""


class InvalidTrajectory(PivotGymError, ValueError):
    """Raised by the data model and converters when a payload has a bad or missing field."""


class DataFileError(PivotGymError, ValueError):
    """Raised by readers when a file cannot be parsed; the message names the file and line."""

    def __init__(self, path: str, line: int | None, problem: str) -> None:
        self.path = path
        self.line = line
        self.problem = problem
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {problem}")


class UnknownFormat(PivotGymError, ValueError):
    """Raised by `load_pivots` / `pivot convert` when a format name or file content is not recognised."""


class UnknownPivot(PivotGymError, KeyError):
    """Raised by `PivotEnv.reset` when `options["pivot_id"]` names no pivot of the env."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown pivot"


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """Format a difflib suggestion for a failed name lookup ("" when nothing is close).

    A name far longer than any real one (a 1 MB "pivot id") gets no suggestion: difflib would take seconds.
    """
    if len(name) > 512:
        return ""
    close = difflib.get_close_matches(name, list(choices), n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


class UnsafeJSON(json.JSONDecodeError, PivotGymError):
    """Raised by `decode_json` for text that parses to something unsafe to hand on (or not at all)."""


class ServeRefused(PivotGymError):
    """Raised by `pivot serve` when its settings would expose the server unsafely (no token off loopback)."""


class QueryRejected(PivotGymError, ValueError):
    """Raised by `SearchBackend.search` for a query past the bounds a search engine serves (too long, too many words).

    A policy can write any query; an unbounded one costs a full-text engine time that grows with
    its length (a 32 KB query of common words took 100 s of SQLite FTS5). The message says which
    bound, so a verifier can reject the call with it as the reason.
    """


class SearchTimeout(PivotGymError, TimeoutError):
    """Raised by `SearchBackend.search` when a query ran past the backend's time limit and was stopped."""


class AliasBudgetExceeded(PivotGymError, ValueError):
    """Raised by `load_yaml` when aliases stand for more than the budget allows (or make a cycle)."""

    def __init__(self, line: int | None, budget: int) -> None:
        super().__init__(f"YAML aliases expand past {budget:,} nodes and characters (an alias bomb?)")
        self.line = line


class EditorUnsupported(PivotGymError, ValueError):
    """An editor call whose file change a replay cannot make (`undo_edit`, an unknown sub-command)."""
