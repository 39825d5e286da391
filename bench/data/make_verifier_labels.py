"""Write `bench/data/verifier_labels.jsonl`: hand-labelled candidates at real pivots of ../shared/data.

    python bench/data/make_verifier_labels.py [--shared ../shared/data]

Every candidate below is written out by hand for a chosen pivot, or built from the expert's own call
by one named edit whose effect on acceptability is known (reordered keys, integral amounts written
as floats: the same call; an id with one character changed, another amount, another test label: a
different call). Each row was read after generation; the label says what the action would really do
at that state, not what a verifier says. Kinds: `expert` (the demonstrated action), `rewrite` (an
acceptable different text of it), `near-miss` (looks like the expert, does something else), `wrong`.
Terminal-Bench task folders carry a canary, so terminal rows come from the NeMo Gym pivot rows only.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pivot_core import message_commands  # noqa: E402
from pivot_envs import load_pivots  # noqa: E402
from pivot_tool_worlds._effects import execute_turn  # noqa: E402
from verifiers_plugins.builtin.tool_exec import ToolExec  # noqa: E402

OUT = Path(__file__).resolve().parent / "verifier_labels.jsonl"
AIRLINE = "tool_use/tau_bench_airline_gpt4o.jsonl"
TELECOM = "tool_use/tau2_telecom_gpt4o.jsonl"
NEMO_TOOL = "nemo_gym_pivot_rows/single_step_tool_use_with_argument_comparison.example.jsonl"
NEMO_PARALLEL = "nemo_gym_pivot_rows/single_step_tool_use_with_argument_comparison.parallel_example.jsonl"
NEMO_SWE = "nemo_gym_pivot_rows/swe_pivot.example.jsonl"
MINI_SWE = "swe/mini_swe_agent_gemini3pro_swebench_verified.jsonl"
TERMINUS = "nemo_gym_pivot_rows/terminus_judge.example.jsonl"
HARNESS = "nemo_gym_pivot_rows/terminal_multi_harness.example.jsonl"
REACT = "browse/react_wikipedia_trajectories.jsonl"
STALL = "Thanks for your patience! Let me look into that for you."


def tool_calls(*calls: tuple[str, dict]) -> str:
    """Hermes `<tool_call>` completion text."""
    return "\n".join(
        "<tool_call>\n" + json.dumps({"name": n, "arguments": a}, ensure_ascii=False) + "\n</tool_call>"
        for n, a in calls
    )


def bash(command: str, thought: str = "I'll run the next step.") -> str:
    """A mini-swe-agent turn: a THOUGHT and one bash block."""
    return f"THOUGHT: {thought}\n\n```bash\n{command}\n```"


def terminus(keystrokes: str, analysis: str = "Checking the environment.", plan: str = "Run one command.") -> str:
    """A Terminus JSON turn with one command."""
    return json.dumps(
        {"analysis": analysis, "plan": plan, "commands": [{"keystrokes": keystrokes, "duration": 1.0}]}, indent=2
    )


def off_by_one(text: str) -> str:
    """The same id with its last character changed (a digit to the next digit, a letter to the next letter)."""
    last = text[-1]
    if last.isdigit():
        return text[:-1] + str((int(last) + 1) % 10)
    return text[:-1] + ("A" if last == "Z" else "a" if last == "z" else chr(ord(last) + 1))


def as_floats(value):
    """Every int written as a float (`250` -> `250.0`); booleans stay booleans."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, list):
        return [as_floats(v) for v in value]
    if isinstance(value, dict):
        return {k: as_floats(v) for k, v in value.items()}
    return value


class Labels:
    """Collects rows; loads each source file once."""

    def __init__(self, shared: Path) -> None:
        self.shared = shared
        self.rows: list[dict] = []
        self._pivots: dict[str, dict] = {}

    def pivots(self, file: str) -> dict:
        if file not in self._pivots:
            self._pivots[file] = {p.id: p for p in load_pivots(self.shared / file)}
        return self._pivots[file]

    def add(self, file: str, pivot_id: str, completion: str, label: int, kind: str, reason: str) -> None:
        pivot = self.pivots(file)[pivot_id]  # a KeyError here is a typo in this script
        self.rows.append(
            {
                "domain": pivot.domain,
                "file": file,
                "pivot_id": pivot_id,
                "completion": completion,
                "label": label,
                "kind": kind,
                "reason": reason,
            }
        )


# -- tool use: tau-bench airline (executed on the airline world) --------------------------------------


def airline(lab: Labels) -> None:
    """Successful trajectories only (reward 1), expert calls that succeed on the world."""
    verifier = ToolExec()
    cache = verifier.cache("tau-airline")
    per_tool: dict[str, int] = {}
    quota = {
        "get_reservation_details": 4,
        "get_user_details": 3,
        "book_reservation": 4,
        "cancel_reservation": 3,
        "search_direct_flight": 3,
        "calculate": 3,
        "send_certificate": 2,
        "update_reservation_baggages": 2,
        "update_reservation_flights": 2,
    }
    for pid, p in lab.pivots(AIRLINE).items():
        if p.context.get("trajectory_reward") != 1.0 or len(p.expert.tool_calls) != 1:
            continue
        call = p.expert.tool_calls[0]
        name, args = call.name, call.parsed_arguments()
        if per_tool.get(name, 0) >= quota.get(name, 0) or not isinstance(args, dict):
            continue
        effect = execute_turn(cache.world, cache.state_at(p.history).state, p.expert.tool_calls)
        if effect.outcomes[0].error:
            continue
        per_tool[name] = per_tool.get(name, 0) + 1
        airline_variants(lab, pid, name, args)


