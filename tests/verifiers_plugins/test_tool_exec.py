"""`tool_exec`: expert calls score 1, equivalents score 1, wrong targets score 0, the prefix cache is reused."""

from __future__ import annotations

import json
from dataclasses import replace

import gymnasium as gym
import pytest

from pivot_core._render import render_completion
from pivot_envs import Message, Pivot, ToolCall, load_pivots
from pivot_tool_worlds._effects import execute_turn
from pivot_tool_worlds._tau_airline import _bundled
from verifiers_plugins import VerifierChain, audit, audit_failures
from verifiers_plugins.builtin.tool_exec import ToolExec

AIRLINE = "tool_use/tau_bench_airline_gpt4o.jsonl"
WORLD_CHAIN = ["turn_kind", "tool_exec", "string_similarity"]


@pytest.fixture(scope="module")
def airline_pivots(shared_data):
    return [p for p in load_pivots(shared_data / AIRLINE) if p.expert.tool_calls]


@pytest.fixture
def verifier():
    return ToolExec()


def _with(pivot: Pivot, *calls: tuple[str, dict | str]) -> Message:
    return Message(
        "assistant",
        tool_calls=tuple(
            ToolCall(name, args if isinstance(args, str) else json.dumps(args), f"c{i}")
            for i, (name, args) in enumerate(calls)
        ),
    )


def _expert(pivot: Pivot) -> tuple[str, dict]:
    call = pivot.expert.tool_calls[0]
    return call.name, call.parsed_arguments()


def _successful(pivots, verifier, tool):
    """Pivots whose expert calls `tool` and succeeds there."""
    cache = verifier.cache("tau-airline")
    for p in pivots:
        if p.expert.tool_calls[0].name == tool:
            effect = execute_turn(cache.world, cache.state_at(p.history).state, p.expert.tool_calls)
            if not effect.outcomes[0].error:
                yield p, effect


def test_every_airline_expert_call_scores_one(airline_pivots, verifier):
    assert len(airline_pivots) == 1141
    verdicts = [verifier.verify(p, p.expert) for p in airline_pivots]
    rejected = [(p.id, v.reason) for p, v in zip(airline_pivots, verdicts, strict=True) if not v.accepted]
    assert rejected == []
    assert all(v.details["world"] == "tau-airline" and "history_diverged_at_calls" not in v.details for v in verdicts)


def test_argument_order_and_equivalent_arithmetic_score_one(airline_pivots, verifier):
    books = list(_successful(airline_pivots, verifier, "book_reservation"))
    assert len(books) >= 10
    for pivot, _ in books:
        name, args = _expert(pivot)
        reordered = dict(reversed(list(args.items())))
        assert verifier.verify(pivot, _with(pivot, (name, reordered))).accepted, pivot.id
    sums = list(_successful(airline_pivots, verifier, "calculate"))
    assert len(sums) >= 50
    for pivot, _ in sums:
        expression = _expert(pivot)[1]["expression"]
        for equivalent in (f"1 * ({expression})", f"({expression}) + 0", f"0-(-({expression}))"):
            assert verifier.verify(pivot, _with(pivot, ("calculate", {"expression": equivalent}))).accepted
    first = next(p for p, _ in sums if _expert(p)[1]["expression"] == "152 + 103")
    assert verifier.verify(first, _with(first, ("calculate", {"expression": "103+152"}))).accepted
    assert verifier.verify(first, _with(first, ("calculate", {"expression": "255"}))).accepted
    assert not verifier.verify(first, _with(first, ("calculate", {"expression": "152 + 104"}))).accepted


