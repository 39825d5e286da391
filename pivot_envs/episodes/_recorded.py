"""Play a recorded run whole in an episode env: from a pivot, every later agent turn as the agent wrote it.

This is how a run "reproduces": the episode starts at the pivot's restored state, steps each recorded
assistant turn (rendered in the run's own harness format), and ends when the episode does (a submission,
the task's own end) or when the run's turns are spent, where the task's tests decide. The outcome is then
the episode's, graded by the task's own rule; a resolved run whose replay scores 0, or an unresolved one
whose replay scores 1, is a defect of the replay, of the environment or of the tests.

Public API:
    play_recorded(env, start, recorded, comparable=str.strip) -> RecordedPlay
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pivot_core import Message, Pivot, render_completion
from pivot_envs.episodes._base import EpisodeEnv


@dataclass(frozen=True)
class RecordedPlay:
    """What a whole-run replay gave.

    Attributes:
        outcome: the episode's `info["outcome"]` (empty when it never ended: no turn after the pivot).
        turns: the recorded agent turns stepped.
        compared: turns (all but the last) whose answer was compared with the recorded one.
        equal: of those, how many answered what the run recorded (after `comparable`).
        first_difference: the first turn whose answer differs: {"turn", "recorded", "replayed"} (cut).
    """

    outcome: Mapping[str, Any]
    turns: int
    compared: int = 0
    equal: int = 0
    first_difference: Mapping[str, Any] = field(default_factory=dict)

    @property
    def reward(self) -> float | None:
        """The outcome's reward, None when the episode gave none."""
        value = self.outcome.get("reward")
        return None if value is None else float(value)


def play_recorded(
    env: EpisodeEnv,
    start: Pivot,
    recorded: Sequence[Message],
    comparable: Callable[[str], str] = str.strip,
) -> RecordedPlay:
    """Step every assistant turn of `recorded` after `start`'s history; the run's own turn count is the budget.

    `recorded` is the run's whole conversation (its final turns included, also those no pivot was made
    of, such as an unresolved run's submission). Answers are compared with the recorded ones through
    `comparable` (which drops what differs between any two runs: clock readings, temporary names).
    """
    later = list(recorded[len(start.history) :])
    turns = [i for i, m in enumerate(later) if m.role == "assistant"]
    env.reset(options={"pivot_id": start.id})
    env.budget = len(turns)  # where the run stopped without ending, its tests decide there
    info: dict[str, Any] = {}
    compared = equal = 0
    difference: dict[str, Any] = {}
    for k, i in enumerate(turns):
        *_, info = env.step(render_completion(later[i], env.domain))
        if "outcome" in info:
            break
        end = turns[k + 1] if k + 1 < len(turns) else len(later)
        want = [comparable(m.content or "") for m in later[i + 1 : end]]
        got = [comparable(m["content"] or "") for m in info["new_messages"]]
        compared += 1
        equal += got == want
        if got != want and not difference:
            difference = {"turn": k, "recorded": "\n".join(want)[:400], "replayed": "\n".join(got)[:400]}
    return RecordedPlay(dict(info.get("outcome") or {}), len(turns), compared, equal, difference)


__all__ = ["RecordedPlay", "play_recorded"]