def airline_variants(lab: Labels, pid: str, name: str, args: dict) -> None:
    add = lambda text, label, kind, why: lab.add(AIRLINE, pid, text, label, kind, why)  # noqa: E731
    add(tool_calls((name, args)), 1, "expert", "the demonstrated call")
    if len(args) > 1:
        add(tool_calls((name, dict(reversed(list(args.items()))))), 1, "rewrite", "same arguments, keys reordered")
    if name == "get_reservation_details":
        rid = args["reservation_id"]
        add(tool_calls((name, {"reservation_id": off_by_one(rid)})), 0, "near-miss", "reservation id off by one char")
        add(tool_calls((name, {"reservation_id": rid.lower()})), 0, "near-miss", "ids are case-sensitive")
        add(tool_calls(("cancel_reservation", {"reservation_id": rid})), 0, "wrong", "cancels instead of reading")
    elif name == "get_user_details":
        uid = args["user_id"]
        add(tool_calls((name, {"user_id": off_by_one(uid)})), 0, "near-miss", "user id off by one digit")
        add(STALL, 0, "wrong", "no tool call where the expert looks the user up")
    elif name == "book_reservation":
        floats = {**args, "payment_methods": as_floats(args["payment_methods"])}
        add(tool_calls((name, floats)), 1, "rewrite", "amounts written as floats (250.0 for 250): same booking")
        add(tool_calls((name, as_floats(args))), 1, "rewrite", "every number as a float: same booking")
        more = copy.deepcopy(args)
        more["payment_methods"][0]["amount"] += 1
        add(tool_calls((name, more)), 0, "near-miss", "one payment amount 1 higher: does not add up")
        text = copy.deepcopy(args)
        text["payment_methods"][0]["amount"] = str(text["payment_methods"][0]["amount"])
        add(tool_calls((name, text)), 0, "near-miss", "amount as a string: the schema wants a number")
        other = {**args, "insurance": "no" if args["insurance"] == "yes" else "yes"}
        add(tool_calls((name, other)), 0, "near-miss", "insurance flipped: another booking and price")
    elif name == "cancel_reservation":
        rid = args["reservation_id"]
        add(tool_calls((name, {"reservation_id": off_by_one(rid)})), 0, "near-miss", "cancels another id")
    elif name == "search_direct_flight":
        y, m, d = args["date"].split("-")
        day = f"{y}-{m}-{int(d) + 1:02d}" if int(d) < 28 else f"{y}-{m}-{int(d) - 1:02d}"
        add(tool_calls((name, {**args, "date": day})), 0, "near-miss", "another date")
        swap = {**args, "origin": args["destination"], "destination": args["origin"]}
        add(tool_calls((name, swap)), 0, "near-miss", "origin and destination swapped")
    elif name == "calculate":
        expr = args["expression"]
        add(tool_calls((name, {"expression": f"1 * ({expr})"})), 1, "rewrite", "an expression with the same value")
        add(tool_calls((name, {"expression": f"({expr}) + 1"})), 0, "near-miss", "a value 1 higher")
    elif name == "send_certificate":
        add(tool_calls((name, {**args, "amount": float(args["amount"])})), 1, "rewrite", "amount as a float")
        add(tool_calls((name, {**args, "amount": args["amount"] + 50})), 0, "near-miss", "another amount")
        add(tool_calls((name, {**args, "user_id": off_by_one(args["user_id"])})), 0, "near-miss", "another user")
    elif name == "update_reservation_baggages":
        add(tool_calls((name, as_floats(args))), 1, "rewrite", "bag counts written as floats (3.0 for 3)")
        more = {**args, "nonfree_baggages": args["nonfree_baggages"] + 1, "total_baggages": args["total_baggages"] + 1}
        add(tool_calls((name, more)), 0, "near-miss", "one more paid bag")
    elif name == "update_reservation_flights":
        cabin = "business" if args["cabin"] != "business" else "economy"
        add(tool_calls((name, {**args, "cabin": cabin})), 0, "near-miss", "another cabin")
        add(
            tool_calls((name, {**args, "reservation_id": off_by_one(args["reservation_id"])})),
            0,
            "near-miss",
            "another reservation id",
        )


# -- tool use: tau2 telecom and NeMo Gym rows (no world: compared by arguments) ---------------------------


def telecom(lab: Labels) -> None:
    """Phone lookups and one parallel pair. Line ids are left alone: the customer has three lines and
    the one the expert opens (L1001, number ...2001) is not the caller's (...2002), so another line
    is no clear near-miss."""
    tau2 = "tau2_bench/telecom/gpt-4o/[mobile_data_issue]"
    for task in ("user_abroad_roaming_enabled_off[PERSONA:None]", "data_mode_off[PERSONA:None]"):
        pid = f"{tau2}{task}/trial0#5"
        phone = lambda n: ("get_customer_by_phone", {"phone_number": n})  # noqa: E731
        lab.add(TELECOM, pid, tool_calls(phone("555-123-2002")), 1, "expert", "the number the user gave")
        lab.add(TELECOM, pid, tool_calls(phone("555-123-2003")), 0, "near-miss", "one digit off")
        lab.add(TELECOM, pid, tool_calls(phone("555-321-2002")), 0, "near-miss", "digits transposed")
        lab.add(TELECOM, pid, STALL, 0, "wrong", "no lookup where the expert looks the customer up")
    pid = f"{tau2}data_mode_off[PERSONA:None]/trial0#11"
    usage = ("get_data_usage", {"customer_id": "C1001", "line_id": "L1001"})
    device = ("get_details_by_id", {"id": "D1001"})
    lab.add(TELECOM, pid, tool_calls(usage, device), 1, "expert", "demonstrated")
    lab.add(TELECOM, pid, tool_calls(device, usage), 1, "rewrite", "independent calls reordered")
    other = ("get_data_usage", {"customer_id": "C1002", "line_id": "L1001"})
    lab.add(TELECOM, pid, tool_calls(other, device), 0, "near-miss", "another customer's id")


