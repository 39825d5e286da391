"""`docker_shell` acceptor: run expert and candidate at the restored pivot state and compare their effects.

The state is `pivot.context["sandbox"]` (image, set-up, working directory) plus the shell commands
of the history replayed in order. The expert action runs twice, so that the parts of its effect
that change from run to run (timestamps, PIDs, random names) are left out of the comparison; the
expert's effect is cached per state, so a GRPO group and later epochs reuse it. A Terminus turn
runs what its terminal would (`typed_action`): keystrokes without a final Enter are typed, not run,
and a candidate that leaves other text typed at the prompt than the expert's is another action.
A turn of a converted agent run runs as its harness ran it (`harness_action`): a mini-swe-agent
command in a fresh subshell from the harness's working directory, history and candidates alike.

Processes the history left running (a server started with `&`) run again in every sandbox on the
state's snapshot (`pivot_sandbox.replay.restore`). A state whose processes cannot be restarted is not judged
here (`ProcessesNotRestored`): the verdict is a skip naming them, and the static part of the chain
scores the pivot.

A state the chosen backend cannot run (the namespace backend's `backend_for`: a state Docker replayed
with registry access whose layer cannot be taken over exactly) is run by the Docker backend, and its
verdicts name it (`details["backend"]`, `details["backend_why"]`): never a silent swap, never a
different verdict.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from pivot_core import (
    Message,
    Pivot,
    harness_action,
    history_typed,
    mini_swe_agent_action,
    mini_swe_agent_submits,
)
from pivot_sandbox import (
    BACKEND_NAMES,
    STDERR_MODES,
    Effect,
    ProcessesNotRestored,
    ReplayMark,
    SandboxBackend,
    SandboxContext,
    SandboxSpec,
    Unstable,
    action_bound,
    chosen_backend,
    compare_effects,
    docker_backend,
    image_id,
    is_racy,
    limits_of,
    namespace_backend,
    path_shape,
    reason_for,
    state_bound,
    unstable_parts,
)
from pivot_sandbox.errors import SandboxError
from verifiers_plugins._host import get_host
from verifiers_plugins._sandboxes import sandbox_backend
from verifiers_plugins._verdict import Verdict
from verifiers_plugins.hookspecs import hookimpl

_EXPERT_CACHE_SIZE = 4096


class DockerShell:
    """Accepts a candidate whose effect at the pivot state matches the expert's.

    Args:
        backend: name of a sandbox backend registered through `register_sandboxes` ("docker",
            "namespace"); default: `PIVOT_SANDBOX`, else the namespace backend where this machine can
            run it, else "docker" (`pivot_sandbox.chosen_backend`).
        expert_gap: seconds between the end of the first expert run and the start of the second, so that clock readings
            with one-second resolution (`date`, `ls -l` of a new file) differ between them and are
            recognised as unstable. Paid once per pivot state: the expert's effect is cached.
        stderr: how stderr counts: "exact" (default), "presence" (both empty or both not: error
            messages name the program that failed) or "ignore".
        **backend_config: passed to the backend factory (e.g. `action_timeout`, `pool_size`).
    """

    role = "acceptor"
    cost = "sandbox"
    deterministic = True
    # 2: descriptors carry mode and owner; expert runs the sandbox stopped are errors, not references
    # 3: the shell state and the processes an action leaves are part of its effect; racy verdicts unstable
    # 4: a Terminus turn runs what its terminal would (no Enter, no run); text left typed must be the expert's
    # 5: processes compared by identity; what an action changes outside the overlay (/etc/hosts, /dev) and
    #    extended attributes are part of its effect (issue 38)
    # 6: a test runner's duration report ("in 0.01s") is masked in outputs (`mask_durations`); the submission of
    #    a SWE-bench run is the instance tests' to judge (`swe_tests`)
    # 7: an unstable part still bounds a candidate to what either run of the expert did (processes, a path's
    #    kind and size, exit status, working directory, the lines both printed); descriptors carry a file's size
    # 8: a path of a varying name is bound as the runs made theirs (kind, size); an unstable shell state key
    #    holds a value of the shape either run left it, and a masked line of output the shape of both runs' lines
    version = "8"
    # config that changes no verdict, so the reward cache's key leaves it out: the built-in backends
    # give the same verdicts (docs/results/sandbox.md), and `fingerprint` names any other backend
    verdict_neutral_config: ClassVar[tuple[str, ...]] = ("backend",)

    # Shared by every instance: the expert's effect at a state is the same for any env of the process.
    _expert_cache: OrderedDict[tuple[Any, ...], tuple[Effect, Unstable]] = OrderedDict()
    _cache_lock = threading.RLock()
    stats: Counter[str] = Counter()

    def __init__(
        self, backend: str | None = None, expert_gap: float = 1.05, stderr: str = "exact", **backend_config: Any
    ) -> None:
        if stderr not in STDERR_MODES:
            raise ValueError(f"docker_shell stderr: expected one of {STDERR_MODES}, got {stderr!r}")
        self.backend_name = backend or chosen_backend()
        self.expert_gap = expert_gap
        self.stderr = stderr
        self.backend_config = dict(backend_config)
        get_host().get("sandboxes", self.backend_name)  # fail now on an unknown backend name, with a did-you-mean

    def backend(self) -> SandboxBackend:
        """The sandbox backend (shared per configuration), checked against the contract on first use."""
        return sandbox_backend(self.backend_name, **self.backend_config)

    def fingerprint(self, pivot: Pivot) -> str | None:
        """The id of the image the pivot's state is built on (see `sandbox_fingerprint`)."""
        return sandbox_fingerprint(self.backend_name, self.backend_config, pivot)

    def timeout_for(self, pivot: Pivot, actions: Sequence[Message]) -> float | None:
        """Seconds a group at `pivot` may take: the chain's deadline for it (`call_timeout`).

        The state built, up to three expert runs with their gaps, each candidate: every part is
        bounded by the sandbox's limits, so a wait past their sum waits on something stuck.
        """
        spec = SandboxSpec.from_context(pivot.context)
        if spec is None:
            return None  # a skip: the per-call default holds
        limits = limits_of(self.backend_config)
        runs = 3 + len(actions)
        return (
            state_bound(limits, spec, history_typed(pivot).commands) + runs * action_bound(limits) + 2 * self.expert_gap
        )

    def verify(self, pivot: Pivot, action: Message) -> Verdict:
        """Score one candidate (a group of one)."""
        return self.verify_batch(pivot, [action])[0]

    def verify_batch(self, pivot: Pivot, actions: Sequence[Message]) -> list[Verdict]:
        """Score a group at one pivot: one replay, one expert pair, identical candidates run once.

        The expert's own commands are run like any candidate (no string shortcut): the chain's
        `string_similarity` is the fast path, this verifier always compares effects.
        """
        sandbox = SandboxContext.from_context(pivot.context)
        if sandbox is None:
            return [Verdict.skip("pivot has no sandbox context")] * len(actions)
        if skipped := _not_judged(pivot, sandbox):
            return [Verdict.skip(skipped)] * len(actions)
        spec = sandbox.spec
        before = history_typed(pivot)  # the terminal's state: what ran, and what is left typed
        # each turn runs as the run's harness ran it (mini-swe-agent: a fresh subshell per command)
        expert_typed = harness_action(pivot.expert, pivot.context, before.pending)
        expert = list(expert_typed.commands)
        if not expert:
            return [Verdict.skip("the expert turn runs no shell command")] * len(actions)
        history = list(before.commands)
        typed = [harness_action(a, pivot.context, before.pending) for a in actions]
        wanted = [list(t.commands) for t in typed]
        ran_on, why = self.backend_name, None
        try:
            backend, ran_on, why = self._backend_for(spec, history)
            # the expert's effect holds the state's file times: one cached on an evicted, rebuilt
            # snapshot would differ from every candidate's there (a minute later: `ls -l`)
            build = backend.snapshot_id(spec, history)
            key = (ran_on, repr(sorted(self.backend_config.items())), spec.key(history), tuple(expert), build)
            reference = self._cached_expert(key)
            if reference is None:
                first, first_ended = self._run_expert(backend, spec, history, expert), time.monotonic()
            unique = list(dict.fromkeys(tuple(w) for w in wanted if w))
            # the candidates run while the expert's second run waits out its gap
            effects = dict(zip(unique, backend.run_group(spec, history, unique), strict=True)) if unique else {}
            if reference is None:
                reference = self._settle_expert(backend, spec, history, expert, first, first_ended, key)
        except ProcessesNotRestored as e:
            # a server the history started could not be restarted: no effect is judged on a state without it
            self._count("states_with_processes")
            return [Verdict.skip(f"not sandboxed: {e}")] * len(actions)
        except SandboxError as e:
            return [Verdict.failed(f"sandbox {_named(ran_on, why)}: {e}")] * len(actions)
        except Exception as e:  # noqa: BLE001 - a raise here would make the chain re-run the group one by one
            return [Verdict.failed(f"sandbox {_named(ran_on, why)}: {type(e).__name__}: {e}")] * len(actions)
        self._count("candidates_run", len(unique))
        out = []
        for commands, t in zip(wanted, typed, strict=True):
            if not commands:
                out.append(Verdict.reject("the completion runs no shell command"))
            elif t.pending != expert_typed.pending:
                # typed and not run: the next Enter runs it (`rm -rf /` waiting at the prompt is no effect yet)
                out.append(Verdict.reject(f"leaves {t.pending[-80:]!r} typed at the prompt, not run (no Enter)"))
            else:
                out.append(self._judge(reference, effects[tuple(commands)], spec.workdir, commands, ran_on, why))
        return out

    def _backend_for(self, spec: SandboxSpec, history: list[str]) -> tuple[Any, str, str | None]:
        """The backend that runs this state, its name, and why it is not the chosen one (None when it is).

        The backend decides (`backend_for(spec, history)`, where it can hand a state on: the namespace
        backend gives Docker the states it cannot run); the Docker backend runs every state itself.
        """
        backend = self.backend()
        ran, why = backend.backend_for(spec, history)
        if ran is backend:
            return backend, self.backend_name, None
        self._count("groups_run_by_docker")
        return ran, ran.name, f"the {self.backend_name} backend cannot run this state: {why}"

    def _cached_expert(self, key: tuple[Any, ...]) -> tuple[Effect, Unstable] | None:
        with self._cache_lock:
            if key not in self._expert_cache:
                return None
            self._expert_cache.move_to_end(key)
            self._count("expert_cache_hits")
            return self._expert_cache[key]

    def _run_expert(self, backend: Any, spec: SandboxSpec, history: list[str], expert: list[str]) -> Effect:
        """One run of the expert; a run the sandbox stopped is no reference (and is not cached).

        Compared with a partial effect, any candidate stopped the same way would pass: two
        different commands that both time out print the same nothing.
        """
        (effect,) = backend.run_group(spec, history, [expert])
        if isinstance(effect, Exception):
            raise SandboxError(f"the expert action could not run: {effect}")
        self._count("expert_runs")
        if effect.killed:
            note = f" ({effect.note})" if effect.note else ""
            raise SandboxError(f"the sandbox stopped the expert action: {effect.killed}{note}; nothing to compare with")
        return effect

    def _settle_expert(
        self,
        backend: Any,
        spec: SandboxSpec,
        history: list[str],
        expert: list[str],
        first: Effect,
        first_ended: float,
        key: tuple[Any, ...],
    ) -> tuple[Effect, Unstable]:
        """Run the expert a second time, `expert_gap` after the first ended, and cache what is unstable."""
        time.sleep(max(0.0, self.expert_gap - (time.monotonic() - first_ended)))  # its clock readings are all newer
        second = self._run_expert(backend, spec, history, expert)
        unstable = unstable_parts(first, second)
        if any(path_shape(p) not in unstable.shapes for p in unstable.paths):
            # A path made in one run only, and not a varying name (a timestamp in it), would be left
            # out of every comparison: a third run settles which two runs agree.
            time.sleep(self.expert_gap)
            try:
                third = self._run_expert(backend, spec, history, expert)
            except SandboxError:
                third = None  # two runs are enough to go on with
            if third is not None and set(third.files) == set(second.files):
                first = second
            if third is not None and set(third.files) == set(first.files):
                second = third
            unstable = unstable_parts(first, second)
        value = (first, unstable)
        with self._cache_lock:
            self._expert_cache[key] = value
            while len(self._expert_cache) > _EXPERT_CACHE_SIZE:
                self._expert_cache.popitem(last=False)
        return value

    def _judge(
        self,
        reference: tuple[Effect, Unstable],
        effect: Effect | Exception,
        workdir: str,
        commands: Sequence[str],
        ran_on: str,
        why: str | None,
    ) -> Verdict:
        if isinstance(effect, Exception):
            return Verdict.failed(f"sandbox {_named(ran_on, why)}: {effect}")
        expert, unstable = reference
        comparison = compare_effects(expert, effect, unstable, workdir, self.stderr)
        details = comparison.details(unstable)
        details["candidate"] = {
            "exit_code": effect.exit_code,
            "killed": effect.killed,
            "changed": sorted(effect.files)[:10],
            "cwd": effect.cwd,
            "processes": list(effect.processes[:10]),
        }
        # a verdict that a second run of the same candidate need not repeat is not cached (the reward
        # cache honours `stable`): background jobs, processes left, limits that race
        details["backend"] = ran_on  # which backend ran it (the same verdict on either: docs/results/sandbox.md)
        if why:
            details["backend_why"] = why  # not the chosen one: that backend cannot run this state
        details["stable"] = not (is_racy(effect, commands) or "processes" in unstable.parts)
        if comparison.equal and not comparison.outside_workdir:
            return Verdict.accept("effect matches the expert's", **details)
        return Verdict.reject(reason_for(comparison, effect), **details)

    @classmethod
    def _count(cls, name: str, n: int = 1) -> None:
        with cls._cache_lock:
            cls.stats[name] += n


