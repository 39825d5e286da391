"""The 14 tau-bench airline tools, reimplemented from their schemas and the recorded calls.

No tool code ships with the data: every behaviour here was inferred from the tool schemas, the
airline policy and the input/output pairs recorded in the GPT-4o airline trajectories, and is
checked by replaying all of them (`pivot tools replay`). Where the recorded tools behave
surprisingly, this module does the same, because fidelity to the recorded environment is the
point. The quirks, each visible in the records:

- `update_reservation_flights` prices the new flights in the requested cabin but leaves the
  reservation's `cabin` field unchanged.
- Flight seats are never decremented by bookings or flight changes.
- `cancel_reservation` appends one refund entry per payment and sets `status`, but returns no
  money to gift cards; booking with a certificate removes it from the profile.
- New reservation ids are HATHAT, HATHAU, HATHAV (the first free one); new certificates are
  certificate_3221322, _9510531, _6355286 (the first free one).
- `search_onestop_flight` labels a second leg that leaves the next day (first leg arriving
  `+1`) with the next day's date, but shows the seats and prices of the search date.
- `get_user_details` prints the address's `state` field as `province` (the field's name in the
  database version the trajectories were recorded with).
- `calculate` prints `round(value, 2)` as a Python float (`255.0`).
"""

from __future__ import annotations

import ast
import json
import operator
from collections.abc import Callable
from datetime import date as _date
from datetime import timedelta
from typing import Any

from pivot_tool_worlds._state import WorldState
from pivot_tool_worlds.errors import ToolFailure

AIRPORTS = {
    "SFO": "San Francisco",
    "JFK": "New York",
    "LAX": "Los Angeles",
    "ORD": "Chicago",
    "DFW": "Dallas",
    "DEN": "Denver",
    "SEA": "Seattle",
    "ATL": "Atlanta",
    "MIA": "Miami",
    "BOS": "Boston",
    "PHX": "Phoenix",
    "IAH": "Houston",
    "LAS": "Las Vegas",
    "MCO": "Orlando",
    "EWR": "Newark",
    "CLT": "Charlotte",
    "MSP": "Minneapolis",
    "DTW": "Detroit",
    "PHL": "Philadelphia",
    "LGA": "LaGuardia",
}
NEW_RESERVATION_IDS = ("HATHAT", "HATHAU", "HATHAV")
NEW_CERTIFICATE_IDS = ("certificate_3221322", "certificate_9510531", "certificate_6355286")
BOOKING_TIME = "2024-05-15T15:00:00"
BAG_PRICE = 50
INSURANCE_PRICE = 30

# -- read-only tools --------------------------------------------------------------------------------


def get_user_details(state: WorldState, user_id: str) -> str:
    """The user's profile as JSON."""
    user = state.get("users", user_id)
    if user is None:
        raise ToolFailure("user not found")
    address = user.get("address")
    if isinstance(address, dict) and "state" in address:
        user = {**user, "address": {("province" if k == "state" else k): v for k, v in address.items()}}
    return json.dumps(user)


def _read_reservation(state: WorldState, reservation_id: str) -> dict[str, Any]:
    """The reservation, read-only (no copy-on-write clone), or the tool's "not found" failure."""
    reservation = state.get("reservations", reservation_id)
    if reservation is None:
        raise ToolFailure("reservation not found")
    return reservation


def get_reservation_details(state: WorldState, reservation_id: str) -> str:
    """The reservation as JSON."""
    reservation = _read_reservation(state, reservation_id)
    return json.dumps(reservation)


def list_all_airports(state: WorldState) -> str:
    """The fixed airport table (code -> city)."""
    return json.dumps(AIRPORTS)


def _flight_on(flight: dict[str, Any], day: str, with_date: bool) -> dict[str, Any]:
    """A flight's static fields merged with that day's status, seats and prices."""
    out = {k: v for k, v in flight.items() if k != "dates"}
    out.update(flight["dates"][day])
    if with_date:
        out["date"] = day
    return out


def _available(flight: dict[str, Any], day: str) -> bool:
    return flight["dates"].get(day, {}).get("status") == "available"


def search_direct_flight(state: WorldState, origin: str, destination: str, date: str) -> str:
    """Available direct flights on that date, in database order."""
    found = [
        _flight_on(f, date, with_date=False)
        for _, f in state.items("flights")
        if f["origin"] == origin and f["destination"] == destination and _available(f, date)
    ]
    return json.dumps(found)


def _next_day(day: str) -> str:
    try:
        return (_date.fromisoformat(day) + timedelta(days=1)).isoformat()
    except ValueError:
        return day  # not a date: no flight is scheduled on it anyway


