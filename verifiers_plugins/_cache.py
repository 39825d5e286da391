"""A content-addressed reward cache: SQLite, stdlib only.

Key: (pivot content hash, completion hash, chain hash). The completion hash covers the parser
name and the raw completion text; the chain hash (`VerifierChain.config_hash`) covers each
verifier's name, version and config, so bumping a verifier's `version` or changing its config
never reads a stale verdict. The value is the whole `ChainResult` as JSON.

Nondeterministic chains (an LLM judge) are cached too, because re-asking a judge for the same
candidate is the expensive part of re-profiling; each such row is flagged, `stats()` counts them,
and `RewardCache(nondeterministic=False)` turns their caching off.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pivot_envs._paths import cache_dir
from verifiers_plugins._chain import ChainResult
from verifiers_plugins._verdict import Verdict

if TYPE_CHECKING:
    from pivot_envs._model import Message, Pivot
    from verifiers_plugins._chain import VerifierChain

SCHEMA = """
CREATE TABLE IF NOT EXISTS verdicts (
    pivot_hash TEXT NOT NULL,
    completion_hash TEXT NOT NULL,
    chain_hash TEXT NOT NULL,
    result TEXT NOT NULL,
    deterministic INTEGER NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (pivot_hash, completion_hash, chain_hash)
) WITHOUT ROWID;
"""


def default_cache_path() -> Path:
    """`$PIVOT_CACHE`, else `rewards.sqlite` in the cache folder (`$PIVOT_CACHE_DIR`, `~/.cache/pivot-gym`)."""
    if os.environ.get("PIVOT_CACHE"):
        return Path(os.environ["PIVOT_CACHE"])
    return cache_dir("rewards.sqlite")


def completion_hash(parser: str, completion: str) -> str:
    """SHA-256 of the parser name and the raw completion text."""
    return hashlib.sha256(f"{parser}\x00{completion}".encode("utf-8", "surrogatepass")).hexdigest()


def result_from_json(payload: dict[str, Any]) -> ChainResult:
    """Inverse of `ChainResult.to_json`."""
    verdicts = {}
    for name, v in payload["verdicts"].items():
        verdicts[name] = Verdict(
            reward=v["reward"],
            accepted=v["accepted"],
            reason=v.get("reason", ""),
            details=v.get("details") or None,
            error=v.get("error"),
            applicable=v.get("applicable", True),
            verifier=v.get("verifier", name),
        )
    return ChainResult(payload["reward"], payload["accepted"], payload["decided_by"], verdicts, payload.get("error"))


class RewardCache:
    """Chain results keyed by content; safe to share between threads of one process.

    Args:
        path: the SQLite file (created with its folders); `default_cache_path()` when None;
            ":memory:" for a throwaway cache.
        nondeterministic: also cache results of nondeterministic chains (flagged as such).

    Attributes:
        hits: lookups answered from the cache since this object was made.
        misses: lookups that had to run the chain.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, nondeterministic: bool = True) -> None:
        self.path = str(path) if path is not None else str(default_cache_path())
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.nondeterministic = nondeterministic
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        if self.path != ":memory:":
            self._db.execute("PRAGMA journal_mode=WAL")  # readers never block the one writer
        self._db.executescript(SCHEMA)
        self._db.commit()

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> RewardCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def score(
        self,
        chain: VerifierChain,
        pivot: Pivot,
        completions: Sequence[str],
        parse: Callable[[str], Message],
        parser: str,
    ) -> list[ChainResult]:
        """Chain results for a group of completions: cached ones read back, the rest verified in one batch."""
        chain_hash, pivot_hash = chain.config_hash(), pivot.content_hash()
        keys = [completion_hash(parser, c) for c in completions]
        found = self._get(pivot_hash, chain_hash, set(keys))
        todo = [i for i, k in enumerate(keys) if k not in found]
        fresh: dict[str, ChainResult] = {}
        if todo:
            unique = list(dict.fromkeys(keys[i] for i in todo))  # a repeated completion is verified once
            first = {k: completions[keys.index(k)] for k in unique}
            results = chain.verify_batch(pivot, [parse(first[k]) for k in unique])
            fresh = dict(zip(unique, results, strict=True))
            deterministic = chain.deterministic
            if deterministic or self.nondeterministic:
                self._put(pivot_hash, chain_hash, fresh, deterministic)
        with self._lock:
            self.hits += len(completions) - len(todo)
            self.misses += len(todo)
        return [found[k] if k in found else fresh[k] for k in keys]

    def _get(self, pivot_hash: str, chain_hash: str, keys: set[str]) -> dict[str, ChainResult]:
        if not keys:
            return {}
        marks = ",".join("?" * len(keys))
        with self._lock:
            rows = self._db.execute(
                f"SELECT completion_hash, result FROM verdicts WHERE pivot_hash=? AND chain_hash=? "
                f"AND completion_hash IN ({marks})",
                (pivot_hash, chain_hash, *keys),
            ).fetchall()
        return {k: result_from_json(json.loads(r)) for k, r in rows}

    def _put(self, pivot_hash: str, chain_hash: str, results: dict[str, ChainResult], deterministic: bool) -> None:
        now = time.time()
        rows = [
            (pivot_hash, k, chain_hash, json.dumps(r.to_json(), default=str), int(deterministic), now)
            for k, r in results.items()
        ]
        with self._lock:
            self._db.executemany("INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?, ?, ?)", rows)
            self._db.commit()

    def stats(self) -> dict[str, Any]:
        """Entries, how many come from nondeterministic chains, chains seen, file size, session hits/misses."""
        with self._lock:
            total, nondet, chains, pivots = self._db.execute(
                "SELECT COUNT(*), COALESCE(SUM(1 - deterministic), 0), COUNT(DISTINCT chain_hash), "
                "COUNT(DISTINCT pivot_hash) FROM verdicts"
            ).fetchone()
        size = os.path.getsize(self.path) if self.path != ":memory:" and os.path.exists(self.path) else 0
        return {
            "path": self.path,
            "entries": total,
            "nondeterministic_entries": nondet,
            "chains": chains,
            "pivots": pivots,
            "bytes": size,
            "hits": self.hits,
            "misses": self.misses,
        }

    def clear(self) -> int:
        """Delete every entry; returns how many there were."""
        with self._lock:
            n = self._db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0]
            self._db.execute("DELETE FROM verdicts")
            self._db.commit()
        if self.path != ":memory:":
            with self._lock:
                self._db.execute("VACUUM")
        return n