def submission_pivot(pivot: Pivot) -> bool:
    """True for a pivot of a SWE-bench run (`context.swe`) whose expert turn submits (`swe_tests` judges it)."""
    return isinstance(pivot.context.get("swe"), Mapping) and mini_swe_agent_submits(
        mini_swe_agent_action(pivot.expert.content)
    )


def _not_judged(pivot: Pivot, sandbox: SandboxContext) -> str | None:
    """Why the sandbox does not judge a pivot that has one (the verdict is a skip); None when it does."""
    if submission_pivot(pivot):
        # what is submitted, not how its diff prints, decides: an unresolved run's own diff is no reference
        return "the submission of a SWE-bench run: judged by the instance's tests (swe_tests)"
    if sandbox.expert_needs_network:
        # no container without a network reproduces it: the static part of the chain scores it
        return "the expert action needs the network"
    if sandbox.expert_unfinished:
        # an agent run's expert that never ended there (a `vim` on a terminal) is no effect to compare with
        return f"not comparable: {sandbox.expert_unfinished}"
    return _unchecked_replay(pivot)


def _unchecked_replay(pivot: Pivot) -> str | None:
    """Why a pivot recorded from an agent's run is not judged in the sandbox (None when it may be).

    Its state is a replay of what the agent ran, in the task's image, not what the agent saw: the
    harness may have installed tools (`curl` in OpenHands' runtime, absent from the image), and a
    command may have read the network. Judged on a replay that differs, the expert fails (`curl:
    command not found`) and every candidate that fails alike matches it. So only pivots whose replay
    was checked against the recorded observations and found faithful (`pivot convert
    --check-replay`: `context.replay.faithful`) are run here; the static part of the chain scores the
    others.
    """
    if not (pivot.context.get("run") or pivot.context.get("harness")):
        return None  # synthesized: the state is the replay itself
    replay = ReplayMark.from_context(pivot.context)
    if replay is None:
        return "the replay of the agent's run was not checked against its recorded observations (--check-replay)"
    if not replay.faithful:
        return f"the replay of the agent's run diverged from it: {replay.reason[:120]}"
    return None


