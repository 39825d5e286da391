"""`EpisodeEnv`: continue from a pivot for several turns in the live, restored state.

A pivot env scores one completion and ends; an episode env starts at a pivot (the state before
that assistant turn), executes each action in a live state (a tool world, a container), and ends
with the task's own outcome. The first pivot of a trajectory is the task's initial state, so the
same env runs end-to-end episodes.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym

from pivot_core import DOMAIN_PARSERS, Message, Pivot, chat_message, detect_format, extract_pivots, open_pivots
from pivot_core.errors import UnknownPivot, did_you_mean
from pivot_envs._env import bundled_paths
from pivot_envs._spaces import ChatSpace, CompletionSpace
from verifiers_plugins import get_parser

PathLike = str | os.PathLike[str]

TRUNCATIONS = ("max_turns", "time_limit")
"""`ended_by` values of a truncated episode: the turn budget or the wall-clock limit ran out."""


@dataclass(frozen=True)
class StepResult:
    """What executing one agent action produced (returned by `EpisodeEnv.act`).

    Attributes:
        messages: the observation's new messages (tool results, terminal output, the user's reply).
        ended_by: why the episode ends here ("user_stop", "transfer", "task_complete", ...); None goes on.
        error: set when the live state failed (not the agent): the episode is cut with an error outcome.
    """

    messages: tuple[Message, ...] = ()
    ended_by: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class EpisodeOutcome:
    """The task's outcome at the end of an episode (`info["outcome"]`).

    Attributes:
        reward: 1.0 when the task is done by its own rule, else 0.0 (a Harbor task: the float its tests wrote).
        ended_by: what ended the episode (a truncation is one of `TRUNCATIONS`).
        rule: the rule that decided ("tau-bench", "task_tests").
        details: the rule's evidence (which checks passed).
        error: set when the outcome could not be decided (reward is then 0 and means nothing).
    """

    reward: float
    ended_by: str
    rule: str
    details: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict with `reward`, `ended_by`, `rule`, `details`, `error`."""
        return {**dataclasses.asdict(self), "details": dict(self.details)}


def load_episode_data(paths: Sequence[PathLike], domain: str) -> tuple[list[Pivot], dict[str, tuple[Message, ...]]]:
    """Pivots of every file plus each trajectory's recorded messages.

    Trajectory formats give the whole recorded conversation (its final user message included);
    pivot files give, per trajectory, the longest pivot's history plus its expert turn.
    """
    pivots: list[Pivot] = []
    recorded: dict[str, tuple[Message, ...]] = {}
    for path in paths:
        fmt = detect_format(path)
        if fmt.read_trajectories is not None:
            for traj in fmt.read_trajectories(Path(path), {"domain": domain}):
                recorded[traj.id] = traj.messages
                pivots.extend(extract_pivots(traj))
            continue
        for pivot in open_pivots(path, domain=domain):
            pivots.append(pivot)
            tid = str(pivot.context.get("trajectory_id") or pivot.id.rsplit("#", 1)[0])
            messages = (*pivot.history, pivot.expert)
            if len(messages) > len(recorded.get(tid, ())):
                recorded[tid] = messages
    return pivots, recorded