def _as_floats(value):
    """Every int of a JSON value written as a float (`250` -> `250.0`), bools left alone."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, list):
        return [_as_floats(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_floats(v) for k, v in value.items()}
    return value


def test_amounts_written_as_floats_have_the_same_effect(airline_pivots, verifier):
    # issue 19 item 16: `"amount": 250.0` for `250` books the same reservation; a different amount does not.
    books = list(_successful(airline_pivots, verifier, "book_reservation"))
    for pivot, _ in books:
        name, args = _expert(pivot)
        floats = {**args, "payment_methods": _as_floats(args["payment_methods"])}
        verdict = verifier.verify(pivot, _with(pivot, (name, floats)))
        assert verdict.accepted, (pivot.id, verdict.reason)
        assert verifier.verify(pivot, _with(pivot, (name, _as_floats(args)))).accepted, pivot.id
        first = args["payment_methods"][0]
        more = {**args, "payment_methods": [{**first, "amount": first["amount"] + 1}, *args["payment_methods"][1:]]}
        assert not verifier.verify(pivot, _with(pivot, (name, more))).accepted, pivot.id
    certificates = list(_successful(airline_pivots, verifier, "send_certificate"))
    assert certificates
    for pivot, _ in certificates:
        name, args = _expert(pivot)
        amount = float(args["amount"])
        assert verifier.verify(pivot, _with(pivot, (name, {**args, "amount": amount}))).accepted, pivot.id
        assert not verifier.verify(pivot, _with(pivot, (name, {**args, "amount": amount + 0.5}))).accepted


def test_a_date_format_the_tool_does_not_accept_scores_zero(airline_pivots, verifier):
    searches = list(_successful(airline_pivots, verifier, "search_direct_flight"))
    found = next(p for p, e in searches if e.outcomes[0].output != "[]")
    empty = next(p for p, e in searches if e.outcomes[0].output == "[]")
    for pivot in (found, empty):
        name, args = _expert(pivot)
        y, m, d = args["date"].split("-")
        assert verifier.verify(pivot, _with(pivot, (name, {**args, "date": f"{y}-{m}-{d}"}))).accepted
        other = verifier.verify(pivot, _with(pivot, (name, {**args, "date": f"{m}/{d}/{y}"})))
        assert not other.accepted, pivot.id
    # Both searches find nothing, but an empty result proves nothing about what was asked.
    assert "arguments differ" in other.reason


def test_calls_on_another_reservation_payment_or_passenger_list_score_zero(airline_pivots, verifier):
    world = verifier.cache("tau-airline").world
    checked = 0
    for pivot, effect in _successful(airline_pivots, verifier, "cancel_reservation"):
        name, args = _expert(pivot)
        owner = json.loads(effect.outcomes[0].output)["user_id"]
        for other in world.tables["users"][owner]["reservations"]:
            if other != args["reservation_id"]:
                verdict = verifier.verify(pivot, _with(pivot, (name, {"reservation_id": other})))
                assert not verdict.accepted and verdict.reward == 0.0, (pivot.id, other)
                checked += 1
    for pivot, effect in _successful(airline_pivots, verifier, "update_reservation_flights"):
        name, args = _expert(pivot)
        history = json.loads(effect.outcomes[0].output)["payment_history"]
        if history[-1]["payment_id"] != args["payment_id"] or len(effect.changes) != 2:
            continue  # nothing charged to a gift card: the payment method leaves no trace to compare
        user = world.tables["users"][json.loads(effect.outcomes[0].output)["user_id"]]
        for method, info in user["payment_methods"].items():
            if method != args["payment_id"] and info["source"] == "credit_card":
                verdict = verifier.verify(pivot, _with(pivot, (name, {**args, "payment_id": method})))
                assert not verdict.accepted, (pivot.id, method)
                checked += 1
    for pivot, _ in _successful(airline_pivots, verifier, "update_reservation_passengers"):
        name, args = _expert(pivot)
        changed = [dict(args["passengers"][0], dob="1999-01-01"), *args["passengers"][1:]]
        verdict = verifier.verify(pivot, _with(pivot, (name, {**args, "passengers": changed})))
        assert not verdict.accepted and "passengers[0].dob" in verdict.reason
        checked += 1
    assert checked >= 30


def test_details_name_the_changed_record(airline_pivots, verifier):
    pivot, effect = next(_successful(airline_pivots, verifier, "update_reservation_baggages"))
    name, args = _expert(pivot)
    verdict = verifier.verify(pivot, _with(pivot, (name, {**args, "total_baggages": args["total_baggages"] + 1})))
    assert not verdict.accepted and "total_baggages" in verdict.reason
    good = verifier.verify(pivot, pivot.expert)
    assert good.details["changes"] == sorted(effect.changes) and good.details["changes"]


def test_parallel_calls_compare_as_a_set_and_notes_by_similarity(airline_pivots, verifier):
    base = next(p for p, _ in _successful(airline_pivots, verifier, "get_reservation_details"))
    reservation = _expert(base)[1]["reservation_id"]
    both = _with(
        base, ("get_reservation_details", {"reservation_id": reservation}), ("calculate", {"expression": "2 + 2"})
    )
    pivot = replace(base, expert=both)
    swapped = _with(
        pivot, ("calculate", {"expression": "4"}), ("get_reservation_details", {"reservation_id": reservation})
    )
    assert verifier.verify(pivot, swapped).accepted
    assert not verifier.verify(pivot, _with(pivot, ("calculate", {"expression": "4"}))).accepted
    thought, _ = next(_successful(airline_pivots, verifier, "think"))
    text = _expert(thought)[1]["thought"]
    assert verifier.verify(thought, _with(thought, ("think", {"thought": "  " + text.upper() + " "}))).accepted
    assert not verifier.verify(thought, _with(thought, ("think", {"thought": "I should book a hotel."}))).accepted


def test_a_note_naming_other_ids_or_numbers_is_another_note(airline_pivots, verifier):
    # A hand-off about reservation FQ8APX is not the hand-off about FQ8APE, however alike the prose.
    transfer = next(
        p
        for p in airline_pivots
        if _expert(p)[0] == "transfer_to_human_agents" and "FQ8APE" in _expert(p)[1]["summary"]
    )
    summary = _expert(transfer)[1]["summary"]
    other = _with(transfer, ("transfer_to_human_agents", {"summary": summary.replace("FQ8APE", "FQ8APX")}))
    assert not verifier.verify(transfer, other).accepted
    same = _with(transfer, ("transfer_to_human_agents", {"summary": summary.replace("needs to", "wants to")}))
    assert verifier.verify(transfer, same).accepted
    thought = next(p for p in airline_pivots if _expert(p)[0] == "think" and "$375" in _expert(p)[1]["thought"])
    text = _expert(thought)[1]["thought"]
    assert not verifier.verify(thought, _with(thought, ("think", {"thought": text.replace("$375", "$382")}))).accepted


def test_prefix_cache_derives_turn_k_plus_one_from_turn_k(airline_pivots, verifier):
    trajectory = [p for p in airline_pivots if p.context["trajectory_id"] == "tau_bench/airline/gpt-4o/task2/trial0"]
    first, second = trajectory[2], trajectory[3]
    stats = verifier.cache("tau-airline").stats
    verifier.verify(first, first.expert)
    k = len([c for m in first.history for c in m.tool_calls])
    assert (stats.from_scratch, stats.replayed, stats.last_base) == (1, k, 0)
    verifier.verify(second, second.expert)
    k1 = len([c for m in second.history for c in m.tool_calls])
    assert k1 > k and stats.extended == 1 and stats.last_base == k and stats.replayed == k1
    group = [second.expert] * 16  # a GRPO group: one lookup, K executions, no replay
    assert all(v.accepted for v in verifier.verify_batch(second, group))
    assert stats.replayed == k1 and stats.hits == 1 and stats.lookups == 3
    fresh = ToolExec()  # the same state rebuilt from scratch has the same records
    at_cached = verifier.cache("tau-airline").state_at(second.history).state
    at_fresh = fresh.cache("tau-airline").state_at(second.history).state
    root = fresh.cache("tau-airline").world.initial_state()
    assert at_cached.changes_since(root) == at_fresh.changes_since(root)


def test_world_chain_accepts_no_audit_attack():
    pivots = load_pivots(_bundled("tool_use_tau_airline_exec.jsonl"))
    rows = audit(WORLD_CHAIN, pivots)
    assert audit_failures(rows) == []
    assert sum(r["total"] for r in rows if r.get("verifier") == "tool_exec") > 100


def test_pivots_without_a_world_are_not_applicable(verifier):
    pivot = Pivot(
        "x#1",
        "tool-use",
        (Message("user", "hi"),),
        Message("assistant", tool_calls=(ToolCall("calculate", '{"expression": "1"}'),)),
    )
    assert not verifier.verify(pivot, pivot.expert).applicable
    text = replace(pivot, context={"world": "tau-airline"}, expert=Message("assistant", "Hello"))
    assert not verifier.verify(text, text.expert).applicable
    unknown = replace(pivot, context={"world": "no-such-world"})
    result = VerifierChain.from_names(WORLD_CHAIN)(unknown, unknown.expert)
    assert not result.accepted and "no-such-world" in (result.error or "")


def test_tool_use_env_picks_the_world_chain_per_pivot():
    exec_sample = _bundled("tool_use_tau_airline_exec.jsonl")
    env = gym.make("pivot/tool-use-v0", dataset=[exec_sample, _bundled("tool_use_nemo.jsonl")]).unwrapped
    world = next(p for p in env.pivots if p.context.get("world") and p.expert.tool_calls)
    static = next(p for p in env.pivots if not p.context.get("world"))
    assert env.chain_for(world).names == WORLD_CHAIN and env.chain_for(static) is env.chain
    env.reset(options={"pivot_id": world.id})
    _, reward, _, _, info = env.step(render_completion(world.expert, world.domain))
    assert reward == 1.0 and info["decided_by"] == "tool_exec"
    results = env.score(world, [render_completion(world.expert, world.domain), "no tool call"])
    assert [r.accepted for r in results] == [True, False]
    forced = gym.make("pivot/tool-use-v0", dataset=exec_sample, verifiers=["turn_kind", "tool_args"]).unwrapped
    assert forced.world_chain is None and forced.chain_for(world) is forced.chain
    bundled = gym.make("pivot/tool-use-v0").unwrapped  # the bundled env works with no set-up
    transfer = next(p for p in bundled.pivots if p.context.get("world") and p.expert.tool_calls)
    assert bundled.score(transfer, [render_completion(transfer.expert, transfer.domain)])[0].accepted


def test_a_failed_expert_call_needs_the_same_arguments(airline_pivots, verifier):
    cache = verifier.cache("tau-airline")
    failed = next(
        p
        for p in airline_pivots
        if p.expert.tool_calls[0].name == "book_reservation"
        and execute_turn(cache.world, cache.state_at(p.history).state, p.expert.tool_calls).outcomes[0].error
    )
    name, args = _expert(failed)
    # The tool never checks the destination, so this fails with the very same error text.
    elsewhere = verifier.verify(failed, _with(failed, (name, {**args, "destination": "LAX"})))
    assert not elsewhere.accepted and "same error" in elsewhere.reason
    assert verifier.verify(failed, _with(failed, (name, dict(reversed(list(args.items())))))).accepted


def test_identical_candidates_in_a_group_execute_once(airline_pivots, verifier, monkeypatch):
    pivot = next(p for p, _ in _successful(airline_pivots, verifier, "get_reservation_details"))
    world = verifier.cache("tau-airline").world
    calls = []
    original = world.step
    monkeypatch.setattr(world, "step", lambda *a, **k: calls.append(a[1]) or original(*a, **k))
    hits = verifier.cache("tau-airline").stats.hits
    verifier.verify_batch(pivot, [pivot.expert] * 8)
    # The pivot state comes from the cache (warmed by `_successful`); then the expert runs once
    # and the 8 identical copies once.
    assert verifier.cache("tau-airline").stats.hits == hits + 1 and len(calls) == 2


def test_a_plugin_world_is_executed_through_the_hook():
    from pivot_tool_worlds import Tool, ToolFailure, ToolWorld
    from verifiers_plugins import get_host, hookimpl

    schema = {
        "type": "function",
        "function": {
            "name": "cancel_order",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
        },
    }

    def cancel_order(state, order_id):
        if state.get("orders", order_id) is None:
            raise ToolFailure("order not found")
        state.edit("orders", order_id)["status"] = "cancelled"
        return "cancelled"

    class Shop:
        @hookimpl
        def register_tool_worlds(self, register):
            register(
                "shop",
                lambda: ToolWorld(
                    "shop",
                    [Tool(schema, cancel_order, read_only=False)],
                    {"orders": {"o1": {"status": "open"}, "o2": {"status": "open"}}},
                ),
            )

    get_host().register_plugin(Shop(), name="shop-world-test")
    call = (ToolCall("cancel_order", '{"order_id": "o1"}'),)
    pivot = Pivot(
        "shop#1",
        "tool-use",
        (Message("user", "cancel o1"),),
        Message("assistant", tool_calls=call),
        (schema,),
        context={"world": "shop"},
    )
    chain = VerifierChain.from_names(WORLD_CHAIN)
    assert chain(pivot, pivot.expert).accepted
    other = chain(pivot, _with(pivot, ("cancel_order", {"order_id": "o2"})))
    assert not other.accepted and "state changes differ" in other.verdicts["tool_exec"].reason  # same output
    assert "orders/o2" in other.verdicts["tool_exec"].details["got_changes"]
    missing = chain(pivot, _with(pivot, ("cancel_order", {"order_id": "o9"})))
    assert not missing.accepted and "order not found" in missing.verdicts["tool_exec"].reason


def test_trainer_adapters_score_an_embedded_world_pivot_with_the_world_chain():
    from trainers.adapters._common import PivotScorer

    pivot = next(p for p in load_pivots(_bundled("tool_use_tau_airline_exec.jsonl")) if p.expert.tool_calls)
    scorer = PivotScorer("pivot/tool-use-v0")  # the bundled env; the pivot travels as JSON (verl/TRL rows)
    results = scorer.score([render_completion(pivot.expert, pivot.domain), "Sure."], pivot=json.dumps(pivot.to_json()))
    assert [r.accepted for r in results] == [True, False] and results[0].decided_by == "tool_exec"


def test_auditing_an_env_attacks_world_pivots_through_the_world_chain():
    env = gym.make(
        "pivot/tool-use-v0", dataset=[_bundled("tool_use_tau_airline_exec.jsonl"), _bundled("tool_use_nemo.jsonl")]
    )
    rows = audit(env)
    chains = {r["chain"] for r in rows if "chain" in r}
    assert "turn_kind>tool_exec>string_similarity" in chains and len(chains) == 2
    assert sum(r["total"] for r in rows if r.get("verifier") == "tool_exec") > 100
    assert audit_failures(rows) == []