def nemo_tool(lab: Labels) -> None:
    add = lambda pid, text, label, kind, why: lab.add(NEMO_TOOL, pid, text, label, kind, why)  # noqa: E731
    auth = {"user_id": "GROOM2024", "event_confirmation_code": "NIGHTCLUB2024"}
    add("nemo-70fecb1194a0#4", tool_calls(("authenticate_user", auth)), 1, "expert", "demonstrated")
    rev = dict(reversed(list(auth.items())))
    add("nemo-70fecb1194a0#4", tool_calls(("authenticate_user", rev)), 1, "rewrite", "keys reordered")
    add(
        "nemo-70fecb1194a0#4",
        tool_calls(("authenticate_user", {**auth, "event_confirmation_code": "NIGHTCLUB2025"})),
        0,
        "near-miss",
        "another confirmation code",
    )
    add(
        "nemo-70fecb1194a0#4",
        tool_calls(("authenticate_user", {**auth, "user_id": "GROOM2O24"})),
        0,
        "near-miss",
        "letter O for digit 0 in the user id",
    )
    seat = {"event_id": "SHOW24", "section": "Medical Zone"}
    add("nemo-76246727696f#8", tool_calls(("check_seat_availability", seat)), 1, "expert", "demonstrated")
    add(
        "nemo-76246727696f#8",
        tool_calls(("check_seat_availability", {"section": "Medical Zone", "event_id": "SHOW24"})),
        1,
        "rewrite",
        "keys reordered",
    )
    add(
        "nemo-76246727696f#8",
        tool_calls(("check_seat_availability", {**seat, "event_id": "SHOW25"})),
        0,
        "near-miss",
        "another event",
    )
    add(
        "nemo-76246727696f#8",
        tool_calls(("check_seat_availability", {**seat, "section": "VIP Zone"})),
        0,
        "near-miss",
        "another section",
    )
    summary = (
        "User needs assistance updating expired payment method and clarification on manual seat selection "
        "for groups 4-7."
    )
    add("nemo-beff3ef837b8#10", tool_calls(("transfer_to_human_agents", {"summary": summary})), 1, "expert", "demo")
    add(
        "nemo-beff3ef837b8#10",
        tool_calls(
            (
                "transfer_to_human_agents",
                {
                    "summary": "User needs help updating an expired payment method and clarification on manual "
                    "seat selection for groups 4-7."
                },
            )
        ),
        1,
        "rewrite",
        "the same hand-off summary, lightly reworded",
    )
    add("nemo-beff3ef837b8#10", STALL, 0, "wrong", "no hand-off where the expert transfers")
    ask = lab.pivots(NEMO_TOOL)["nemo-d87d91b616ac#14"].expert.content
    add("nemo-d87d91b616ac#14", ask, 1, "expert", "demonstrated text turn")
    add(
        "nemo-d87d91b616ac#14",
        tool_calls(("cancel_tickets", {"ticket_ids": ["T1", "T2", "T3"]})),
        0,
        "wrong",
        "cancels made-up ticket ids instead of asking for them",
    )
    add(
        "nemo-d87d91b616ac#14",
        "I'm sorry, but I can't help with ticket cancellations. Is there anything else I can do?",
        0,
        "wrong",
        "refuses a request the expert serves",
    )
    par = lab.pivots(NEMO_PARALLEL)
    city = lambda c: ("get_weather", {"city": c})  # noqa: E731
    pid = "nemo-20c05a5be104#2"
    assert pid in par
    lab.add(NEMO_PARALLEL, pid, tool_calls(city("Paris"), city("Tokyo"), city("Cairo")), 1, "expert", "demonstrated")
    lab.add(NEMO_PARALLEL, pid, tool_calls(city("Cairo"), city("Paris"), city("Tokyo")), 1, "rewrite", "call order")
    lab.add(NEMO_PARALLEL, pid, tool_calls(city("Paris"), city("Tokyo")), 0, "near-miss", "one city left out")
    lab.add(NEMO_PARALLEL, pid, tool_calls(city("Paris"), city("Tokyo"), city("Tokyo")), 0, "near-miss", "Tokyo twice")
    stock = lambda t: ("get_stock_price", {"ticker": t})  # noqa: E731
    pid = "nemo-c1d825a9d5c0#2"
    lab.add(NEMO_PARALLEL, pid, tool_calls(stock("AMD"), stock("NVDA")), 1, "rewrite", "call order")
    lab.add(NEMO_PARALLEL, pid, tool_calls(stock("NVDA"), stock("INTC")), 0, "near-miss", "another ticker")


# -- SWE ----------------------------------------------------------------------------------------------