def search_onestop_flight(state: WorldState, origin: str, destination: str, date: str) -> str:
    """Available two-leg connections: the second leg leaves after the first lands (next day on `+1`)."""
    flights = [f for _, f in state.items("flights")]
    found = []
    for first in flights:
        if first["origin"] != origin or not _available(first, date):
            continue
        arrival = first["scheduled_arrival_time_est"]
        second_day = _next_day(date) if "+1" in arrival else date
        for second in flights:
            if second["origin"] != first["destination"] or second["destination"] != destination:
                continue
            # The recorded tool compares the time strings; "+1" arrivals sort after same-day times.
            if arrival > second["scheduled_departure_time_est"] or not _available(second, second_day):
                continue
            # ... and shows a next-day second leg with the seats and prices of the search date.
            second_leg = _flight_on(second, date if date in second["dates"] else second_day, True)
            second_leg["date"] = second_day
            found.append([_flight_on(first, date, True), second_leg])
    return json.dumps(found)


_OPS: dict[type, Callable[..., Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.operand))
    raise ToolFailure("invalid characters in expression")


def calculate(state: WorldState, expression: str) -> str:
    """Evaluate `+ - * /` over numbers and parentheses; the result rounded to 2 places, as a float."""
    if not all(c in "0123456789+-*/(). " for c in expression):
        raise ToolFailure("invalid characters in expression")
    try:
        value = _evaluate(ast.parse(expression, mode="eval"))
    except SyntaxError as e:
        raise ToolFailure(f"invalid syntax in expression ({e.msg})") from e
    except ZeroDivisionError as e:
        raise ToolFailure("division by zero") from e
    return str(round(float(value), 2))


def think(state: WorldState, thought: str) -> str:
    """No effect on the database; the thought is the call's effect (see `note_args`)."""
    return ""


def transfer_to_human_agents(state: WorldState, summary: str) -> str:
    """Hand the conversation over; the summary is the call's effect (see `note_args`)."""
    return "Transfer successful"


# -- tools that change the database ----------------------------------------------------------------


def _reservation(state: WorldState, reservation_id: str) -> dict[str, Any]:
    _read_reservation(state, reservation_id)  # fail before cloning the record
    return state.edit("reservations", reservation_id)


def _priced_segment(state: WorldState, segment: dict[str, Any], cabin: str, passengers: int) -> dict[str, Any]:
    """The segment with price, origin and destination filled in, after the availability checks."""
    number, day = segment["flight_number"], segment["date"]
    flight = state.get("flights", number)
    if flight is None:
        raise ToolFailure(f"flight {number} not found")
    if day not in flight["dates"]:
        raise ToolFailure(f"flight {number} not found on date {day}")
    on_day = flight["dates"][day]
    if on_day["status"] != "available":
        raise ToolFailure(f"flight {number} not available on date {day}")
    if on_day["available_seats"][cabin] < passengers:
        raise ToolFailure(f"not enough seats on flight {number}")
    return {
        **segment,
        "price": on_day["prices"][cabin],
        "origin": flight["origin"],
        "destination": flight["destination"],
    }


def book_reservation(
    state: WorldState,
    user_id: str,
    origin: str,
    destination: str,
    flight_type: str,
    cabin: str,
    flights: list,
    passengers: list,
    payment_methods: list,
    total_baggages: int,
    nonfree_baggages: int,
    insurance: str,
) -> str:
    """Price the flights, check and charge the payments, and store a new reservation."""
    user = state.get("users", user_id)
    if user is None:
        raise ToolFailure("user not found")
    reservation_id = next((r for r in NEW_RESERVATION_IDS if state.get("reservations", r) is None), None)
    if reservation_id is None:
        raise ToolFailure("no reservation id left")
    segments = [_priced_segment(state, dict(s), cabin, len(passengers)) for s in flights]
    total = sum(s["price"] for s in segments) * len(passengers)
    if insurance == "yes":
        total += INSURANCE_PRICE * len(passengers)
    total += BAG_PRICE * nonfree_baggages
    for payment in payment_methods:
        method = user["payment_methods"].get(payment["payment_id"])
        if method is None:
            raise ToolFailure(f"payment method {payment['payment_id']} not found")
        if method["source"] in ("gift_card", "certificate") and method["amount"] < payment["amount"]:
            raise ToolFailure(f"not enough balance in payment method {payment['payment_id']}")
    paid = sum(p["amount"] for p in payment_methods)
    if paid != total:
        raise ToolFailure(f"payment amount does not add up, total price is {total}, but paid {paid}")
    user = state.edit("users", user_id)
    for payment in payment_methods:
        method = user["payment_methods"][payment["payment_id"]]
        if method["source"] == "gift_card":
            method["amount"] -= payment["amount"]
        elif method["source"] == "certificate":
            del user["payment_methods"][payment["payment_id"]]
    reservation = {
        "reservation_id": reservation_id,
        "user_id": user_id,
        "origin": origin,
        "destination": destination,
        "flight_type": flight_type,
        "cabin": cabin,
        "flights": segments,
        "passengers": passengers,
        "payment_history": payment_methods,
        "created_at": BOOKING_TIME,
        "total_baggages": total_baggages,
        "nonfree_baggages": nonfree_baggages,
        "insurance": insurance,
    }
    state.put("reservations", reservation_id, reservation)
    user["reservations"].append(reservation_id)
    return json.dumps(reservation)


