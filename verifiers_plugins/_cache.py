"""A content-addressed reward cache: SQLite, stdlib only.

`CachedChain` wraps a `VerifierChain` and has its interface: it is the one way a completion becomes
a reward once a cache is configured. Key: (pivot content hash, action hash, chain key). The action
hash covers the parsed action (what every verifier sees). The chain key covers each verifier's
name, version and config (`VerifierChain.config_hash`) and the verifiers' fingerprints of what
else a verdict at that pivot depends on (`VerifierChain.fingerprint`: the tool world's database
content, the task image's id, a third-party sandbox backend's name, the corpus content; not the
built-in Docker or namespace backend, which give the same verdicts). So bumping a version,
changing a config, rebuilding an image or pointing `PIVOT_TAU_AIRLINE_DB` at another database
never reads a stale verdict; a verifier that cannot tell its fingerprint (the engine is down)
turns caching off for that pivot. The value is the whole `ChainResult` as JSON, range-checked
when read back.

Only verdicts a rerun would repeat are cached. Never cached: errors (a dead Docker daemon must not
stay a dead reward), and verdicts a verifier marked unstable (`details["stable"] is False`: a race
it saw). Verdicts of nondeterministic verifiers (an LLM judge) are not cached either, unless the
cache is opened with `RewardCache(nondeterministic=True)`, for re-profiling where re-asking the
judge is the expensive part; such rows are flagged and `stats()` counts them. A write that fails (a
full disk) turns caching off with one warning and scoring goes on; an unreadable row is a miss; a
file that is not a reward cache is a `RewardCacheError` naming it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import threading
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pivot_core import cache_dir
from verifiers_plugins._chain import ChainResult, VerifierChain
from verifiers_plugins._verdict import Verdict, is_unstable
from verifiers_plugins.errors import RewardCacheError

if TYPE_CHECKING:
    from pivot_core import Message, Pivot

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


def action_hash(action: Message) -> str:
    """SHA-256 of the parsed action (its OpenAI chat JSON): what every verifier sees of a completion."""
    blob = json.dumps(action.to_json(), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


def result_from_json(payload: dict[str, Any]) -> ChainResult:
    """Inverse of `ChainResult.to_json`.

    Raises:
        ValueError: the payload is not a chain result (a missing key, a wrong type, a reward out of [0, 1]).
    """
    try:
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
        reward = payload["reward"]
        if isinstance(reward, bool) or not isinstance(reward, (int, float)) or not 0.0 <= reward <= 1.0:
            raise ValueError(f"reward {reward!r} is not a number in [0, 1]")
        if not isinstance(payload["accepted"], bool):
            raise ValueError(f"accepted {payload['accepted']!r} is not a bool")
        return ChainResult(
            float(reward), payload["accepted"], str(payload["decided_by"]), verdicts, payload.get("error")
        )
    except (KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"not a chain result: {type(e).__name__}: {e}") from e


def cacheable(result: ChainResult) -> bool:
    """Only repeatable decisions are cached.

    Not a result resting on an error (a dead daemon, a timeout), nor one with a verdict its
    verifier marked unstable (`details["stable"] is False`).
    """
    return result.error is None and not any(v.error or is_unstable(v) for v in result.verdicts.values())


def chain_key(chain_hash: str, fingerprint: str) -> str:
    """The cache's chain column: the chain hash, with the verifiers' fingerprint folded in when there is one."""
    if not fingerprint:
        return chain_hash
    return hashlib.sha256(f"{chain_hash}\0{fingerprint}".encode()).hexdigest()[:32]


class RewardCache:
    """Chain results keyed by content; safe to share between threads of one process.

    Args:
        path: the SQLite file (created with its folders); `default_cache_path()` when None;
            ":memory:" for a throwaway cache.
        nondeterministic: also cache verdicts of nondeterministic verifiers (flagged as such);
            off by default, since a second run of a judge need not agree with the first.

    Attributes:
        hits: lookups answered from the cache since this object was made.
        misses: lookups that had to run the chain.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, nondeterministic: bool = False) -> None:
        self.path = str(path) if path is not None else str(default_cache_path())
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.nondeterministic = nondeterministic
        self.hits = 0
        self.misses = 0
        self.writable = True
        self._warned: set[str] = set()
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
            if self.path != ":memory:":
                self._db.execute("PRAGMA journal_mode=WAL")  # readers never block the one writer
            self._db.executescript(SCHEMA)
            self._db.commit()
            self._db.execute("SELECT pivot_hash, completion_hash, chain_hash, result FROM verdicts LIMIT 1").fetchall()
        except sqlite3.Error as e:
            raise RewardCacheError(
                f"reward cache {self.path}: not a readable reward cache ({e}); delete the file or pass another "
                f"cache path (--cache / $PIVOT_CACHE)"
            ) from e

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> RewardCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get(self, pivot_hash: str, chain_hash: str, keys: set[str]) -> dict[str, ChainResult]:
        """The cached results among `keys` (action hashes); an unreadable row is a miss, with one warning."""
        if not keys:
            return {}
        marks = ",".join("?" * len(keys))
        with self._lock:
            # a nondeterministic row (written with the opt-in) is served only to a cache that opts in too
            rows = self._db.execute(
                f"SELECT completion_hash, result FROM verdicts WHERE pivot_hash=? AND chain_hash=? "
                f"AND completion_hash IN ({marks}) AND (deterministic = 1 OR ?)",
                (pivot_hash, chain_hash, *keys, int(self.nondeterministic)),
            ).fetchall()
        out = {}
        for key, blob in rows:
            try:
                result = result_from_json(json.loads(blob))
            except ValueError as e:  # json.JSONDecodeError is a ValueError too
                self._warn_once(
                    "bad_row", f"reward cache {self.path}: ignoring an unreadable row ({e}); it is re-scored"
                )
                continue
            if cacheable(result):  # an error or unstable verdict written by an older version is never served
                out[key] = result
        return out

    def put(self, pivot_hash: str, chain_hash: str, results: dict[str, ChainResult], deterministic: bool) -> None:
        """Store decisions (error results are skipped); a write that fails turns caching off with one warning."""
        rows = [
            (pivot_hash, k, chain_hash, json.dumps(r.to_json(), default=str), int(deterministic), time.time())
            for k, r in results.items()
            if cacheable(r)
        ]
        if not rows or not self.writable:
            return
        try:
            with self._lock:
                self._db.executemany("INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?, ?, ?)", rows)
                self._db.commit()
        except sqlite3.Error as e:  # a full disk, a read-only file: scoring goes on uncached
            self.writable = False
            with self._lock, contextlib.suppress(sqlite3.Error):
                self._db.rollback()
            self._warn_once("write", f"reward cache {self.path}: cannot write ({e}); going on without caching")

    def _warn_once(self, kind: str, message: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            warnings.warn(message, RuntimeWarning, stacklevel=3)

    def count(self, hits: int, misses: int) -> None:
        """Add to the session's hit and miss counters."""
        with self._lock:
            self.hits += hits
            self.misses += misses

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


class CachedChain:
    """A `VerifierChain` whose verdicts are read from and written to a `RewardCache`: the chain's own interface.

    The key is (pivot content hash, hash of the parsed action, chain key): the completion is parsed
    once, by the caller, and the cache sees exactly what the verifiers see; the chain key folds the
    verifiers' fingerprints into the chain hash (see the module docstring). Error, unstable and
    (unless opted in) nondeterministic results are never stored. A repeated action in a group is
    verified once.
    """

    def __init__(self, chain: VerifierChain, cache: RewardCache) -> None:
        self.chain = chain
        self.cache = cache
        self._chain_hash = chain.config_hash()
        self._deterministic = chain.deterministic_names()

    @property
    def steps(self) -> list[tuple[str, Any]]:
        """The wrapped chain's verifiers, in run order."""
        return self.chain.steps

    @property
    def names(self) -> list[str]:
        """Verifier names in run order."""
        return self.chain.names

    @property
    def deterministic(self) -> bool:
        """True when every verifier of the chain is deterministic."""
        return self.chain.deterministic

    def config_hash(self) -> str:
        """The wrapped chain's hash (a cache does not change what a reward means)."""
        return self._chain_hash

    def __call__(self, pivot: Pivot, action: Message) -> ChainResult:
        """Score one action."""
        return self.verify_batch(pivot, [action])[0]

    def fingerprint(self, pivot: Pivot) -> str | None:
        """The wrapped chain's fingerprint of `pivot` (see `VerifierChain.fingerprint`)."""
        return self.chain.fingerprint(pivot)

    def verify_batch(self, pivot: Pivot, actions: Sequence[Message]) -> list[ChainResult]:
        """Cached results read back, the rest verified in one batch and the repeatable ones stored."""
        keys = [action_hash(a) for a in actions]
        fingerprint = self.chain.fingerprint(pivot)
        if fingerprint is None:  # a verifier cannot tell what its verdict rests on: no reading, no writing
            found: dict[str, ChainResult] = {}
        else:
            pivot_hash, key = pivot.content_hash(), chain_key(self._chain_hash, fingerprint)
            found = self.cache.get(pivot_hash, key, set(keys))
        unique = list(dict.fromkeys(k for k in keys if k not in found))
        fresh: dict[str, ChainResult] = {}
        if unique:
            first = {k: actions[keys.index(k)] for k in unique}
            fresh = dict(zip(unique, self.chain.verify_batch(pivot, [first[k] for k in unique]), strict=True))
            if fingerprint is not None:
                self._store(pivot_hash, key, fresh)
        self.cache.count(hits=sum(k in found for k in keys), misses=sum(k not in found for k in keys))
        return [found[k] if k in found else fresh[k] for k in keys]

    def _store(self, pivot_hash: str, key: str, fresh: dict[str, ChainResult]) -> None:
        """Write the results a rerun would repeat: each flagged deterministic unless a judge's verdict is in it."""
        by_kind: dict[bool, dict[str, ChainResult]] = {True: {}, False: {}}
        for k, result in fresh.items():
            deterministic = all(name in self._deterministic for name in result.verdicts)
            if deterministic or self.cache.nondeterministic:
                by_kind[deterministic][k] = result
        for deterministic, results in by_kind.items():
            if results:
                self.cache.put(pivot_hash, key, results, deterministic)