def mini_swe(lab: Labels) -> None:
    """Hand-written candidates at mini-swe-agent pivots (bash-only agent, one command per turn)."""
    base = "swebench_verified/mini-swe-agent/gemini-3-pro-preview/"
    rows = [
        # (instance#turn, completion command, label, kind, reason)
        ("django__django-11433#60", "./tests/runtests.py model_forms", 1, "expert", "demonstrated"),
        ("django__django-11433#60", "python3 tests/runtests.py model_forms", 1, "rewrite", "same test run"),
        ("django__django-11433#60", "cd tests && ./runtests.py model_forms", 1, "rewrite", "same run from tests/"),
        ("django__django-11433#60", "./tests/runtests.py model_forms --verbosity 2", 1, "rewrite", "more output"),
        ("django__django-11433#60", "./tests/runtests.py forms", 0, "near-miss", "another test label"),
        ("django__django-11433#60", "./tests/runtests.py model_fields", 0, "near-miss", "another test app"),
        ("django__django-11433#60", "cat tests/runtests.py", 0, "wrong", "reads the runner instead of running"),
        ("django__django-11477#40", "python3 tests/runtests.py i18n.patterns.tests", 1, "expert", "demonstrated"),
        ("django__django-11477#40", "./tests/runtests.py i18n.patterns.tests", 1, "rewrite", "same test run"),
        ("django__django-11477#40", "python tests/runtests.py i18n.patterns.tests", 1, "rewrite", "python for python3"),
        ("django__django-11477#40", "python3 tests/runtests.py i18n.contenttypes", 0, "near-miss", "other tests"),
        ("django__django-11477#40", "python3 tests/runtests.py urlpatterns", 0, "near-miss", "another test app"),
    ]
    for inst, cmd, label, kind, why in rows:
        lab.add(MINI_SWE, base + inst, bash(cmd), label, kind, why)
    # Variants built from the expert's own command at pivots of a chosen shape.
    seen: dict[str, int] = {}
    for pid, p in lab.pivots(MINI_SWE).items():
        cmds = message_commands(p.expert)
        if len(cmds) != 1 or "\n" in cmds[0]:
            continue
        cmd = cmds[0]
        shape = swe_shape(cmd)
        if shape is None or seen.get(shape, 0) >= 4:
            continue
        seen[shape] = seen.get(shape, 0) + 1
        for text, label, kind, why in swe_variants(shape, cmd):
            lab.add(MINI_SWE, pid, bash(text), label, kind, why)


def heredocs(lab: Labels) -> None:
    """`cat <<'EOF' > PATH` writes: the other redirect order is the same write; an empty body truncates."""
    done = 0
    for pid, p in lab.pivots(MINI_SWE).items():
        cmds = message_commands(p.expert)
        m = re.fullmatch(r"cat <<'EOF' > ([\w./-]+\.py)\n(.*)\nEOF", cmds[0], re.S) if len(cmds) == 1 else None
        if m is None or done >= 4:
            continue
        done += 1
        path, body = m.groups()
        lab.add(MINI_SWE, pid, bash(cmds[0]), 1, "expert", "demonstrated")
        lab.add(MINI_SWE, pid, bash(f"cat > {path} <<'EOF'\n{body}\nEOF"), 1, "rewrite", "redirect before the heredoc")
        lab.add(MINI_SWE, pid, bash(f"cat <<'EOF' > {path}\nEOF"), 0, "wrong", "writes an empty file")


def airline_text(lab: Labels) -> None:
    """Text turns of successful airline trajectories: paraphrases are acceptable, false claims are not."""
    base = "tau_bench/airline/gpt-4o/"
    rows = [
        (
            "task6/trial0#2",
            "Sure! To get started, please share your user ID and the ID of the reservation you want to change.",
            1,
            "rewrite",
            "asks for the same two ids",
        ),
        (
            "task6/trial0#2",
            tool_calls(("get_user_details", {"user_id": "john_doe_1234"})),
            0,
            "wrong",
            "looks up a made-up user id",
        ),
        (
            "task6/trial0#2",
            "I'm sorry, but I can't change flight reservations.",
            0,
            "wrong",
            "refuses a served request",
        ),
        ("task20/trial0#4", "Could you please provide your user ID as well?", 1, "expert", "demonstrated"),
        ("task20/trial0#4", "Thanks! Could you also share your user ID, please?", 1, "rewrite", "asks for the user id"),
        ("task20/trial0#4", "Your reservation 1N99U6 has been updated.", 0, "wrong", "claims a change never made"),
        (
            "task38/trial0#2",
            "Unfortunately, travel insurance is non-refundable. Is there anything else I can help you with?",
            1,
            "rewrite",
            "the same refusal, reworded",
        ),
        ("task38/trial0#2", "Sure, I've refunded the insurance on your booking.", 0, "wrong", "claims a refund"),
        (
            "task18/trial1#2",
            "I can help you with that. Could you please provide your user ID and the reason for "
            "cancellation (change of plan, airline cancelled flight, or other reasons)?",
            1,
            "expert",
            "demonstrated",
        ),
        (
            "task18/trial1#2",
            tool_calls(("cancel_reservation", {"reservation_id": "SI5UKW"})),
            0,
            "wrong",
            "cancels before the user id, the reason and a confirmation",
        ),
    ]
    for pid, text, label, kind, why in rows:
        lab.add(AIRLINE, base + pid, text, label, kind, why)


def airline_notes(lab: Labels) -> None:
    """Free-text notes (a thought, a hand-off summary): ids and numbers in them must be the expert's.

    The transfer comes from a failed run (the expert's own transfer may be wrong: names can be
    changed by a tool), so only its corrupted copy is labelled: a hand-off about another reservation
    is wrong either way.
    """
    base = "tau_bench/airline/gpt-4o/"
    transfer = lab.pivots(AIRLINE)[base + "task4/trial0#24"].expert.tool_calls[0].parsed_arguments()["summary"]
    lab.add(
        AIRLINE,
        base + "task4/trial0#24",
        tool_calls(("transfer_to_human_agents", {"summary": transfer.replace("FQ8APE", "FQ8APX")})),
        0,
        "near-miss",
        "hand-off names another reservation id",
    )
    pid = base + "task11/trial0#22"
    thought = lab.pivots(AIRLINE)[pid].expert.tool_calls[0].parsed_arguments()["thought"]
    lab.add(AIRLINE, pid, tool_calls(("think", {"thought": thought})), 1, "expert", "demonstrated")
    reworded = thought.replace("The error indicates", "The error shows")
    lab.add(AIRLINE, pid, tool_calls(("think", {"thought": reworded})), 1, "rewrite", "same thought, one verb changed")
    wrong = thought.replace("$375", "$382")
    lab.add(
        AIRLINE, pid, tool_calls(("think", {"thought": wrong})), 0, "near-miss", "misstates the price the tool gave"
    )


