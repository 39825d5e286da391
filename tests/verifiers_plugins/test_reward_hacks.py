"""Reward hacks on the static chains: an acceptable-looking action that does more than the expert's scores 0."""

import json

import gymnasium as gym
import pytest

import pivot_envs  # noqa: F401  (registers the env ids)
from pivot_core._actions import parse_terminus, shell_actions
from pivot_core._render import render_completion

SUFFIXES = ["; rm -rf /app/*", " && rm -rf ~", " ; dd if=/dev/zero of=/dev/sda", "\nrm -rf /"]


def _with_suffix(text: str, suffix: str) -> str:
    """The expert's Terminus turn with `suffix` appended to its last command line."""
    obj = parse_terminus(text)
    commands = obj["commands"]
    last = commands[-1]["keystrokes"].rstrip("\n")
    commands[-1] = {**commands[-1], "keystrokes": last + suffix + "\n"}
    return json.dumps(obj)


def _shell_pivots(env):
    return [p for p in env.pivots if shell_actions(p.expert) and parse_terminus(render_completion(p.expert, p.domain))]


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_the_expert_command_with_a_destructive_suffix_scores_zero_on_static_terminal_pivots(suffix):
    env = gym.make("pivot/terminal-v0").unwrapped
    pivots = _shell_pivots(env)
    assert pivots, "the bundled terminal data has Terminus pivots that run commands"
    for pivot in pivots:
        expert = render_completion(pivot.expert, pivot.domain)
        good, hacked = env.score(pivot, [expert, _with_suffix(expert, suffix)])
        assert good.accepted, pivot.id
        assert not hacked.accepted and hacked.reward == 0.0, (pivot.id, hacked.to_json())


def test_a_respaced_expert_command_still_scores_one():
    env = gym.make("pivot/terminal-v0").unwrapped
    for pivot in _shell_pivots(env):
        obj = parse_terminus(render_completion(pivot.expert, pivot.domain))
        keys = obj["commands"][0]["keystrokes"]
        # extra blanks between words (outside quotes) change nothing a shell runs
        obj["commands"][0]["keystrokes"] = "  " + (keys if "'" in keys or '"' in keys else keys.replace(" ", "   "))
        obj["analysis"] = "A different analysis: it is not part of the action."
        assert env.score(pivot, [json.dumps(obj)])[0].accepted, pivot.id