def _charge(state: WorldState, user_id: str, payment_id: str, amount: float) -> None:
    """Check a change's payment method (no certificates; gift cards need the balance) and charge it."""
    method = state.get("users", user_id)["payment_methods"].get(payment_id)
    if method is None:
        raise ToolFailure("payment method not found")
    if method["source"] == "certificate":
        raise ToolFailure("certificate cannot be used to update reservation")
    if method["source"] == "gift_card" and method["amount"] < amount:
        raise ToolFailure("gift card balance is not enough")
    if method["source"] == "gift_card":
        state.edit("users", user_id)["payment_methods"][payment_id]["amount"] -= amount


def update_reservation_flights(
    state: WorldState, reservation_id: str, cabin: str, flights: list, payment_id: str
) -> str:
    """Replace the flights (kept segments keep their price); charge or refund the difference."""
    current = _read_reservation(state, reservation_id)
    n = len(current["passengers"])
    segments = []
    for segment in flights:
        kept = [
            f
            for f in current["flights"]
            if f["flight_number"] == segment["flight_number"]
            and f["date"] == segment["date"]
            and cabin == current["cabin"]
        ]
        if kept:
            k = kept[0]
            segments.append({**segment, "price": k["price"], "origin": k["origin"], "destination": k["destination"]})
        else:
            segments.append(_priced_segment(state, dict(segment), cabin, n))
    difference = (sum(s["price"] for s in segments) - sum(f["price"] for f in current["flights"])) * n
    _charge(state, current["user_id"], payment_id, difference)
    reservation = state.edit("reservations", reservation_id)
    reservation["flights"] = segments
    if difference != 0:
        reservation["payment_history"].append({"payment_id": payment_id, "amount": difference})
    return json.dumps(reservation)


def update_reservation_baggages(
    state: WorldState, reservation_id: str, total_baggages: int, nonfree_baggages: int, payment_id: str
) -> str:
    """Set the bag counts; added non-free bags cost 50 each."""
    current = _read_reservation(state, reservation_id)
    price = BAG_PRICE * max(0, nonfree_baggages - current["nonfree_baggages"])
    _charge(state, current["user_id"], payment_id, price)
    reservation = state.edit("reservations", reservation_id)
    reservation["total_baggages"] = total_baggages
    reservation["nonfree_baggages"] = nonfree_baggages
    if price != 0:
        reservation["payment_history"].append({"payment_id": payment_id, "amount": price})
    return json.dumps(reservation)


def update_reservation_passengers(state: WorldState, reservation_id: str, passengers: list) -> str:
    """Replace the passengers (their number cannot change)."""
    current = _read_reservation(state, reservation_id)
    if len(passengers) != len(current["passengers"]):
        raise ToolFailure("number of passengers does not match")
    reservation = state.edit("reservations", reservation_id)
    reservation["passengers"] = passengers
    return json.dumps(reservation)


def cancel_reservation(state: WorldState, reservation_id: str) -> str:
    """Append a refund for every payment and mark the reservation cancelled."""
    reservation = _reservation(state, reservation_id)
    refunds = [{"payment_id": p["payment_id"], "amount": -p["amount"]} for p in reservation["payment_history"]]
    reservation["payment_history"].extend(refunds)
    reservation["status"] = "cancelled"
    return json.dumps(reservation)


def send_certificate(state: WorldState, user_id: str, amount: float) -> str:
    """Add a certificate under the first free certificate id."""
    if state.get("users", user_id) is None:
        raise ToolFailure("user not found")
    methods = state.get("users", user_id)["payment_methods"]
    payment_id = next((c for c in NEW_CERTIFICATE_IDS if c not in methods), None)
    if payment_id is None:
        raise ToolFailure("too many certificates")
    user = state.edit("users", user_id)
    user["payment_methods"][payment_id] = {"source": "certificate", "amount": amount, "id": payment_id}
    return f"Certificate {payment_id} added to user {user_id} with amount {amount}."


READ_ONLY = {
    "get_user_details": get_user_details,
    "get_reservation_details": get_reservation_details,
    "list_all_airports": list_all_airports,
    "search_direct_flight": search_direct_flight,
    "search_onestop_flight": search_onestop_flight,
    "calculate": calculate,
    "think": think,
    "transfer_to_human_agents": transfer_to_human_agents,
}
WRITES = {
    "book_reservation": book_reservation,
    "update_reservation_flights": update_reservation_flights,
    "update_reservation_baggages": update_reservation_baggages,
    "update_reservation_passengers": update_reservation_passengers,
    "cancel_reservation": cancel_reservation,
    "send_certificate": send_certificate,
}
NOTE_ARGS = {"think": ("thought",), "transfer_to_human_agents": ("summary",)}