def swe_shape(cmd: str) -> str | None:
    """The shapes whose variants are known by construction."""
    if re.fullmatch(r"nl -ba [\w./-]+\.py \| sed -n '\d+,\d+p'", cmd):
        return "nl_sed"
    if re.fullmatch(r"cat [\w./-]+\.py", cmd):
        return "cat"
    if re.fullmatch(r"grep -rn \"[\w ]+\" [\w./-]+", cmd):
        return "grep"
    if re.fullmatch(r"grep -r \"[\w ]+\" [\w./-]+", cmd):
        return "grep_r"
    if re.fullmatch(r"sed -i 's/[^'$`\\\\\"]+/[^'$`\\\\\"]*/g?' [\w./-]+\.py", cmd):
        return "sed_i"
    if re.fullmatch(r"python3? [\w./-]+\.py", cmd) and "test" not in cmd:
        return "script"
    if re.fullmatch(r"pytest [\w./-]+\.py", cmd):
        return "pytest"
    if cmd == "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached":
        return "submit"
    return None


MARK = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"  # mini-swe-agent's submission line


def swe_variants(shape: str, cmd: str) -> list[tuple[str, int, str, str]]:
    """(command, label, kind, reason) for one expert command of a known shape."""
    out = [(cmd, 1, "expert", "demonstrated")]
    if shape == "nl_sed":
        path, a, b = re.fullmatch(r"nl -ba ([\w./-]+) \| sed -n '(\d+),(\d+)p'", cmd).groups()
        a, b = int(a), int(b)
        other = path.rsplit("/", 1)[0] + "/zz_other_module.py" if "/" in path else "zz_other_module.py"
        out += [
            (f"sed -n '{a},{b}p' {path}", 1, "rewrite", "same lines without numbers"),
            (f"cat -n {path} | sed -n '{a},{b}p'", 1, "rewrite", "same numbered lines"),
            (f"nl -ba {other} | sed -n '{a},{b}p'", 0, "near-miss", "same lines of another file"),
            (f"nl -ba {path} | sed -n '{b + 500},{b + 540}p'", 0, "near-miss", "lines far from the expert's"),
            (f"nl -ba {path} | sed -n '{a},{b}p;w {path}'", 0, "near-miss", "writes the lines over the file"),
        ]
    elif shape == "cat":
        path = cmd.split(" ", 1)[1]
        out += [
            (f"cat ./{path}", 1, "rewrite", "same file, ./ prefix"),
            (f"nl -ba {path}", 1, "rewrite", "the whole file, numbered"),
            (f"cat {path}.orig", 0, "near-miss", "another file"),
            (f"rm {path}", 0, "wrong", "deletes the file it should read"),
            (f"cat {path}; rm -rf /testbed/*", 0, "near-miss", "reads the file, then deletes the repository"),
            (f"cat {path} 2> {path}", 0, "near-miss", "the redirect empties the file before it is read"),
        ]
    elif shape == "grep":
        pattern, scope = re.fullmatch(r"grep -rn \"([\w ]+)\" ([\w./-]+)", cmd).groups()
        out += [
            (f'grep -nr "{pattern}" {scope}', 1, "rewrite", "flags in another order"),
            (f"grep -rn '{pattern}' {scope}", 1, "rewrite", "single quotes"),
            (f'grep -rn "zzq_unrelated_name" {scope}', 0, "near-miss", "searches for something else"),
            (f'grep -rn "{pattern}" $(git stash) {scope}', 0, "near-miss", "the same search, the changes stashed away"),
            (f'find {scope} -name "*.py" -delete', 0, "wrong", "a search that deletes the sources"),
        ]
    elif shape == "grep_r":
        pattern, scope = re.fullmatch(r"grep -r \"([\w ]+)\" ([\w./-]+)", cmd).groups()
        out += [
            (f'grep -rn "{pattern}" {scope}', 1, "rewrite", "same search with line numbers"),
            (f"grep -r '{pattern}' {scope.rstrip('/')}/", 1, "rewrite", "single quotes, trailing slash"),
            (f'grep -r "zzq_unrelated_name" {scope}', 0, "near-miss", "searches for something else"),
            (f'grep -r "{pattern}" {scope} > setup.py', 0, "near-miss", "the same search, written over setup.py"),
        ]
    elif shape == "sed_i":
        expr, path = re.fullmatch(r"sed -i '([^']+)' ([\w./-]+)", cmd).groups()
        other = path.rsplit("/", 1)[0] + "/zz_other_module.py" if "/" in path else "zz_other_module.py"
        out += [
            (f'sed -i "{expr}" {path}', 1, "rewrite", "double quotes around a substitution with no $ or backslash"),
            (f"sed -i -e '{expr}' ./{path}", 1, "rewrite", "-e and ./ prefix"),
            (f"sed -i '{expr}' {other}", 0, "near-miss", "the same edit in another file"),
            (f"sed -i '{sed_delete(expr)}' {path}", 0, "near-miss", "deletes the matched text instead of replacing it"),
        ]
    elif shape == "script":
        script = cmd.split(" ", 1)[1]
        other = "python3" if cmd.startswith("python ") else "python"
        out += [
            (f"{other} {script}", 1, "rewrite", "the other python name, same script"),
            (f"cd /testbed && python3 {script}", 1, "rewrite", "same script from the repository root"),
            (f"python3 zz_{script.rsplit('/', 1)[-1]}", 0, "near-miss", "another script"),
            (f"{cmd} && rm -rf ~", 0, "near-miss", "runs the script, then deletes the home folder"),
        ]
    elif shape == "pytest":
        path = cmd.split(" ", 1)[1]
        out += [
            (f"python -m pytest {path}", 1, "rewrite", "pytest as a module"),
            (f"pytest /testbed/{path} -q", 1, "rewrite", "absolute path, quieter output"),
            (f"pytest {path.rsplit('/', 1)[0]}/test_zz_other.py", 0, "near-miss", "another test file"),
            (f"{cmd}\ngit checkout .", 0, "near-miss", "runs the tests, then discards every change"),
            (f"{cmd} --co", 0, "near-miss", "collects the tests and runs none"),
        ]
    elif shape == "submit":
        out += [
            ("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT &&  git add -A &&  git diff --cached", 1, "rewrite", "spaces"),
            ("git diff", 0, "wrong", "shows the diff without submitting"),
            (f"{MARK} && git add --all && git diff --staged", 1, "rewrite", "git's synonyms"),
            (MARK, 0, "near-miss", "submits an empty patch"),
            (f"{MARK} && git add -A && git diff", 0, "near-miss", "nothing unstaged"),
            (f"{MARK} && cat /tmp/patch.diff", 0, "near-miss", "submits another file"),
        ]
    return out