class EpisodeEnv(gym.Env[dict, str]):
    """A Gymnasium env whose episode continues a task from one pivot until the task ends.

    Contract:
        - Observation (`ChatSpace`): `{"pivot_id", "messages", "tools"}`; `messages` is the whole
          conversation so far: the pivot's history, then each agent turn followed by what the live
          state answered (tool results, terminal output, the user's next message).
        - Action (`CompletionSpace`): one assistant completion as text, parsed by the domain's
          parser. Unreadable text is a plain message like any other; `step` never raises on it.
        - Reward: 0.0 on every step but the last; the last carries the task's outcome (1.0 = done
          by the task's own rule; a Harbor task's: the float its tests wrote), also in `info["outcome"]`.
        - `terminated`: the agent or the user ended the task (the domain says how). `truncated`:
          the turn budget ran out (`ended_by="max_turns"`), the wall-clock limit did
          (`"time_limit"`), or the live state failed (`info["outcome"]["error"]` set). Stepping
          after any of them raises `ResetNeeded`.
        - The wall-clock limit counts from the end of `reset` through every turn, the policy's
          own time between steps included (as a Terminal-Bench agent timeout does). A turn that
          starts after it has run out is not executed; the domain may also stop a turn that
          runs past it.
        - `reset(seed=..., options={"pivot_id": ID})` restores the state at that pivot; without
          it, a pivot is drawn from `self.np_random`.
        - `info` after reset: `pivot_id`, `domain`, `index`, `num_pivots`, `max_turns` (this
          episode's budget), `time_limit` (seconds, None for none) and the domain's restore
          details. After step: `pivot_id`, `turn`, `action` (the parsed message),
          `new_messages`, and `outcome` on the last step.
          Timings never appear in `info`.

    Args:
        dataset: files of trajectories or pivots (any format `load_pivots` reads); the domain's
            bundled sample when None.
        max_turns: agent turns per episode; None takes the task's own budget (`default_budget`).
        time_limit: wall-clock seconds per episode; None takes the task's own (`default_time_limit`),
            `math.inf` turns it off.
        parser: parser name; the domain's default when None.
        max_completion_chars: the action space's maximum completion length.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"]}

    # Every domain subclass sets these.
    domain: ClassVar[str] = "tool-use"
    bundled_files: ClassVar[tuple[str, ...]] = ()
    rule: ClassVar[str] = ""  # the outcome rule's name, e.g. "tau-bench"

    def __init__(
        self,
        dataset: PathLike | Sequence[PathLike] | None = None,
        *,
        max_turns: int | None = None,
        time_limit: float | None = None,
        parser: str | None = None,
        max_completion_chars: int = 65536,
        render_mode: str | None = None,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"expected render_mode in {self.metadata['render_modes']}, got {render_mode!r}")
        if max_turns is not None and max_turns < 1:
            raise ValueError(f"{type(self).__name__}: expected max_turns >= 1 or None, got {max_turns}")
        if time_limit is not None and not time_limit > 0:  # `not >` also refuses NaN
            raise ValueError(f"{type(self).__name__}: expected time_limit > 0 seconds or None, got {time_limit}")
        self.render_mode = render_mode
        self.max_turns = max_turns
        self.time_limit = time_limit
        if dataset is None:
            paths: list[PathLike] = list(bundled_paths(self.bundled_files))
        else:
            paths = [dataset] if isinstance(dataset, (str, os.PathLike)) else list(dataset)
        pivots, self.recorded = load_episode_data(paths, self.domain)
        try:
            self.pivots = [p for p in pivots if self.accepts(p)]
        except ValueError as e:
            raise ValueError(f"{', '.join(str(p) for p in paths)}: {e}") from e
        if not self.pivots:
            raise ValueError(f"{type(self).__name__}: no pivot of {[str(p) for p in paths]} can start an episode")
        self._index = {p.id: i for i, p in enumerate(self.pivots)}
        self.parse = get_parser(parser or DOMAIN_PARSERS.get(self.domain, "auto"))
        self.observation_space = ChatSpace()
        self.action_space = CompletionSpace(max_length=max_completion_chars)
        self.current: Pivot | None = None
        self.conversation: list[Message] = []
        self.turn = 0
        self.budget = 0
        self.deadline = math.inf  # time.monotonic() past which the episode is out of time
        self.ended = True

    # -- domain hooks ------------------------------------------------------------------------

    def accepts(self, pivot: Pivot) -> bool:
        """True when an episode can start at `pivot` (domains raise on data that cannot)."""
        return True

    def default_budget(self, pivot: Pivot) -> int:
        """Agent turns allowed from `pivot` when `max_turns` is None."""
        raise NotImplementedError

    def default_time_limit(self, pivot: Pivot) -> float | None:
        """Wall-clock seconds allowed from `pivot` when `time_limit` is None (None: no limit)."""
        return None

    def restore(self, pivot: Pivot) -> dict[str, Any]:
        """Restore the live state at `pivot`; returns details for the reset `info`."""
        raise NotImplementedError

    def act(self, message: Message) -> StepResult:
        """Execute one parsed agent message in the live state (never raises on the agent's text)."""
        raise NotImplementedError

    def outcome(self, ended_by: str) -> EpisodeOutcome:
        """The task's outcome once the episode ended (`ended_by` is one of `TRUNCATIONS` for a truncation)."""
        raise NotImplementedError

    def release(self) -> None:
        """Give back what the episode held (a container); called at its end, on reset and close."""

    # -- Gymnasium API -----------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        """Restore the state at a pivot (`options["pivot_id"]`, else drawn from `np_random`)."""
        super().reset(seed=seed)
        if seed is not None:
            self.action_space.seed(seed)
        self.release()
        pivot_id = (options or {}).get("pivot_id")
        index = self._lookup(str(pivot_id)) if pivot_id is not None else int(self.np_random.integers(len(self.pivots)))
        self.current = self.pivots[index]
        self.conversation = list(self.current.history)
        self.turn = 0
        self.budget = self.max_turns if self.max_turns is not None else max(1, self.default_budget(self.current))
        limit = self.time_limit if self.time_limit is not None else self.default_time_limit(self.current)
        limit = None if limit is None or math.isinf(limit) else float(limit)
        self.ended = False
        details = self.restore(self.current)
        # the agent's clock starts once its state is there: restoring it is the env's time, not the agent's
        self.deadline = time.monotonic() + limit if limit is not None else math.inf
        info = {
            "pivot_id": self.current.id,
            "domain": self.current.domain,
            "index": index,
            "num_pivots": len(self.pivots),
            "max_turns": self.budget,
            "time_limit": limit,
            **details,
        }
        return self._observation(), info

    def step(self, action: str) -> tuple[dict, float, bool, bool, dict]:
        """Execute one agent turn; the last step's reward is the task's outcome."""
        if self.current is None or self.ended:
            raise gym.error.ResetNeeded("call reset() before step() (the episode has ended)")
        text = action if isinstance(action, str) else str(action)
        message = with_call_ids(self.parse(text), self.turn)
        self.conversation.append(message)
        self.turn += 1
        if self.remaining() <= 0:
            result = StepResult()  # the agent's time ran out before this turn: it does not run
        else:
            try:
                result = self.act(message)
            except Exception as e:  # the live state failed (a plugin simulator, the daemon): an error outcome
                result = StepResult(error=f"{type(e).__name__}: {e}")
        self.conversation.extend(result.messages)
        info: dict[str, Any] = {
            "pivot_id": self.current.id,
            "turn": self.turn,
            "action": message.to_json(),
            "new_messages": [chat_message(m) for m in result.messages],
        }
        ended_by = self._ended_by(result)
        terminated = ended_by is not None and ended_by not in TRUNCATIONS and result.error is None
        truncated = ended_by is not None and not terminated
        reward = 0.0
        if ended_by is not None:
            self.ended = True
            try:
                outcome = self._decide(result, ended_by)
            finally:
                self.release()
            info["outcome"] = outcome.to_json()
            reward = outcome.reward
        return self._observation(), reward, terminated, truncated, info

    def remaining(self) -> float:
        """Wall-clock seconds left in this episode (`math.inf` without a limit)."""
        return self.deadline - time.monotonic()

    def _ended_by(self, result: StepResult) -> str | None:
        """Why the episode ends after this step, None when it goes on."""
        if result.error is not None:
            return "error"
        if result.ended_by is not None:
            return result.ended_by
        if self.turn >= self.budget:
            return "max_turns"
        if self.remaining() <= 0:
            return "time_limit"
        return None

    def _decide(self, result: StepResult, ended_by: str) -> EpisodeOutcome:
        """The outcome of an ended episode; a failure to decide is an error outcome, never a guess."""
        if result.error is not None:
            return EpisodeOutcome(0.0, "error", self.rule, error=result.error)
        try:
            return self.outcome(ended_by)
        except Exception as e:  # the outcome check itself failed (tests could not run, the daemon went away)
            return EpisodeOutcome(0.0, ended_by, self.rule, error=f"outcome: {type(e).__name__}: {e}")

    def render(self) -> str | None:
        """ansi: the pivot id, the turn and the last message."""
        if self.render_mode != "ansi" or self.current is None:
            return None
        last = self.conversation[-1].text[:500] if self.conversation else ""
        return f"[{self.current.id} turn {self.turn}/{self.budget}] {last}"

    def close(self) -> None:
        """Release the live state."""
        self.release()
        super().close()

    # -- helpers -------------------------------------------------------------------------------

    def pivot(self, pivot_id: str) -> Pivot:
        """The pivot with that id."""
        return self.pivots[self._lookup(pivot_id)]

    def recorded_messages(self, pivot: Pivot) -> tuple[Message, ...]:
        """The recorded conversation of the pivot's trajectory (empty when unknown)."""
        tid = str(pivot.context.get("trajectory_id") or pivot.id.rsplit("#", 1)[0])
        return self.recorded.get(tid, ())

    def _lookup(self, pivot_id: str) -> int:
        if pivot_id not in self._index:
            raise UnknownPivot(
                f"expected a pivot id of this env, got {pivot_id!r}.{did_you_mean(pivot_id, list(self._index))}"
            )
        return self._index[pivot_id]

    def _observation(self) -> dict[str, Any]:
        assert self.current is not None
        return {
            "pivot_id": self.current.id,
            "messages": [chat_message(m) for m in self.conversation],
            "tools": [dict(t) for t in self.current.tools],
        }


def with_call_ids(message: Message, turn: int) -> Message:
    """The message with an id on every tool call (parsers leave them empty; results refer to them)."""
    if all(c.id for c in message.tool_calls):
        return message
    calls = tuple(
        c if c.id else dataclasses.replace(c, id=f"call_{turn}_{j}") for j, c in enumerate(message.tool_calls)
    )
    return dataclasses.replace(message, tool_calls=calls)
