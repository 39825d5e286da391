"""`PivotEnv`: one pivot per episode, one completion per step, scored by a verifier chain."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym

from pivot_core import (
    DOMAIN_PARSERS,
    ConcatPivots,
    Message,
    Pivot,
    PivotSequence,
    candidate_ids,
    index_of,
    observation,
    open_pivots,
)
from pivot_core.errors import UnknownPivot, did_you_mean
from pivot_envs._spaces import ChatSpace, CompletionSpace

# Submodules, not the package: `import verifiers_plugins` first imports the audit kit, which
# imports pivot_envs, which lands here while verifiers_plugins is still initialising.
from verifiers_plugins import CachedChain, ChainResult, RewardCache, Scorer, Verdict, VerifierChain, get_parser

PathLike = str | os.PathLike[str]


def bundled_paths(files: Sequence[str]) -> list[Path]:
    """Paths of bundled package-data files (pivot_core/data/)."""
    root = resources.files("pivot_core") / "data"
    return [Path(str(root / name)) for name in files]


class PivotEnv(gym.Env[dict, str]):
    """A Gymnasium env whose episode is one pivot of an expert trajectory.

    Contract:
        - Observation (`ChatSpace`): `{"pivot_id", "messages", "tools"}` — the expert history before
          the pivot turn in OpenAI chat shape, and the tools available there.
        - Action (`CompletionSpace`): one assistant completion as text. The domain's parser turns it
          into a message (Hermes `<tool_call>` blocks, OpenAI JSON, Terminus JSON or plain text);
          unreadable text becomes plain content and scores 0 with a reason. `step` never raises on
          a completion.
        - Reward: the verifier chain's reward in [0, 1] (1 = locally acceptable).
        - `terminated` is always True after `step` (a pivot is a one-step problem); `truncated` is
          always False. Stepping again without `reset` scores another completion at the same pivot.
        - `reset(seed=..., options={"pivot_id": ID})` picks that pivot; without it, a pivot is drawn
          from `self.np_random`, so a seed fixes the pivot sequence.
        - `info` after reset: `pivot_id`, `domain`, `index`, `num_pivots`. After step: `pivot_id`,
          `accepted`, `decided_by`, `error` (None unless a verifier could not decide), `verdicts`
          (per verifier: accepted, reward, reason, error, details), `action` (the parsed message).
          Timings never appear in `info`, so seeded runs compare equal.

    Args:
        dataset: a file (or files) of pivots or trajectories in any format `load_pivots` reads;
            the domain's bundled sample when None. A Parquet file stays on disk: `self.pivots`
            is then a lazy `PivotSequence` that builds a pivot only when it is read.
        pivots: pivots given directly (overrides `dataset`); a `PivotSequence` is kept as is.
        verifiers: verifier names for the chain; the domain's default chain when None. Given
            names apply to every pivot; otherwise pivots whose context names a tool world
            (`context["world"]`) get the domain's `world_verifiers` chain (see `chain_for`).
        verifier_config: per-verifier keyword arguments, `{name: {arg: value}}`.
        sandbox: the sandbox backend of `docker_shell` ("docker" or "namespace"; default:
            `PIVOT_SANDBOX`, else "namespace" where this machine can run it, else "docker"); one
            that cannot run here makes its verdicts errors with the reason.
        parser: parser name; the domain's default when None.
        max_completion_chars: the action space's maximum completion length.
        reward_cache: a `RewardCache` (or the path of its SQLite file) that `step` and `score`
            read verdicts from and write them to; None scores every completion afresh.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"]}

    # Every domain subclass sets these four.
    domain: ClassVar[str] = "tool-use"
    default_verifiers: ClassVar[tuple[str, ...]] = ("turn_kind", "tool_args")
    bundled_files: ClassVar[tuple[str, ...]] = ()
    # Optional: the default chain for pivots that carry a tool world (execution-grounded).
    world_verifiers: ClassVar[tuple[str, ...]] = ()
    # Extra keyword arguments a domain accepts (e.g. browse's `corpus`) are kept here.
    domain_options: dict[str, Any]

    def __init__(
        self,
        dataset: PathLike | Sequence[PathLike] | None = None,
        *,
        pivots: Sequence[Pivot] | None = None,
        verifiers: Sequence[str] | None = None,
        verifier_config: Mapping[str, Mapping[str, Any]] | None = None,
        parser: str | None = None,
        max_completion_chars: int = 65536,
        render_mode: str | None = None,
        reward_cache: RewardCache | PathLike | None = None,
        sandbox: str | None = None,
        **domain_options: Any,
    ) -> None:
        if sandbox is not None:
            shell = dict((verifier_config or {}).get("docker_shell") or {})
            if shell.setdefault("backend", sandbox) != sandbox:
                raise ValueError(f"sandbox={sandbox!r} but verifier_config names backend {shell['backend']!r}")
            verifier_config = {**(verifier_config or {}), "docker_shell": shell}
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"expected render_mode in {self.metadata['render_modes']}, got {render_mode!r}")
        self.render_mode = render_mode
        self.domain_options = dict(domain_options)
        if pivots is not None:
            self.pivots: Sequence[Pivot] = pivots if isinstance(pivots, PivotSequence) else list(pivots)
        else:
            self.pivots = self._load(dataset)
        if not len(self.pivots):
            raise ValueError(f"{type(self).__name__}: the dataset holds no pivots")
        self._index = index_of(self.pivots)
        self.reward_cache = reward_cache if isinstance(reward_cache, RewardCache | None) else RewardCache(reward_cache)
        # The one scoring path: the chain, wrapped by the reward cache when there is one.
        self.chain: Scorer = self._scorer(self.build_chain(verifiers, verifier_config))
        self.world_chain: Scorer | None = None
        if verifiers is None and self.world_verifiers:
            self.world_chain = self._scorer(self.build_chain(self.world_verifiers, verifier_config))
        self.parser_name = parser or DOMAIN_PARSERS.get(self.domain, "auto")
        self.parse = get_parser(self.parser_name)
        self.observation_space = ChatSpace()
        self.action_space = CompletionSpace(max_length=max_completion_chars)
        self.current: Pivot | None = None

    # -- construction hooks (domains override) ----------------------------------------------

    def _load(self, dataset: PathLike | Sequence[PathLike] | None) -> Sequence[Pivot]:
        if dataset is None:
            paths: list[PathLike] = list(bundled_paths(self.bundled_files))
        elif isinstance(dataset, (str, os.PathLike)):
            paths = [dataset]
        else:
            paths = list(dataset)
        parts = [open_pivots(path, **self.load_options()) for path in paths]
        if all(isinstance(part, list) for part in parts):
            return [p for part in parts for p in part]
        return parts[0] if len(parts) == 1 else ConcatPivots(parts)

    def load_options(self) -> dict[str, Any]:
        """Options passed to `load_pivots` (domains may add some)."""
        return {"domain": self.domain}

    def build_chain(
        self, verifiers: Sequence[str] | None, config: Mapping[str, Mapping[str, Any]] | None
    ) -> VerifierChain:
        """The verifier chain (domains may inject domain options into the config)."""
        return VerifierChain.from_names(list(verifiers or self.default_verifiers), config)

    def _scorer(self, chain: VerifierChain) -> Scorer:
        return chain if self.reward_cache is None else CachedChain(chain, self.reward_cache)

    # -- Gymnasium API ---------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        """Pick a pivot (`options["pivot_id"]`, else drawn from `np_random`) and observe its history."""
        super().reset(seed=seed)
        if seed is not None:
            self.action_space.seed(seed)
        pivot_id = (options or {}).get("pivot_id")
        if pivot_id is not None:
            if pivot_id not in self._index:
                raise UnknownPivot(
                    f"expected a pivot id of this env, got {pivot_id!r}."
                    f"{did_you_mean(str(pivot_id), candidate_ids(self._index, str(pivot_id)))}"
                )
            index = self._index[pivot_id]
        else:
            index = int(self.np_random.integers(len(self.pivots)))
        self.current = self.pivots[index]
        info = {
            "pivot_id": self.current.id,
            "domain": self.current.domain,
            "index": index,
            "num_pivots": len(self.pivots),
        }
        return observation(self.current), info

    def step(self, action: str) -> tuple[dict, float, bool, bool, dict]:
        """Parse and score one completion at the current pivot."""
        if self.current is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        ((message, result),) = self._scored(self.current, [action])
        return observation(self.current), result.reward, True, False, self._step_info(result, message)

    def render(self) -> str | None:
        """ansi: the current pivot's id and its last history message."""
        if self.render_mode != "ansi" or self.current is None:
            return None
        last = self.current.history[-1].text[:500] if self.current.history else ""
        return f"[{self.current.id}] {last}"

    # -- batch scoring for GRPO groups -----------------------------------------------------

    def score(self, pivot: Pivot, completions: Sequence[str]) -> list[ChainResult]:
        """Score a group of completions at one pivot: each parsed once, then the (caching) chain, batched.

        This and `step` are the one way a completion becomes a reward. `pivot` need not be in this
        env's dataset (executors and adapters pass the pivot they hold); `env.pivot(id)` finds one by id.
        """
        if not isinstance(pivot, Pivot):
            raise TypeError(
                f"score: expected a Pivot (env.pivot(pivot_id) finds one by id), got {type(pivot).__name__}"
            )
        return [result for _, result in self._scored(pivot, completions)]

    def _scored(self, pivot: Pivot, completions: Sequence[object]) -> list[tuple[Message, ChainResult]]:
        """Each completion parsed once and scored by the pivot's chain.

        One past the action space's length is not parsed at all and scores 0 with the reason (a
        50 MB completion must not cost a parse and a verification).
        """
        texts = [c if isinstance(c, str) else str(c) for c in completions]
        limit = self.action_space.max_length
        if all(len(t) <= limit for t in texts):  # the common case, without the bookkeeping below
            messages = [self.parse(t) for t in texts]
            return list(zip(messages, self.chain_for(pivot).verify_batch(pivot, messages), strict=True))
        fits = [i for i, t in enumerate(texts) if len(t) <= limit]
        messages = {i: self.parse(texts[i]) for i in fits}
        results = dict(zip(fits, self.chain_for(pivot).verify_batch(pivot, [messages[i] for i in fits]), strict=True))
        out = []
        for i, text in enumerate(texts):
            if i in results:
                out.append((messages[i], results[i]))
                continue
            why = f"the completion has {len(text)} characters; the action space allows {limit} (max_completion_chars)"
            verdict = Verdict(0.0, False, why, verifier="max_completion_chars")
            message = Message(role="assistant", content="", extra={"parse_error": why})
            out.append((message, ChainResult(0.0, False, "max_completion_chars", {"max_completion_chars": verdict})))
        return out

    def chain_for(self, pivot: Pivot) -> Scorer:
        """The chain that scores `pivot`: the world chain when it carries a tool world, else `self.chain`."""
        if self.world_chain is not None and pivot.context.get("world"):
            return self.world_chain
        return self.chain

    def pivot(self, pivot_id: str) -> Pivot:
        """The pivot with that id."""
        if pivot_id not in self._index:
            raise UnknownPivot(
                f"expected a pivot id of this env, got {pivot_id!r}."
                f"{did_you_mean(pivot_id, candidate_ids(self._index, pivot_id))}"
            )
        return self.pivots[self._index[pivot_id]]

    def _step_info(self, result: ChainResult, message: Message) -> dict[str, Any]:
        assert self.current is not None
        return {
            "pivot_id": self.current.id,
            "accepted": result.accepted,
            "decided_by": result.decided_by,
            "error": result.error,
            "verdicts": {name: v.to_json() for name, v in result.verdicts.items()},
            "action": message.to_json(),
        }
