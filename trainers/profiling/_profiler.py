"""The offline profiler: K samples per pivot from a frozen policy, verified, written with a Profile.

Output is pivot JSONL (readable by `load_pivots`), one line per pivot, appended and flushed as
soon as a chunk of pivots is scored. A rerun with the same output file resumes: pivots already in
the file are skipped, and a torn last line (the process died mid-write) is dropped first, so every
pivot ends up in the file exactly once.
"""

from __future__ import annotations

import json
import os
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import gymnasium as gym

from pivot_core import Pivot, Profile
from pivot_envs import ScoringEnv, as_scoring_env
from trainers.backends._base import GenerationBackend, SamplingParams
from trainers.executors import Executor, VerifyTask
from trainers.profiling._report import harness_rows
from verifiers_plugins import ChainResult


@dataclass(frozen=True)
class ProfileConfig:
    """How to profile.

    Attributes:
        k: samples per pivot.
        max_new_tokens: completion budget per sample.
        temperature: sampling temperature (the reference policy's own distribution at 1.0).
        top_p: nucleus mass.
        seed: base seed; each chunk is seeded from it and its first pivot id, so a resumed run
            samples resumed pivots as an uninterrupted run would (given the same chunking).
        chunk_size: pivots generated per backend call (and written per flush).
        limit: profile only the first N pivots of the dataset (None: all).
    """

    k: int = 8
    max_new_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int = 0
    chunk_size: int = 8
    limit: int | None = None

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"ProfileConfig.k: expected >= 1, got {self.k}")
        if self.chunk_size < 1:
            raise ValueError(f"ProfileConfig.chunk_size: expected >= 1, got {self.chunk_size}")
        if self.limit is not None and self.limit < 0:
            raise ValueError(f"ProfileConfig.limit: expected >= 0 or None, got {self.limit}")

    def sampling(self, chunk_key: str) -> SamplingParams:
        """Sampling parameters for one chunk (its seed mixes the base seed and the chunk's key)."""
        return SamplingParams(
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            seed=(self.seed * 1_000_003 + zlib.crc32(chunk_key.encode())) % (2**31),
        )


@dataclass
class ProfileSummary:
    """What a profiling run did (`pivot profile --json` prints it)."""

    output: str
    pivots: int = 0
    profiled: int = 0
    resumed: int = 0
    all_zero: int = 0
    all_one: int = 0
    constant: int = 0
    mixed: int = 0
    errors: int = 0
    mean_reward: float = 0.0
    cache_hits: int = 0
    cache_misses: int = 0
    generate_seconds: float = 0.0
    verify_seconds: float = 0.0
    seconds: float = 0.0
    policy_id: str = ""
    verifier_hash: str = ""
    nondeterministic: bool = False
    guard_issues: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    # per agent harness of converted runs (`context.harness`, `harness_rows`); empty when no pivot names one
    harnesses: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


def completed_ids(out: Path) -> list[str]:
    """Ids of the pivots already in `out`; a torn trailing line is cut off the file."""
    if not out.exists():
        return []
    ids: list[str] = []
    good = 0
    with out.open("rb") as f:
        for raw in f:
            if not raw.endswith(b"\n"):
                break  # a line without its newline was cut mid-write
            try:
                ids.append(json.loads(raw)["id"])
            except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError):
                break
            good += len(raw)
    if good != out.stat().st_size:
        with out.open("r+b") as f:
            f.truncate(good)
    return ids


def profile_pivots(
    env: ScoringEnv | gym.Env,
    backend: GenerationBackend,
    out: str | os.PathLike[str],
    config: ProfileConfig | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    executor: Executor | None = None,
) -> ProfileSummary:
    """Sample, verify and write every pivot of `env` that `out` does not hold yet.

    Args:
        env: a `PivotEnv` (or a Gymnasium wrapper of one); its `score` verifies each group, through
            its reward cache when it has one.
        backend: the frozen reference policy.
        out: the profiled pivot JSONL (appended; resumed when it exists).
        config: K, sampling and chunking.
        on_progress: called as `on_progress(done, total)` after each chunk.
        executor: where the groups are verified (`trainers.executors`, e.g. Ray workers routed by
            sandbox state); `env.score` in this process when None.

    Returns:
        The run's summary (counts cover the whole output file, timings this run).
    """
    config = config or ProfileConfig()
    env = as_scoring_env(env)
    started = time.perf_counter()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    pivots: Sequence[Pivot] = list(env.pivots)
    if config.limit is not None:
        pivots = pivots[: config.limit]
    done = set(completed_ids(out))
    if done:
        _check_resumable(out, backend.policy_id, env.chain.config_hash(), config.k)
    todo = [p for p in pivots if p.id not in done]
    cache = env.reward_cache
    hits0, misses0 = (cache.hits, cache.misses) if cache is not None else (0, 0)
    summary = ProfileSummary(
        str(out),
        pivots=len(pivots),
        resumed=len(pivots) - len(todo),
        policy_id=backend.policy_id,
        verifier_hash=env.chain.config_hash(),
        nondeterministic=not env.chain.deterministic,
        config=asdict(config),
    )
    summary.guard_issues = _guard(backend, todo)
    if on_progress:
        on_progress(summary.resumed, len(pivots))
    with out.open("a", encoding="utf-8") as f:
        for start in range(0, len(todo), config.chunk_size):
            _run_chunk(env, backend, executor, todo[start : start + config.chunk_size], config, summary, f)
            if on_progress:
                on_progress(summary.resumed + summary.profiled, len(pivots))
    if cache is not None:
        summary.cache_hits, summary.cache_misses = cache.hits - hits0, cache.misses - misses0
    _count_file(out, summary)
    summary.seconds = time.perf_counter() - started
    return summary