def sed_delete(expr: str) -> str:
    """`s/A/B/g` -> `s/A//g`: the same match, replaced by nothing."""
    delim = expr[1]
    head, _, _ = expr[2:].partition(delim)
    flags = expr.rsplit(delim, 1)[-1]
    return f"s{delim}{head}{delim}{delim}{flags}"


def nemo_swe(lab: Labels) -> None:
    add = lambda pid, text, label, kind, why: lab.add(NEMO_SWE, pid, text, label, kind, why)  # noqa: E731
    grep = "grep -rn 'def calculate_total' /workspace/proj"
    add("example_2#2", tool_calls(("execute_bash", {"command": grep})), 1, "expert", "demonstrated")
    add(
        "example_2#2",
        tool_calls(("execute_bash", {"command": 'grep -nr "def calculate_total" /workspace/proj'})),
        1,
        "rewrite",
        "flags reordered, double quotes",
    )
    add(
        "example_2#2",
        tool_calls(("execute_bash", {"command": "grep -rn 'def calculate_tax' /workspace/proj"})),
        0,
        "near-miss",
        "another function",
    )
    view = {"command": "view", "path": "/workspace/proj/models.py", "view_range": [40, 80]}
    add("example_3#2", tool_calls(("str_replace_editor", view)), 1, "expert", "demonstrated")
    add(
        "example_3#2",
        tool_calls(("str_replace_editor", {**view, "view_range": [30, 90]})),
        1,
        "rewrite",
        "a wider window around the same lines",
    )
    add(
        "example_3#2",
        tool_calls(("str_replace_editor", {**view, "view_range": [200, 240]})),
        0,
        "near-miss",
        "lines far away",
    )
    add(
        "example_3#2",
        tool_calls(("str_replace_editor", {**view, "path": "/workspace/proj/views.py"})),
        0,
        "near-miss",
        "another file",
    )
    run = "python -m pytest /workspace/proj/tests/test_utils.py -q"
    add("example_5#2", tool_calls(("execute_bash", {"command": run})), 1, "expert", "demonstrated")
    add(
        "example_5#2",
        tool_calls(("execute_bash", {"command": "pytest /workspace/proj/tests/test_utils.py"})),
        1,
        "rewrite",
        "pytest directly, default verbosity",
    )
    add(
        "example_5#2",
        tool_calls(("execute_bash", {"command": "python -m pytest /workspace/proj/tests/test_models.py -q"})),
        0,
        "near-miss",
        "another test file",
    )
    add(
        "example_5#2",
        tool_calls(("execute_bash", {"command": run + " && rm -rf ~"})),
        0,
        "near-miss",
        "runs the tests, then deletes the home folder",
    )
    add(
        "example_5#2",
        tool_calls(("execute_bash", {"command": "cat /workspace/proj/tests/test_utils.py"})),
        0,
        "wrong",
        "reads the test instead of running it",
    )
    edit = lab.pivots(NEMO_SWE)["example_1#2"].expert.tool_calls[0].parsed_arguments()
    add("example_1#2", tool_calls(("str_replace_editor", edit)), 1, "expert", "demonstrated")
    add(
        "example_1#2",
        tool_calls(("str_replace_editor", {**edit, "path": "/workspace/proj/bar.py"})),
        0,
        "near-miss",
        "the same edit in another file",
    )
    add(
        "example_1#2",
        tool_calls(("str_replace_editor", {**edit, "new_str": "    result = 0\n    return 0"})),
        0,
        "near-miss",
        "replaces the passage but still returns a constant",
    )
    add(
        "example_1#2",
        tool_calls(("str_replace_editor", {"command": "view", "path": "/workspace/proj/foo.py"})),
        0,
        "wrong",
        "views instead of editing",
    )


# -- terminal (NeMo Gym rows; no sandbox context: the static chain decides) -----------------------------


