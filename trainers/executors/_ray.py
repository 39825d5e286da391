"""`RayExecutor`: verification fanned out to Ray actors, routed so each worker's caches stay hot.

Each `VerifierWorker` actor builds the env from the same `EnvSpec` once and keeps it (and with
it the verifiers' caches: sandbox snapshots, warm containers, expert effects, tool-world
states). A task goes to the worker picked by `worker_for(route_key(pivot))`: every pivot that
restores one sandbox state lands on one worker, so a snapshot is built once per cluster, not once
per worker. Within a worker, tasks run in submission order, in chunks, so results stream back.

ray is imported here only (the `scale` extra); nothing else in the package imports this module.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

from trainers.executors._base import EnvSpec, VerifyTask, route_key, score_group, worker_for
from verifiers_plugins import ChainResult

try:
    import ray
except ImportError as e:  # the scale extra is optional
    raise ImportError("the Ray executor needs ray: pip install 'pivot-gym[scale]'") from e


@ray.remote
class VerifierWorker:
    """One Ray actor holding one env; scores the tasks routed to it."""

    def __init__(self, spec: EnvSpec) -> None:
        self.env = spec.make()
        self.keys: set[str] = set()
        self.tasks = 0

    def verify(self, tasks: list[VerifyTask]) -> list[list[ChainResult]]:
        """Score a chunk of tasks in order."""
        out = []
        for task in tasks:
            self.keys.add(route_key(task.pivot))
            out.append(score_group(self.env, task.pivot, task.completions))
        self.tasks += len(tasks)
        return out

    def stats(self) -> dict[str, Any]:
        """Process id, tasks scored, route keys seen (tests check routing with them), reward-cache counters."""
        cache = getattr(self.env, "reward_cache", None)
        return {
            "pid": os.getpid(),
            "tasks": self.tasks,
            "keys": sorted(self.keys),
            "cache_hits": cache.hits if cache is not None else 0,
            "cache_misses": cache.misses if cache is not None else 0,
            "verifiers": verifier_counters(self.env),
        }


def verifier_counters(env: Any) -> dict[str, dict[str, int]]:
    """Counters the env's verifiers expose as `stats` (and their sandbox backend's, as `backend/...`).

    This is how a cluster shows its caches are hot: e.g. `docker_shell`'s `backend/snapshots_built`
    summed over workers equals the number of distinct sandbox states, however many groups ran.
    """
    chains = [c for c in (env.chain, getattr(env, "world_chain", None)) if c is not None]
    out: dict[str, dict[str, int]] = {}
    for chain in chains:
        for name, verifier in chain.steps:
            counters = dict(getattr(verifier, "stats", None) or {})
            backend = getattr(verifier, "backend", None)
            if counters and callable(backend):
                counters.update({f"backend/{k}": n for k, n in dict(getattr(backend(), "stats", {})).items()})
            if counters:
                out[name] = counters
    return out


class RayExecutor:
    """Scores tasks on a pool of Ray actors.

    Args:
        spec: the env every worker builds.
        num_workers: actors to start; the cluster's CPU count when None.
        address: a Ray cluster address; a local cluster when None and Ray is not initialised.
        chunk_size: tasks per actor call (smaller streams results sooner, larger costs fewer calls).
        worker_cpus: CPUs each actor reserves (sandbox verification mostly waits on Docker).
    """

    name = "ray"

    def __init__(
        self,
        spec: EnvSpec,
        *,
        num_workers: int | None = None,
        address: str | None = None,
        chunk_size: int = 16,
        worker_cpus: float = 1.0,
    ) -> None:
        if chunk_size < 1:
            raise ValueError(f"RayExecutor: expected chunk_size >= 1, got {chunk_size}")
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        n = num_workers or max(1, int(ray.cluster_resources().get("CPU", 1) // worker_cpus))
        self.spec = spec
        self.chunk_size = chunk_size
        self.workers = [VerifierWorker.options(num_cpus=worker_cpus).remote(spec) for _ in range(n)]
        self.routed: Counter[int] = Counter()

    def assign(self, tasks: Sequence[VerifyTask]) -> list[int]:
        """The worker index of each task."""
        return [worker_for(route_key(t.pivot), len(self.workers)) for t in tasks]

    def verify_iter(self, tasks: Sequence[VerifyTask]) -> Iterator[tuple[int, list[ChainResult]]]:
        """Yield `(task index, results)` as chunks finish (not in task order)."""
        by_worker: dict[int, list[int]] = defaultdict(list)
        for i, w in enumerate(self.assign(tasks)):
            by_worker[w].append(i)
        pending: dict[Any, list[int]] = {}
        for w, indexes in by_worker.items():
            self.routed[w] += len(indexes)
            for s in range(0, len(indexes), self.chunk_size):
                chunk = indexes[s : s + self.chunk_size]
                pending[self.workers[w].verify.remote([tasks[i] for i in chunk])] = chunk
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                for i, results in zip(pending.pop(ref), ray.get(ref), strict=True):
                    yield i, results

    def verify(self, tasks: Sequence[VerifyTask]) -> list[list[ChainResult]]:
        """One result list per task, in task order."""
        out: list[list[ChainResult] | None] = [None] * len(tasks)
        for i, results in self.verify_iter(tasks):
            out[i] = results
        return out  # type: ignore[return-value]  (every slot is filled)

    def stats(self) -> list[dict[str, Any]]:
        """Each worker's `stats()`."""
        return ray.get([w.stats.remote() for w in self.workers])

    def close(self) -> None:
        """Stop the actors (and the local cluster this executor started)."""
        for w in self.workers:
            ray.kill(w)
        self.workers = []
        if self._owns_ray:
            ray.shutdown()


__all__ = ["RayExecutor", "VerifierWorker"]