def _named(ran_on: str, why: str | None) -> str:
    return f"{ran_on} ({why})" if why else ran_on


def sandbox_fingerprint(backend_name: str, backend_config: dict[str, Any], pivot: Pivot) -> str | None:
    """What a sandbox verdict rests on beyond the pivot: the image id behind the pivot's tag.

    A tag names whatever was last built under it, so the verdict's key holds the id the engine
    reports (`pivot_sandbox.image_id`). None, so the verdict is not cached, when the id cannot be
    had: the engine is unreachable, it has no such image, or a backend other than Docker offers no
    `image_id(tag)`. "" for a pivot without a sandbox (the verdict is a skip).

    The built-in backends (`BACKEND_NAMES`) are left out: their verdicts are the same, checked
    verdict for verdict (`tests/pivot_sandbox/test_backends.py`, `bench/sandbox.py`), so a verdict
    cached under one serves the other. Any other backend's name stays in: nothing says it agrees.
    """
    try:
        spec = SandboxSpec.from_context(pivot.context)
    except SandboxError:
        return ""  # the verifier reports the bad context itself, as an error (never cached)
    if spec is None:
        return ""
    if backend_name in BACKEND_NAMES:  # both take their images from the Docker engine
        found = image_id(spec.image, backend_config.get("base_url"))
    else:
        try:
            found = sandbox_backend(backend_name, **backend_config).image_id(spec.image)
        except SandboxError:  # unusable here, or breaks the contract: the verifier says so, uncached
            return None
    if found is None:
        return None
    return found if backend_name in BACKEND_NAMES else f"{backend_name}:{found}"


@hookimpl
def register_verifiers(register: Callable[..., None]) -> None:
    """Register `docker_shell`."""
    register("docker_shell", DockerShell)


@hookimpl
def register_sandboxes(register: Callable[..., None]) -> None:
    """Register the built-in `docker` and `namespace` backends (each imported on first use)."""
    register("docker", docker_backend)
    register("namespace", namespace_backend)
