"""`pivot eval`: held-out acceptance of a policy, with bootstrap intervals clustered by trajectory.

K samples per pivot (one or more sampling seeds) are scored through the env's one scoring path
(`env.score`); acceptance is the share accepted. Samples of one pivot, and pivots of one
trajectory, are not independent (they share a history, and a policy that fails one turn of a
conversation tends to fail its neighbours), so the interval resamples whole trajectories: a
percentile bootstrap over clusters. The same resampling, applied to several runs scored on the
same pivots, gives paired intervals for a difference between methods (`contrast_ci`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from pivot_core import Pivot, trajectory_key
from trainers.backends._base import GenerationBackend, SamplingParams
from trainers.settings import StageSettings, settings_of


@dataclass(frozen=True)
class Interval:
    """A point estimate and its bootstrap interval.

    Attributes:
        value: the estimate on the data as observed.
        low: lower bound.
        high: upper bound.
        n: samples (or pivots) behind it.
        clusters: trajectories behind it.
    """

    value: float
    low: float
    high: float
    n: int = 0
    clusters: int = 0

    def to_json(self) -> dict[str, Any]:
        """`{"accept", "ci": [low, high], "n", "clusters"}`."""
        return {"accept": self.value, "ci": [self.low, self.high], "n": self.n, "clusters": self.clusters}


def contrast_ci(
    successes: np.ndarray,
    trials: np.ndarray,
    weights: Sequence[float],
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Percentile bootstrap over clusters of `sum_m weights[m] * acceptance_m`.

    Args:
        successes: `[clusters, runs]` accepted samples per cluster and run.
        trials: `[clusters, runs]` samples per cluster and run.
        weights: one per run: `[1]` is a run's acceptance, `[1/3] * 3 + [-1/3] * 3` the mean
            difference of two methods over three seeds each. Every run is resampled with the same
            clusters (paired), which is what makes a difference's interval narrow when the runs
            agree on which trajectories are hard.
        resamples: bootstrap resamples.
        confidence: two-sided coverage.
        seed: seeds the resampling.

    Returns:
        `(value, low, high)`.

    Raises:
        ValueError: shapes that do not agree, no clusters, or a run with no trials.
    """
    s, t, w = np.asarray(successes, float), np.asarray(trials, float), np.asarray(weights, float)
    if s.ndim != 2 or s.shape != t.shape or s.shape[1] != len(w):
        raise ValueError(f"contrast_ci: expected [clusters, runs] arrays and one weight per run, got {s.shape}")
    if s.shape[0] == 0 or (t.sum(axis=0) == 0).any():
        raise ValueError("contrast_ci: expected at least one cluster and one trial per run")
    value = float((s.sum(axis=0) / t.sum(axis=0)) @ w)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, s.shape[0], size=(resamples, s.shape[0]))
    tt = t[idx].sum(axis=1)
    # a resample can miss every cluster of a run with trials in only some clusters: count it at 0
    rates = np.divide(s[idx].sum(axis=1), tt, out=np.zeros_like(tt), where=tt > 0)
    stats = rates @ w
    alpha = (1.0 - confidence) / 2
    low, high = np.quantile(stats, [alpha, 1.0 - alpha])
    return value, float(low), float(high)


def clustered_interval(
    clusters: Sequence[str], accepted: Sequence[float], resamples: int = 2000, confidence: float = 0.95, seed: int = 0
) -> Interval:
    """Acceptance of a set of samples and its interval, resampling `clusters` (one label per sample)."""
    if len(clusters) != len(accepted):
        raise ValueError(f"clustered_interval: {len(clusters)} cluster labels for {len(accepted)} samples")
    if not accepted:
        return Interval(float("nan"), float("nan"), float("nan"), 0, 0)
    names = sorted(set(clusters))
    index = {c: i for i, c in enumerate(names)}
    s, t = np.zeros((len(names), 1)), np.zeros((len(names), 1))
    for c, a in zip(clusters, accepted, strict=True):
        s[index[c], 0] += a
        t[index[c], 0] += 1
    value, low, high = contrast_ci(s, t, [1.0], resamples, confidence, seed)
    return Interval(value, low, high, len(accepted), len(names))


def turn_kind(pivot: Pivot) -> str:
    """What the expert did at this pivot: "tool_call" or "text"."""
    return "tool_call" if pivot.expert.tool_calls else "text"


def tool_of(pivot: Pivot) -> str:
    """The expert's (first) tool name, or "text" for a text turn."""
    return pivot.expert.tool_calls[0].name if pivot.expert.tool_calls else "text"


@dataclass(frozen=True)
class SampleRecord:
    """One scored sample.

    Attributes:
        pivot_id: the pivot.
        trajectory: its trajectory (the bootstrap cluster).
        tool: the expert's tool name or "text".
        kind: "tool_call" or "text".
        seed: the sampling seed.
        accepted: 1.0 when the chain accepted it.
        error: True when the verdict rests on a verifier error (counted as not accepted).
    """

    pivot_id: str
    trajectory: str
    tool: str
    kind: str
    seed: int
    accepted: float
    error: bool = False


