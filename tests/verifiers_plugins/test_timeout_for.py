"""A verifier's own bound on its work (`timeout_for`) is the chain's deadline for that call.

Slow but bounded work (a sandbox replaying a state) must not read as "could not decide"; a call
past the bound the verifier gave is still an error verdict, never a silent 0.
"""

import time

import gymnasium as gym

import pivot_envs  # noqa: F401  (registers the env ids)
from pivot_envs import Message
from verifiers_plugins import Verdict, safe_verify_batch


class SlowButBounded:
    """Takes 0.6 s per group, says so, and has a per-call timeout of 0.2 s."""

    role = "acceptor"
    cost = "sandbox"
    timeout = 0.2

    def __init__(self, bound=lambda pivot, actions: 2.0):
        self.bound = bound
        self.asked: list = []

    def timeout_for(self, pivot, actions):
        self.asked.append(list(actions))
        return self.bound(pivot, actions)

    def verify(self, pivot, action):
        time.sleep(0.6)
        return Verdict.accept("done")


class SlowBatch(SlowButBounded):
    def verify_batch(self, pivot, actions):
        time.sleep(0.6)
        return [Verdict.accept("done")] * len(actions)


def _pivot_and_actions(n):
    env = gym.make("pivot/terminal-v0").unwrapped
    return env.pivots[0], [Message(role="assistant", content=f"ls {i}") for i in range(n)]


def test_a_call_within_the_verifier_s_own_bound_is_decided_not_an_error():
    pivot, actions = _pivot_and_actions(1)
    verifier = SlowButBounded()
    (verdict,) = safe_verify_batch("slow", verifier, pivot, actions)
    assert verdict.accepted and verdict.error is None  # the 0.2 s per-call timeout alone would cut it
    assert verifier.asked == [actions]


def test_a_batch_gets_the_bound_for_its_whole_group():
    pivot, actions = _pivot_and_actions(3)
    verifier = SlowBatch()
    verdicts = safe_verify_batch("slow", verifier, pivot, actions)
    assert [v.accepted for v in verdicts] == [True, True, True]
    assert verifier.asked == [actions]  # one bound for the group, given the candidates themselves


def test_a_call_past_its_own_bound_is_an_error_verdict():
    pivot, actions = _pivot_and_actions(1)
    (verdict,) = safe_verify_batch("slow", SlowButBounded(lambda p, a: 0.3), pivot, actions)
    assert not verdict.accepted and verdict.error.startswith("slow timed out after 0.3s")


def test_a_bound_that_raises_or_is_no_number_falls_back_to_the_per_call_timeout():
    pivot, actions = _pivot_and_actions(1)

    def raises(pivot, actions):
        raise RuntimeError("cannot tell")

    for bound in (raises, lambda p, a: None, lambda p, a: -1, lambda p, a: True):
        (verdict,) = safe_verify_batch("slow", SlowButBounded(bound), pivot, actions)
        assert verdict.error.startswith("slow timed out after 0.2s"), bound
