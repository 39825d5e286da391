import pytest

from pivot_envs import Message, Pivot, ToolCall
from verifiers_plugins import Verdict, VerifierChain

PIVOT = Pivot("p#1", "tool-use", (Message("user", "hi"),), Message("assistant", "hello there"))


class Fixed:
    def __init__(self, accepted, role="acceptor", cost="cheap", reward=None):
        self.accepted, self.role, self.cost = accepted, role, cost
        self.reward = reward
        self.calls = 0

    def verify(self, pivot, action):
        self.calls += 1
        if self.reward is not None:
            return Verdict.reject("partial", reward=self.reward)
        return Verdict.accept("yes") if self.accepted else Verdict.reject("no")


class Raises:
    def verify(self, pivot, action):
        raise RuntimeError("backend exploded")


def test_gates_run_first_and_short_circuit():
    acceptor, gate = Fixed(True), Fixed(False, role="gate")
    result = VerifierChain([("a", acceptor), ("g", gate)])(PIVOT, Message("assistant", "x"))
    assert (result.accepted, result.decided_by, result.reward) == (False, "g", 0.0)
    assert acceptor.calls == 0


class Skips:
    cost = "sandbox"

    def __init__(self):
        self.calls = 0

    def verify(self, pivot, action):
        self.calls += 1
        return Verdict.skip("no sandbox context")


def test_cheapest_acceptor_runs_first_and_decides_among_equals():
    first, second = Fixed(True), Fixed(True)
    chain = VerifierChain([("first", first), ("second", second)])
    assert chain(PIVOT, Message("assistant", "x")).decided_by == "first"
    assert second.calls == 0


def test_a_cheap_accept_never_stands_ahead_of_a_more_faithful_acceptor_that_applies():
    # the destructive-suffix hack: string similarity accepts, the sandbox rejects, the sandbox decides
    sandbox, cheap = Fixed(False, cost="sandbox"), Fixed(True, cost="cheap")
    chain = VerifierChain([("sandbox", sandbox), ("cheap", cheap)])
    assert chain.names == ["cheap", "sandbox"]
    result = chain(PIVOT, Message("assistant", "hello there; rm -rf /app/*"))
    assert (result.accepted, result.reward, result.decided_by) == (False, 0.0, "sandbox")
    assert sandbox.calls == 1
    batch = chain.verify_batch(PIVOT, [Message("assistant", "x"), Message("assistant", "y")])
    assert [r.accepted for r in batch] == [False, False]


def test_a_faithful_acceptor_that_errors_gives_an_error_not_the_cheap_accept():
    result = VerifierChain([("cheap", Fixed(True)), ("sandbox", type("S", (Raises,), {"cost": "sandbox"})())])(
        PIVOT, Message("assistant", "x")
    )
    assert not result.accepted and result.reward == 0.0 and "backend exploded" in result.error


def test_the_cheap_accept_stands_when_no_more_faithful_acceptor_applies():
    skips = Skips()
    result = VerifierChain([("cheap", Fixed(True)), ("sandbox", skips)])(PIVOT, Message("assistant", "x"))
    assert (result.accepted, result.decided_by) == (True, "cheap") and skips.calls == 1


def test_the_expert_action_itself_is_accepted_without_the_faithful_verifier():
    sandbox = Fixed(False, cost="sandbox")
    result = VerifierChain([("cheap", Fixed(True)), ("sandbox", sandbox)])(PIVOT, Message("assistant", "Hello  there"))
    assert (result.accepted, result.decided_by, sandbox.calls) == (True, "cheap", 0)


def test_raising_verifier_becomes_error_verdict_not_silent_zero():
    result = VerifierChain([("boom", Raises())])(PIVOT, Message("assistant", "x"))
    assert result.reward == 0.0 and not result.accepted
    assert "backend exploded" in result.error
    assert result.verdicts["boom"].error and result.verdicts["boom"].verifier == "boom"


def test_error_is_reported_even_when_another_acceptor_rejects():
    result = VerifierChain([("no", Fixed(False)), ("boom", Raises())])(PIVOT, Message("assistant", "x"))
    assert not result.accepted and result.error and result.decided_by == "boom"


def test_partial_reward_survives_when_nothing_accepts():
    result = VerifierChain([("half", Fixed(False, reward=0.5)), ("no", Fixed(False))])(PIVOT, Message("assistant", "x"))
    assert result.reward == 0.5 and not result.accepted


def test_verify_batch_matches_single_calls():
    chain = VerifierChain.from_names(["turn_kind", "string_similarity"])
    actions = [
        Message("assistant", "hello there"),
        Message("assistant", "goodbye"),
        Message("assistant", None, (ToolCall("f"),)),
    ]
    assert [r.to_json() for r in chain.verify_batch(PIVOT, actions)] == [chain(PIVOT, a).to_json() for a in actions]


def test_config_hash_changes_with_config():
    a = VerifierChain.from_names(["string_similarity"], {"string_similarity": {"threshold": 0.9}})
    b = VerifierChain.from_names(["string_similarity"], {"string_similarity": {"threshold": 0.8}})
    assert a.config_hash() != b.config_hash()


def test_verdict_rejects_out_of_range_reward():
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        Verdict(1.5, True)