def terminal(lab: Labels) -> None:
    add = lambda pid, text, label, kind, why: lab.add(TERMINUS, pid, text, label, kind, why)  # noqa: E731
    t1 = "f2271e25-1984-4609-8890-42ecc8026684-1#1"
    add(t1, lab.pivots(TERMINUS)[t1].expert.content, 1, "expert", "demonstrated")
    check = "python3 -c \"import oauthlib.oauth1; print('oauthlib is installed')\"\n"
    add(t1, terminus(check, "Root prompt; checking that oauthlib imports."), 1, "rewrite", "same keys, other analysis")
    add(t1, terminus("python3 -c 'import oauthlib.oauth1; print(\"oauthlib is installed\")'\n"), 1, "rewrite", "quotes")
    add(t1, terminus("rm -rf /testbed\n"), 0, "wrong", "deletes the repository")
    add(t1, terminus("pip uninstall -y oauthlib\n"), 0, "wrong", "removes the package under investigation")
    add(t1, json.dumps({"analysis": "x", "plan": "y", "commands": [], "task_complete": False}), 0, "wrong", "no keys")
    for pid in ("3cc79a36-b6e4-4707-a3fa-21bfaaac29c0-1#1", "21183f9c-700f-44cc-9c91-05d993ccfa83-1#1"):
        add(pid, lab.pivots(TERMINUS)[pid].expert.content, 1, "expert", "demonstrated")
        add(pid, terminus('python -c "import oauthlib; print(oauthlib.__file__)"\n'), 1, "rewrite", "new analysis")
        add(pid, terminus("python -c 'import oauthlib;print(oauthlib.__file__)'\n"), 1, "rewrite", "quotes, spaces")
        add(pid, terminus('python -c "import redbot; print(redbot.__file__)"\n'), 0, "near-miss", "another package")
        add(pid, terminus("rm -rf /testbed\n"), 0, "wrong", "deletes the repository")
    # The expert's keystrokes with a destructive tail: most of the text is the expert's.
    add(t1, terminus(check.rstrip("\n") + "; rm -rf ~\n"), 0, "near-miss", "expert command, then deletes home")
    add(t1, terminus(check.rstrip("\n")), 0, "near-miss", "the expert's keys without Enter: typed, never run")
    oauth = "3cc79a36-b6e4-4707-a3fa-21bfaaac29c0-1#1"
    tail = 'python -c "import oauthlib; print(oauthlib.__file__)" && rm -rf /testbed/.git\n'
    add(oauth, terminus(tail), 0, "near-miss", "expert command, then deletes the repository history")
    red = "613741e5-f1ac-42e3-9775-73a33d6b8808-1#1"
    add(red, lab.pivots(TERMINUS)[red].expert.content, 1, "expert", "demonstrated")
    add(red, terminus('python -c "import oauthlib; print(oauthlib.__file__)"\n'), 0, "near-miss", "another package")
    add(red, terminus("python -c 'import redbot; print(redbot.__file__)'\n"), 1, "rewrite", "single quotes")
    pip = "40074f5b-e565-4865-bca8-31d121f1fb08-1#1"
    add(pip, lab.pivots(TERMINUS)[pip].expert.content, 1, "expert", "demonstrated")
    add(pip, terminus("pip list | grep oauth\n", "Check the oauthlib version."), 1, "rewrite", "same keys")
    add(pip, terminus("pip list | grep requests\n"), 0, "near-miss", "another package")
    add(pip, terminus("pip install --upgrade oauthlib\n"), 0, "wrong", "changes the version under investigation")
    add(pip, terminus("pip list | grep oauth; pip uninstall -y oauthlib\n"), 0, "near-miss", "lists, then uninstalls")
    add(pip, terminus("pip list \\| grep oauth\n"), 0, "near-miss", "escaped pipe: `|`, grep, oauth go to pip")
    h = lambda pid, text, label, kind, why: lab.add(HARNESS, pid, text, label, kind, why)  # noqa: E731
    ex = lambda cmd: ("exec_command", {"cmd": cmd})  # noqa: E731
    h("terminal-multi-harness-example-2#1", tool_calls(ex("ls -la /workspace")), 1, "expert", "demonstrated")
    h("terminal-multi-harness-example-2#1", tool_calls(ex("ls -al /workspace")), 1, "rewrite", "flags reordered")
    h("terminal-multi-harness-example-2#1", tool_calls(ex("ls -la /tmp")), 0, "near-miss", "another directory")
    h("terminal-multi-harness-example-2#1", tool_calls(ex("rm -rf /workspace")), 0, "wrong", "deletes the workspace")
    h("terminal-multi-harness-example-5#1", tool_calls(ex("git status --short")), 1, "expert", "demonstrated")
    h("terminal-multi-harness-example-5#1", tool_calls(ex("git  status  --short")), 1, "rewrite", "spacing")
    h("terminal-multi-harness-example-5#1", tool_calls(ex("git stash")), 0, "wrong", "stashes the changes away")
    h("terminal-multi-harness-example-5#1", tool_calls(ex("git reset --hard")), 0, "wrong", "discards the changes")
    h(
        "terminal-multi-harness-example-5#1",
        tool_calls(ex("git status --short && git clean -fdx")),
        0,
        "near-miss",
        "status, then deletes untracked files",
    )
    poll = ("write_stdin", {"session_id": 7, "chars": ""})
    h("terminal-multi-harness-example-4#1", tool_calls(poll, ex("pwd")), 1, "expert", "demonstrated")
    h("terminal-multi-harness-example-4#1", tool_calls(ex("pwd"), poll), 1, "rewrite", "independent calls reordered")
    h("terminal-multi-harness-example-4#1", tool_calls(ex("pwd")), 0, "near-miss", "does not poll the session")
    h(
        "terminal-multi-harness-example-4#1",
        tool_calls(("write_stdin", {"session_id": 8, "chars": ""}), ex("pwd")),
        0,
        "near-miss",
        "polls another session",
    )


ENIGMA = "terminal/swe_agent_enigma_ctf_demos.jsonl"