@dataclass(frozen=True)
class EvalResult:
    """What `evaluate` measured.

    Attributes:
        overall: acceptance over every sample.
        per_kind: by expert turn kind.
        per_tool: by expert tool (or "text").
        records: every scored sample.
        settings: how the policy was sampled (k, temperature, seeds, budget, cuts).
    """

    overall: Interval
    per_kind: Mapping[str, Interval]
    per_tool: Mapping[str, Interval]
    records: tuple[SampleRecord, ...]
    settings: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """`{"accept", "ci", "n", "clusters", "per_kind", "per_tool", "settings", "verifier_errors"}`."""
        return {
            **self.overall.to_json(),
            "per_kind": {k: v.to_json() for k, v in self.per_kind.items()},
            "per_tool": {k: v.to_json() for k, v in self.per_tool.items()},
            "verifier_errors": sum(r.error for r in self.records),
            "settings": dict(self.settings),
        }


def summarize(records: Sequence[SampleRecord], settings: Mapping[str, Any] | None = None, seed: int = 0) -> EvalResult:
    """Overall, per-kind and per-tool acceptance with clustered intervals."""

    def interval(rs: Sequence[SampleRecord]) -> Interval:
        return clustered_interval([r.trajectory for r in rs], [r.accepted for r in rs], seed=seed)

    def by(key: Callable[[SampleRecord], str]) -> dict[str, Interval]:
        groups: dict[str, list[SampleRecord]] = {}
        for r in records:
            groups.setdefault(key(r), []).append(r)
        return {k: interval(v) for k, v in sorted(groups.items())}

    return EvalResult(
        interval(records), by(lambda r: r.kind), by(lambda r: r.tool), tuple(records), dict(settings or {})
    )


def score_samples(
    backend: GenerationBackend,
    env: Any,
    pivots: Sequence[Pivot],
    k: int,
    params: SamplingParams,
    seeds: Sequence[int] = (0,),
    on_seed: Callable[[int], None] | None = None,
) -> list[SampleRecord]:
    """Sample `k` completions per pivot for each seed and score them through the env's one scoring path.

    A completion the chain cannot decide (a verifier error) is recorded as not accepted, with
    `error=True`, so that acceptance never rests on a guess.
    """
    records: list[SampleRecord] = []
    for seed in seeds:
        groups = backend.generate(list(pivots), k, replace(params, seed=seed))
        for pivot, group in zip(pivots, groups, strict=True):
            results = env.score(pivot, [g.text for g in group])
            for r in results:
                records.append(
                    SampleRecord(
                        pivot.id,
                        trajectory_key(pivot),
                        tool_of(pivot),
                        turn_kind(pivot),
                        int(seed),
                        float(r.accepted and r.error is None),
                        r.error is not None,
                    )
                )
        if on_seed is not None:
            on_seed(seed)
    return records


def cluster_counts(
    runs: Sequence[Sequence[SampleRecord]], clusters: Sequence[str] | None = None
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """`(clusters, successes [C, runs], trials [C, runs])` of several runs scored on the same pivots."""
    names = sorted(clusters or {r.trajectory for run in runs for r in run})
    index = {c: i for i, c in enumerate(names)}
    s, t = np.zeros((len(names), len(runs))), np.zeros((len(names), len(runs)))
    for j, run in enumerate(runs):
        for r in run:
            s[index[r.trajectory], j] += r.accepted
            t[index[r.trajectory], j] += 1
    return names, s, t


def model_folder(path: str | Path) -> Path:
    """The weights folder of a model path: a GRPO run folder resolves to its `final/`."""
    path = Path(path)
    if not (path / "config.json").is_file() and (path / "final" / "config.json").is_file():
        return path / "final"
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"--model: expected a model folder with config.json (or a run with final/), got {path}")
    return path


def local_backend(model: str | Path, device: str = "cpu", settings: StageSettings | None = None) -> tuple[Any, Path]:
    """A transformers backend over a local model folder, prompted with `settings` (its saved ones by default)."""
    from trainers.backends._transformers import TransformersBackend, TransformersConfig

    folder = model_folder(model)
    settings = settings or settings_of(folder)
    config = TransformersConfig(
        str(folder),
        device=device,
        max_history_messages=settings.max_history_messages,
        max_prompt_tokens=settings.max_prompt_tokens,
    )
    return TransformersBackend(config), folder


def evaluate(
    backend: GenerationBackend,
    env: Any,
    pivots: Sequence[Pivot],
    k: int,
    params: SamplingParams,
    seeds: Sequence[int] = (0,),
    settings: Mapping[str, Any] | None = None,
    on_seed: Callable[[int], None] | None = None,
) -> EvalResult:
    """Score `k` samples per pivot per seed and summarize them with clustered intervals."""
    if not pivots:
        raise ValueError("evaluate: expected at least one pivot, got none")
    records = score_samples(backend, env, pivots, k, params, seeds, on_seed)
    run = {"k": k, "seeds": list(seeds), "temperature": params.temperature, "max_new_tokens": params.max_new_tokens}
    return summarize(records, {**run, **dict(settings or {}), "policy": getattr(backend, "policy_id", "?")})