def _check_resumable(out: Path, policy_id: str, verifier_hash: str, k: int) -> None:
    """Refuse to append to a file profiled by another policy, chain or K: its rows would not compare."""
    with out.open(encoding="utf-8") as f:
        prof = json.loads(f.readline()).get("profile") or {}
    want = {"policy_id": policy_id, "verifier_hash": verifier_hash, "k": k}
    got = {key: prof.get(key) for key in want}
    if got != want:
        raise ValueError(
            f"{out}: cannot resume: expected profiles with {want}, the file holds {got}; write to a new --out file"
        )


def _run_chunk(
    env: ScoringEnv,
    backend: GenerationBackend,
    executor: Executor | None,
    chunk: Sequence[Pivot],
    config: ProfileConfig,
    summary: ProfileSummary,
    f: Any,
) -> None:
    """Generate, verify and append one chunk of pivots, then fsync."""
    t0 = time.perf_counter()
    groups = backend.generate(chunk, config.k, config.sampling(chunk[0].id))
    t1 = time.perf_counter()
    scored = _verify(env, executor, chunk, [[g.text for g in group] for group in groups])
    rows = [_profiled(p, results, summary) for p, results in zip(chunk, scored, strict=True)]
    summary.generate_seconds += t1 - t0
    summary.verify_seconds += time.perf_counter() - t1
    f.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    f.flush()
    os.fsync(f.fileno())  # a chunk on disk is a chunk a rerun will not redo
    summary.profiled += len(chunk)


def _guard(backend: GenerationBackend, pivots: Sequence[Pivot]) -> list[str]:
    """Ids of pivots the backend's template renders inconsistently (only backends that expose a tokenizer)."""
    tokenizer = getattr(backend, "tokenizer", None)
    if tokenizer is None or not pivots:
        return []
    from trainers.backends._chat import rendering_guard

    history = getattr(getattr(backend, "config", None), "max_history_messages", None)
    return [issue.pivot_id for issue in rendering_guard(tokenizer, pivots, history)]


def _verify(
    env: ScoringEnv, executor: Executor | None, chunk: Sequence[Pivot], texts: list[list[str]]
) -> list[list[ChainResult]]:
    if executor is None:
        return [env.score(p, t) for p, t in zip(chunk, texts, strict=True)]
    return executor.verify([VerifyTask(p, tuple(t)) for p, t in zip(chunk, texts, strict=True)])


def _profiled(pivot: Pivot, results: Sequence[Any], summary: ProfileSummary) -> dict[str, Any]:
    summary.errors += sum(1 for r in results if r.error)
    profile = Profile(len(results), tuple(r.reward for r in results), summary.policy_id, summary.verifier_hash)
    return replace(pivot, profile=profile).to_json()


def _count_file(out: Path, summary: ProfileSummary) -> None:
    """Fill the outcome counts from the whole output file (resumed rows included), and the harness split."""
    means = []
    harnesses: list[Pivot] = []
    with out.open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            if (row.get("context") or {}).get("harness"):
                harnesses.append(Pivot.from_json(row))
            prof = row.get("profile")
            if not prof:
                continue
            profile = Profile.from_json(prof)
            kind = profile.outcome
            if kind != "unprofiled":
                setattr(summary, kind, getattr(summary, kind) + 1)
            means.append(profile.mean)
    summary.mean_reward = sum(means) / len(means) if means else 0.0
    summary.harnesses = harness_rows(harnesses)