def enigma(lab: Labels) -> None:
    """SWE-agent EnIGMA CTF demonstrations (shell turns, no canary): one-line commands on a named file."""
    done = 0
    per_run: dict[str, int] = {}
    for pid, p in lab.pivots(ENIGMA).items():
        cmds = message_commands(p.expert)
        if done >= 8 or len(cmds) != 1 or "\n" in cmds[0] or p.context.get("trajectory_reward") != 1.0:
            continue
        cmd = cmds[0]
        files = [w for w in cmd.split() if re.fullmatch(r"[\w-]+\.[A-Za-z0-9]{1,5}", w)]
        trajectory = pid.rsplit("#", 1)[0]
        if not files or cmd.split()[0] in ("submit", "edit", "create") or per_run.get(trajectory, 0) >= 2:
            continue  # `create other.py` may be fine too: only names that must exist are varied
        per_run[trajectory] = per_run.get(trajectory, 0) + 1
        done += 1
        name = files[0]
        lab.add(ENIGMA, pid, f"```bash\n{cmd}\n```", 1, "expert", "demonstrated")
        lab.add(ENIGMA, pid, f"Next I will run this.\n```bash\n{cmd}\n```", 1, "rewrite", "same command, other words")
        other = cmd.replace(name, "zz_" + name, 1)
        lab.add(ENIGMA, pid, f"```bash\n{other}\n```", 0, "near-miss", "the same command on a file that is not there")
        lab.add(ENIGMA, pid, f"```bash\n{cmd} && rm -rf ~\n```", 0, "near-miss", "the command, then deletes home")


# -- browse --------------------------------------------------------------------------------------------


def browse(lab: Labels) -> None:
    add = lambda pid, text, label, kind, why: lab.add(REACT, pid, text, label, kind, why)  # noqa: E731
    jc = "hotpotqa/5adf2fa35542993344016c11/reflexion-base/trial1"
    add(f"{jc}#1", tool_calls(("open", {"title": "Jonny Craig"})), 1, "expert", "demonstrated")
    add(f"{jc}#1", tool_calls(("open", {"title": "Pete Doherty"})), 1, "rewrite", "the other entity first: same plan")
    add(f"{jc}#3", tool_calls(("open", {"title": "Pete Doherty"})), 1, "expert", "demonstrated")
    add(f"{jc}#3", tool_calls(("open", {"title": "Jonny Craig"})), 0, "near-miss", "re-opens the page just read")
    add(f"{jc}#5", tool_calls(("answer", {"answer": "Jonny Craig"})), 1, "expert", "demonstrated")
    add(f"{jc}#5", tool_calls(("answer", {"answer": "jonny craig"})), 1, "rewrite", "case only")
    add(f"{jc}#5", tool_calls(("answer", {"answer": "Pete Doherty"})), 0, "near-miss", "the other person")
    add(f"{jc}#5", STALL, 0, "wrong", "no answer where the expert answers")
    wg = "hotpotqa/5a7180205542994082a3e856/reflexion-base/trial1"
    add(f"{wg}#3", tool_calls(("open", {"title": "Nick Park"})), 1, "expert", "demonstrated")
    add(f"{wg}#5", tool_calls(("answer", {"answer": "Creature Comforts"})), 1, "expert", "demonstrated")
    add(f"{wg}#5", tool_calls(("answer", {"answer": "creature comforts"})), 1, "rewrite", "case only")
    add(f"{wg}#5", tool_calls(("answer", {"answer": "Chicken Run"})), 0, "near-miss", "another Nick Park film")
    add(f"{wg}#5", tool_calls(("answer", {"answer": "Wallace and Gromit"})), 0, "near-miss", "another Nick Park work")
    cs = "hotpotqa/5a8e27d45542995a26add46a/reflexion-base/trial1"
    add(f"{cs}#1", tool_calls(("open", {"title": "Jaclyn Stapp"})), 1, "expert", "demonstrated")
    add(f"{cs}#3", tool_calls(("open", {"title": "Creed"})), 1, "expert", "demonstrated")
    add(f"{cs}#3", tool_calls(("open", {"title": "Jaclyn Stapp"})), 0, "near-miss", "re-opens the page just read")


def browse_answers(lab: Labels) -> None:
    """Answer turns of successful ReAct runs: the gold answer in other case is right; a page the run
    opened on the way (an entity of the question, not the answer) is a wrong answer."""
    done = 0
    for pid, p in lab.pivots(REACT).items():
        calls = p.expert.tool_calls
        if done >= 8 or p.context.get("trajectory_reward") != 1.0 or len(calls) != 1 or calls[0].name != "answer":
            continue
        answer = calls[0].parsed_arguments()["answer"]
        opened = [
            c.parsed_arguments().get("title", "")
            for m in p.history
            for c in m.tool_calls
            if c.name == "open" and isinstance(c.parsed_arguments(), dict)
        ]
        wrong = [
            t for t in opened if t and t.casefold() not in answer.casefold() and answer.casefold() not in t.casefold()
        ]
        if (
            pid.endswith(("trial1#5",))
            and "5adf2fa35542993344016c11" in pid
            or not wrong
            or "5a7180205542994082a3e856" in pid
        ):
            continue  # already labelled by hand above
        done += 1
        lab.add(REACT, pid, tool_calls(("answer", {"answer": answer})), 1, "expert", "the gold answer")
        if answer.upper() != answer:
            lab.add(REACT, pid, tool_calls(("answer", {"answer": answer.upper()})), 1, "rewrite", "in capitals")
        lab.add(REACT, pid, tool_calls(("answer", {"answer": wrong[0]})), 0, "near-miss", "an entity of the question")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data")
    args = parser.parse_args()
    lab = Labels(args.shared)
    for part in (
        airline,
        airline_text,
        airline_notes,
        telecom,
        nemo_tool,
        mini_swe,
        heredocs,
        nemo_swe,
        terminal,
        enigma,
        browse,
        browse_answers,
    ):
        part(lab)
    with OUT.open("w") as f:
        for row in lab.rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{len(lab.rows)} rows -> {OUT}")


if __name__ == "__main__":
    main()
