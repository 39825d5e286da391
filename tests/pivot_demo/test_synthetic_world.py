"""The synthetic world's in-domain case where the functional reward matters (issue 31 item 4).

At its `calculate` turns the expert writes the expression in one of several equivalent forms
(the terms in any order, with or without spaces; a doubled price as a product either way or a
sum), and at its `transfer_to_human_agents` turns the hand-off summary in one of several
phrasings naming the same reservation. `tool_exec`, the airline pivots' default acceptor, accepts
every form (the world returns the same number; the summary names the same ids and reads alike);
`exact_match`, the strict reward, accepts only the expert's own.
"""

import dataclasses
import json

import gymnasium as gym

import pivot_envs  # noqa: F401
from pivot_core import Message, ToolCall, render_completion
from pivot_demo.synthetic import equivalent_actions, synthetic_pivots
from pivot_tool_worlds import tau_airline_demo


def test_equivalent_forms_are_accepted_by_tool_exec_and_rejected_by_exact_match():
    world = tau_airline_demo()  # the world `--data synthetic` is written in
    pivots = synthetic_pivots(world, 120, seed=5, handoffs=True)
    with_forms = [p for p in pivots if equivalent_actions(p)]
    calls = [p for p in pivots if p.expert.tool_calls]
    assert len(with_forms) >= 0.08 * len(calls), (len(with_forms), len(calls))  # a share, not a curiosity
    assert {_kind(p) for p in with_forms} == {"sum", "product", "summary"}  # totals, doubled prices, hand-offs
    functional = gym.make("pivot/tool-use-v0", pivots=with_forms).unwrapped
    strict = gym.make("pivot/tool-use-v0", pivots=with_forms, verifiers=["exact_match"]).unwrapped
    for pivot in with_forms:
        expert = render_completion(pivot.expert, pivot.domain)
        others = [render_completion(m, pivot.domain) for m in equivalent_actions(pivot)]
        got = functional.score(pivot, [expert, *others])
        assert all(r.accepted for r in got), (pivot.id, [r.verdicts for r in got])
        assert [r.decided_by for r in got] == ["tool_exec"] * len(got)
        strict_got = strict.score(pivot, [expert, *others])
        assert strict_got[0].accepted and not any(r.accepted for r in strict_got[1:]), pivot.id


def _kind(pivot):
    if pivot.expert.tool_calls[0].name == "transfer_to_human_agents":
        return "summary"
    return (
        "product"
        if any("*" in m.tool_calls[0].arguments for m in [pivot.expert, *equivalent_actions(pivot)])
        else "sum"
    )


def test_a_summary_naming_another_reservation_is_rejected_by_both():
    world = tau_airline_demo()
    pivot = next(
        p
        for p in synthetic_pivots(world, 120, seed=5, handoffs=True)
        if equivalent_actions(p) and _kind(p) == "summary"
    )
    other = equivalent_actions(pivot)[0].tool_calls[0]
    summary = json.loads(other.arguments)["summary"]
    rid = next(w.strip(".:") for w in summary.split() if any(c.isdigit() for c in w))
    other_rid = "4WQ150" if rid != "4WQ150" else "0AIEP0"
    call = ToolCall(other.name, json.dumps({"summary": summary.replace(rid, other_rid)}))
    wrong = Message("assistant", None, (call,))
    for verifiers in (None, ["exact_match"]):
        env = gym.make("pivot/tool-use-v0", pivots=[pivot], verifiers=verifiers).unwrapped
        assert not env.score(pivot, [render_completion(wrong, pivot.domain)])[0].accepted


def test_exact_match_takes_parallel_calls_in_any_order():
    # why the in-domain kinds are forms of one call and not orders of parallel calls: the strict
    # reward compares calls as a multiset too, so another order would not separate the two rewards
    world = tau_airline_demo()
    pivot = next(p for p in synthetic_pivots(world, 120, seed=5, handoffs=True) if p.expert.tool_calls)
    calls = [
        ToolCall("get_reservation_details", json.dumps({"reservation_id": r}), f"c{r}") for r in ("4WQ150", "0AIEP0")
    ]
    expert = Message("assistant", None, tuple(calls))
    swapped = Message("assistant", None, tuple(reversed(calls)))
    env = gym.make("pivot/tool-use-v0", pivots=[pivot], verifiers=["exact_match"]).unwrapped
    parallel = dataclasses.replace(pivot, expert=expert)
    assert env.score(parallel, [render_completion(swapped, pivot.domain)])[0].accepted


def test_a_wrong_total_is_rejected_by_both():
    world = tau_airline_demo()  # the world `--data synthetic` is written in
    pivot = next(p for p in synthetic_pivots(world, 120, seed=5) if equivalent_actions(p) and _kind(p) != "summary")
    wrong = render_completion(equivalent_actions(pivot)[0], pivot.domain).replace("1", "2", 1)
    for verifiers in (None, ["exact_match"]):
        env = gym.make("pivot/tool-use-v0", pivots=[pivot], verifiers=verifiers).unwrapped
        assert not env.score(pivot, [wrong])[0].accepted


def test_equal_prices_give_each_form_once_and_never_the_experts_own_among_the_others():
    from pivot_demo.synthetic import product_forms, sum_forms

    assert sum_forms([172, 172, 155]) == ["172 + 172 + 155", "172+172+155", "155 + 172 + 172", "155+172+172"]
    assert len(set(product_forms(90, 2))) == len(product_forms(90, 2)) == 4
    with_forms = [p for p in synthetic_pivots(tau_airline_demo(), 120, seed=5) if equivalent_actions(p)]
    assert with_forms  # seed 5 has a total of two equal prices (conv36#12)
    for p in with_forms:
        assert p.expert.tool_calls[0].parsed_arguments() not in p.context["equivalent_arguments"], p.id


def test_hand_offs_are_opt_in_so_the_bundled_references_data_stays_as_it_was_made():
    world = tau_airline_demo()
    default = synthetic_pivots(world, 60, seed=5)
    assert not any(c.name == "transfer_to_human_agents" for p in default for c in p.expert.tool_calls)
    with_handoffs = synthetic_pivots(world, 60, seed=5, handoffs=True)
    assert any(c.name == "transfer_to_human_agents" for p in with_handoffs for c in p.expert.tool_calls)
