"""Synthetic conversations of the airline tool world: the pretraining's data and `--data synthetic`.

Random users, reservations and flight requests are drawn from the world's database; the agent's
calls copy their arguments from what the user said or from earlier tool outputs, and every tool
output is what the world returns for that call. Copy drills ask for one value back. Every record
a conversation names exists in the database in use.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pivot_core import Message, Pivot, ToolCall
from pivot_tool_worlds import AIRPORTS

# -- synthetic conversations -------------------------------------------------------------------

GIVE_ID = (
    "My user id is {uid}.",
    "Sure, it's {uid}.",
    "{uid}",
    "My user ID is {uid}.",
    "Yes, my user id is {uid}.",
)
OPEN_WITH_ID = (
    "Hi, I'm {uid} and I want to {want}.",
    "Hello! My user id is {uid}. I'd like to {want}.",
    "Hi there, I want to {want}. My user ID is {uid}.",
)
OPEN_WITHOUT_ID = ("Hi, I want to {want}.", "Hello, I'd like to {want}.", "Hi! Can you help me {want}?")
ASK_ID = (
    "I can help with that. Could you please provide your user ID?",
    "Sure, I can help. Could you please provide your user ID?",
    "To assist you, I'll need your user ID. Could you please provide that?",
)
WANTS = {
    "cancel": ("cancel a reservation", "cancel my trip", "cancel my flight"),
    "check": ("check my reservations", "review my bookings", "change a reservation"),
    "book": ("book a flight", "book a new trip", "find a flight"),
    "human": ("talk to a human agent", "speak with a person", "get help from a human"),
}
GIVE_RESERVATION = (
    "The reservation id is {rid}.",
    "It's reservation {rid}.",
    "I want to cancel reservation {rid}.",
    "{rid}",
    "My reservation ID is {rid}.",
)
ROUTE = (
    "I want to fly from {a} to {b} on {date}.",
    "I'd like a one way flight from {a} to {b} on {date}.",
    "From {a} to {b}, on {date}, please.",
)
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October")


def _say(rng: random.Random, options: Sequence[str], **values: Any) -> str:
    return rng.choice(options).format(**values)


def _spoken_date(rng: random.Random, iso: str) -> str:
    """A date as a user says it ("May 20" or the ISO form)."""
    _, month, day = iso.split("-")
    return iso if rng.random() < 0.3 else f"{MONTHS[int(month) - 1]} {int(day)}"


class ConversationWriter:
    """Builds one synthetic conversation at a time, executing every call in the world.

    Args:
        world: a `ToolWorld` (the airline one: users, reservations, flights tables).
        system: the system message (the real trajectories' policy text when known).
        rng: the conversation's random source.
    """

    def __init__(self, world: Any, system: str, rng: random.Random) -> None:
        self.world, self.rng = world, rng
        self.state = world.initial_state()
        self.messages: list[Message] = [Message("system", system)]
        self.calls = 0
        self.equivalents: dict[int, list[dict[str, Any]]] = {}
        """Message index -> the other arguments that call could have had with the same effect."""

    def user(self, text: str) -> None:
        """A user message."""
        self.messages.append(Message("user", text))

    def say(self, text: str) -> None:
        """An assistant text turn."""
        self.messages.append(Message("assistant", text))

    def call_one_of(self, name: str, forms: Sequence[dict[str, Any]]) -> Any:
        """A call written in one of several equivalent forms, drawn at random; the others are recorded."""
        chosen = self.rng.randrange(len(forms))
        self.equivalents[len(self.messages)] = [f for f in forms if f != forms[chosen]]
        return self.call(name, **forms[chosen])

    def call(self, name: str, **arguments: Any) -> Any:
        """An assistant tool call and the world's output for it; returns the output parsed when JSON."""
        self.calls += 1
        call_id = f"call_{self.calls}"
        args = json.dumps(arguments)
        self.messages.append(Message("assistant", None, (ToolCall(name, args, call_id),)))
        outcome, self.state = self.world.step(self.state, name, arguments)
        self.messages.append(Message("tool", outcome.output, tool_call_id=call_id, name=name))
        try:
            return json.loads(outcome.output)
        except ValueError:
            return outcome.output


def _identify(w: ConversationWriter, uid: str, want: str) -> dict[str, Any]:
    """The opening: the user gives the id at once or when asked; the agent looks the user up."""
    if w.rng.random() < 0.5:
        w.user(_say(w.rng, OPEN_WITH_ID, uid=uid, want=want))
    else:
        w.user(_say(w.rng, OPEN_WITHOUT_ID, want=want))
        w.say(_say(w.rng, ASK_ID))
        w.user(_say(w.rng, GIVE_ID, uid=uid))
    user = w.call("get_user_details", user_id=uid)
    return user if isinstance(user, dict) else {}


def _held(w: ConversationWriter, user: dict[str, Any]) -> list[str]:
    """The user's reservations the database in use holds (a subset database lists ids it lacks)."""
    return [r for r in user.get("reservations") or [] if r in w.world.tables["reservations"]]


def _cancel(w: ConversationWriter, uid: str) -> None:
    user = _identify(w, uid, _say(w.rng, WANTS["cancel"]))
    reservations = _held(w, user)
    if not reservations:
        w.say("I could not find any reservation under your profile.")
        return
    rid = w.rng.choice(reservations)
    w.say("Which reservation would you like to cancel?")
    w.user(_say(w.rng, GIVE_RESERVATION, rid=rid))
    details = w.call("get_reservation_details", reservation_id=rid)
    if not isinstance(details, dict):
        return
    route = f"from {details.get('origin')} to {details.get('destination')}"
    w.say(f"Reservation {rid} {route} can be cancelled. Do you confirm the cancellation (yes/no)?")
    w.user(w.rng.choice(("Yes.", "Yes, please cancel it.", "yes")))
    w.call("cancel_reservation", reservation_id=rid)
    w.say(f"Your reservation {rid} has been cancelled.")


def _check(w: ConversationWriter, uid: str) -> None:
    user = _identify(w, uid, _say(w.rng, WANTS["check"]))
    # the agent walks the user's reservations in profile order, copying each id from the profile
    for rid in _held(w, user)[: w.rng.randint(1, 4)]:
        w.call("get_reservation_details", reservation_id=rid)
    w.say("I found your reservations. Which one would you like to change?")


def _transfer(w: ConversationWriter, uid: str) -> None:
    user = _identify(w, uid, _say(w.rng, WANTS["human"]))
    # a reservation id with a digit: `tool_exec` matches summaries by their ids and numbers
    # (`digit_tokens`) and then by similarity, so an all-letter id copied wrong could still pass
    reservations = [r for r in _held(w, user) if any(c.isdigit() for c in r)]
    if not reservations:
        w.say("I could not find any reservation under your profile.")
        return
    rid = w.rng.choice(reservations)
    w.say(_say(w.rng, ASK_HOW))
    w.user(_say(w.rng, ASK_HUMAN, rid=rid))
    w.call_one_of("transfer_to_human_agents", [{"summary": s} for s in summary_forms(rid)])
    w.say("YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON.")


def _book(w: ConversationWriter, uid: str, flights: Sequence[tuple[str, str, str, str]]) -> None:
    _identify(w, uid, _say(w.rng, WANTS["book"]))
    origin, destination, day, _ = w.rng.choice(flights)
    w.say("Where would you like to fly, and on which date?")
    w.user(_say(w.rng, ROUTE, a=AIRPORTS[origin], b=AIRPORTS[destination], date=_spoken_date(w.rng, day)))
    found = w.call("search_direct_flight", origin=origin, destination=destination, date=day)
    prices = [f["prices"]["economy"] for f in found if isinstance(f, dict) and "prices" in f][:3]
    if len(prices) >= 2:
        picked = prices[: w.rng.randint(2, len(prices))]
        # the agent reads the prices out first: a search's output runs to ~500 tokens and the
        # policy's cut prompt keeps its end, so without this the numbers a calculation needs are
        # out of its view and no policy could compute them (the functional reward would have
        # nothing to accept); here they are in the last two messages, to copy
        w.say(_say(w.rng, LIST_PRICES, prices=", ".join(str(x) for x in prices)))
        w.user(_say(w.rng, ASK_TOTAL, n=NUMBER_WORDS[len(picked)]))
        w.call_one_of("calculate", [{"expression": e} for e in sum_forms(picked)])
        if w.rng.random() < 0.5:
            w.user(_say(w.rng, ASK_PASSENGERS, n=NUMBER_WORDS[2], p=picked[0]))
            w.call_one_of("calculate", [{"expression": e} for e in product_forms(picked[0], 2)])
    w.say("Which flight would you like to book?")


# -- actions that several forms perform (the in-domain case where the functional reward matters) ---

ASK_TOTAL = (
    "What would the first {n} cost together in economy?",
    "How much are the first {n} in economy, in total?",
    "Can you add up the economy prices of the first {n}?",
)
ASK_PASSENGERS = ("And the one at {p} for {n} passengers?", "What would the {p} one cost for {n} of us?")
LIST_PRICES = (
    "The first flights cost {prices} in economy.",
    "I found economy fares of {prices}.",
    "Economy prices of the first flights: {prices}.",
)
NUMBER_WORDS = {2: "two", 3: "three"}
ASK_HOW = ("How can I help you with your reservations?", "Which reservation is it about?")
ASK_HUMAN = (
    "I need a human agent for reservation {rid}.",
    "Please transfer me to a human, it is about reservation {rid}.",
    "It's reservation {rid}. I want to talk to a person.",
)
SUMMARIES = (
    "{rid}: user wants a human agent.",
    "{rid}: user asks for a human agent.",
    "{rid}: the user wants a human agent.",
    "{rid}: user needs a human agent.",
    "{rid}: the user asks for a human.",
    "{rid}: user wants to talk to a human.",
)


def summary_forms(rid: str) -> list[str]:
    """Hand-off summaries that all say the same thing: the user wants a human agent about `rid`.

    `tool_exec` matches a summary by its ids (they must agree exactly) and then by similarity, so it
    accepts each of these (pairwise similarity 0.68 and more, above its 0.6); `exact_match` accepts
    the expert's own text alone. The id comes first: ids are whole tokens the policy copies (unlike
    the prices a `calculate` turn needs), and measured, it copied the id into a summary that began
    with it and not into one that ended with it (docs/results/demo.md).
    """
    return [s.format(rid=rid) for s in SUMMARIES]


def sum_forms(numbers: Sequence[float]) -> list[str]:
    """Expressions that all compute the sum of `numbers`: every order of the terms, with or without spaces.

    The expert writes one of them; `tool_exec` accepts any (the world returns the same total),
    `exact_match` only the expert's own, so the strict reward misses what the functional one keeps.
    """
    terms = [str(n) for n in numbers]
    orders = [terms, terms[::-1]] if len(terms) == 2 else [terms, terms[::-1], [terms[1], terms[0], *terms[2:]]]
    # equal prices make some orders the same string: each form once, or the expert's own form
    # would be listed among "the others" (and a strict reward would seem to reject it)
    return list(dict.fromkeys(sep.join(order) for order in orders for sep in (" + ", "+")))


def product_forms(number: float, times: int) -> list[str]:
    """Expressions that all compute `number * times`, written four ways (each once)."""
    forms = [f"{number} * {times}", f"{times} * {number}", f"{number}*{times}", " + ".join([str(number)] * times)]
    return list(dict.fromkeys(forms))


def equivalent_actions(pivot: Pivot) -> list[Message]:
    """Calls with the expert's effect written another way (`context.equivalent_arguments`); [] where none."""
    call = pivot.expert.tool_calls[0] if len(pivot.expert.tool_calls) == 1 else None
    forms = pivot.context.get("equivalent_arguments") or []
    if call is None:
        return []
    return [Message("assistant", None, (ToolCall(call.name, json.dumps(f), call.id),)) for f in forms]


DRILL_WANTS = {
    "get_user_details": ("look up my profile", "check my account", "see my reservations"),
    "get_reservation_details": ("check a reservation", "look at my booking", "see my trip details"),
    "cancel_reservation": ("cancel a reservation", "cancel my booking", "cancel my trip"),
}
DRILL_SAYS = {
    "user_id": ("My user id is {v}.", "Hi, I'm {v} and I want to {want}.", "{v}", "Sure, it's {v}.", "User ID: {v}"),
    "reservation_id": (
        "The reservation id is {v}.",
        "I want to {want}: {v}.",
        "{v}",
        "It's reservation {v}.",
        "Hi, I'd like to {want}. The confirmation number is {v}.",
    ),
}


def copy_drills(world: Any, n: int, seed: int = 0) -> list[Pivot]:
    """`n` one-turn chats whose call copies an id the user just said: a copy skill taught on fresh data.

    Real conversations repeat a few hundred users, so a small model trained on them can lower
    its loss by memorising which id goes with which context instead of copying. Here every drill
    draws a fresh (phrasing, id, distractor) triple from the whole database, so copying is the
    only rule that fits; measured on a clean copy task, this model shape learns it in a few hundred
    steps this way. A distractor id of the other kind sits in the chat half the time, so the call
    must also copy the right kind.
    """
    rng = random.Random(seed)
    ids = {"user_id": sorted(world.tables["users"]), "reservation_id": sorted(world.tables["reservations"])}
    schemas = tuple(world.schemas())
    out: list[Pivot] = []
    for i in range(n):
        tool = rng.choice(tuple(DRILL_WANTS))
        key = "user_id" if tool == "get_user_details" else "reservation_id"
        value = rng.choice(ids[key])
        said = _say(rng, DRILL_SAYS[key], v=value, want=_say(rng, DRILL_WANTS[tool]))
        history = [Message("user", said)]
        if rng.random() < 0.5:
            other = "reservation_id" if key == "user_id" else "user_id"
            history.insert(0, Message("user", _say(rng, DRILL_SAYS[other], v=rng.choice(ids[other]), want="get help")))
            history.insert(1, Message("assistant", "Thanks. What else can you tell me?"))
        call = ToolCall(tool, json.dumps({key: value}), f"call_{i}")
        context = {"world": world.name, "trajectory_id": f"drill/{world.name}/{i}", "synthetic": True}
        out.append(
            Pivot(
                f"drill/{world.name}/{i}#{len(history)}",
                "tool-use",
                tuple(history),
                Message("assistant", None, (call,)),
                schemas,
                context,
            )
        )
    return out


def _flight_days(world: Any, limit: int = 400) -> list[tuple[str, str, str, str]]:
    """(origin, destination, date, flight number) of available flights, in database order."""
    out = []
    for number, flight in world.tables["flights"].items():
        if flight["origin"] not in AIRPORTS or flight["destination"] not in AIRPORTS:
            continue
        for day, on_day in flight["dates"].items():
            if on_day.get("status") == "available" and day >= "2024-05-15":
                out.append((flight["origin"], flight["destination"], day, number))
    return out[:: max(1, len(out) // limit)]


def world_words(world: Any) -> dict[str, list[str]]:
    """The airline world's entity ids by kind (users, reservations, flights): whole tokens of the policy."""
    return {kind: sorted(world.tables[kind]) for kind in ("users", "reservations", "flights") if kind in world.tables}


def synthetic_pivots(
    world: Any, conversations: int, seed: int = 0, system: str | None = None, handoffs: bool = False
) -> list[Pivot]:
    """Pivots of `conversations` synthetic conversations in `world` (every assistant turn is one).

    Args:
        world: the airline `ToolWorld`.
        conversations: how many conversations.
        seed: seeds every random choice.
        system: the system message; the world's policy text when None (found beside its database).
        handoffs: a fourth kind of conversation as well, a hand-off to a human agent whose summary is
            one of several phrasings (`summary_forms`); off by default: the bundled reference was
            made on the data without it (docs/results/demo.md says what it changed).
    """
    rng = random.Random(seed)
    # only users with a reservation the database holds: the bundled subset's profiles name others
    held = world.tables["reservations"]
    users = sorted(k for k, u in world.tables["users"].items() if any(r in held for r in u.get("reservations") or []))
    if not users:
        raise ValueError(f"{world.name}: the database has no user with a reservation to write conversations about")
    flights = _flight_days(world)
    system = system if system is not None else _policy_text(world)
    scenes: list[Callable[[ConversationWriter, str], None]] = [_cancel, _check, *([_transfer] if handoffs else [])]
    if flights:
        scenes.append(lambda w, uid: _book(w, uid, flights))
    pivots: list[Pivot] = []
    schemas = tuple(world.schemas())
    for n in range(conversations):
        w = ConversationWriter(world, system, random.Random(rng.random()))
        rng.choice(scenes)(w, rng.choice(users))
        trajectory = f"synthetic/{world.name}/conv{n}"
        for i, m in enumerate(w.messages):
            if m.role == "assistant":
                context = {"world": world.name, "trajectory_id": trajectory, "turn_index": i, "synthetic": True}
                if i in w.equivalents:
                    context["equivalent_arguments"] = w.equivalents[i]
                pivots.append(Pivot(f"{trajectory}#{i}", "tool-use", tuple(w.messages[:i]), m, schemas, context))
    return pivots


def last_turns(pivots: Sequence[Pivot]) -> list[Pivot]:
    """The last pivot of each conversation: its history holds every earlier turn (a tokenizer corpus)."""
    last: dict[str, Pivot] = {}
    for p in pivots:
        last[str(p.context.get("trajectory_id", p.id))] = p
    return list(last.values())


def _policy_text(world: Any) -> str:
    """The airline policy beside the world's database (what the real trajectories' system says)."""
    _, _, path = str(getattr(world, "description", "")).partition(":")
    folder = Path(path)
    policy = (folder if folder.is_dir() else folder.parent) / "policy.md"
    return policy.read_text(encoding="utf-8") if policy.is_file() else "You are an airline customer service agent."
