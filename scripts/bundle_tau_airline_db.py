"""Build the airline world's bundled sample: a few full trajectories and the database records they need.

    python scripts/bundle_tau_airline_db.py [--shared ../shared/data]

Writes `pivot_core/data/tool_use_tau_airline_exec.jsonl` (EXEC_SAMPLE: successful trajectories,
unchanged, that together call every kind of database tool) and
`pivot_core/data/tau_airline_db_subset.json` (the records that file and the env's bundled
`tool_use_tau_airline.jsonl` need), and the `tau-airline-demo` world's slice
`pivot_core/data/tau_airline_db_demo.json.gz` (`demo_slice`).

Kept: every user and reservation a call or a task's gold action names (the episode env's outcome
replays the gold actions on the initial database), the users' other reservations and the owners of
named reservations, every flight a call or a kept reservation names, and every flight of a
searched route, direct or as a leg of a one-stop connection (so each recorded search returns
exactly what it returned on the full database). Then the bundled trajectories are replayed on
the subset and the script fails unless every recorded output is reproduced.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

from pivot_core._formats import FORMATS
from pivot_tool_worlds import AIRPORTS, recorded_calls, replay_trajectories, tau_airline
from pivot_tool_worlds._tau_airline import DEMO_FILE, SUBSET_FILE, TABLES, load_tables

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "pivot_core" / "data"
EXEC_FILE = "tool_use_tau_airline_exec.jsonl"
# Successful GPT-4o trajectories that together call all 14 tools but list_all_airports.
EXEC_SAMPLE = (
    "tau_bench/airline/gpt-4o/task5/trial1",  # baggage, flight and passenger updates
    "tau_bench/airline/gpt-4o/task11/trial0",  # booking, calculate, think
    "tau_bench/airline/gpt-4o/task27/trial1",  # direct search, cancellation
    "tau_bench/airline/gpt-4o/task46/trial2",  # certificate
    "tau_bench/airline/gpt-4o/task13/trial1",  # one-stop search, flight change
    "tau_bench/airline/gpt-4o/task20/trial2",  # hand-off to a human agent
)


def needed_keys(tables: dict, trajectories: list) -> dict[str, set[str]]:
    keep: dict[str, set[str]] = {t: set() for t in TABLES}
    routes: set[tuple[str, str]] = set()
    for traj in trajectories:
        # the recorded calls, and the task's gold actions (the episode env's outcome replays them)
        actions = (traj.context.get("task") or {}).get("actions") or ()
        gold = ((a.get("name", ""), a.get("kwargs") or {}) for a in actions)
        recorded = ((rc.call.name, rc.call.parsed_arguments() or {}) for rc in recorded_calls(traj.messages))
        for name, args in (*recorded, *gold):
            keep["users"].add(args.get("user_id", ""))
            keep["reservations"].add(args.get("reservation_id", ""))
            keep["flights"].update(f.get("flight_number", "") for f in args.get("flights", []) or [])
            if name.startswith("search_"):
                routes.add((args.get("origin", ""), args.get("destination", "")))
    keep["reservations"] |= {
        r for u in keep["users"] if u in tables["users"] for r in tables["users"][u]["reservations"]
    }
    keep["users"] |= {tables["reservations"][r]["user_id"] for r in keep["reservations"] if r in tables["reservations"]}
    keep["flights"] |= {
        f["flight_number"]
        for r in keep["reservations"]
        if r in tables["reservations"]
        for f in tables["reservations"][r]["flights"]
    }
    flights = tables["flights"].values()
    for origin, destination in routes:  # direct flights and both legs of every connection
        keep["flights"] |= {
            f["flight_number"] for f in flights if (f["origin"], f["destination"]) == (origin, destination)
        }
        keep["flights"] |= {
            leg["flight_number"]
            for first in flights
            if first["origin"] == origin
            for second in flights
            if second["origin"] == first["destination"] and second["destination"] == destination
            for leg in (first, second)
        }
    return keep


DEMO_USERS = 100
DEMO_FLIGHTS = 45


def demo_slice(tables: dict) -> dict[str, dict]:
    """The demo world's records: 100 users, all their reservations, the flights of the busiest routes.

    Every 5th user in id order (100 of 500), every reservation they hold, and every flight of the
    busiest routes between airports `AIRPORTS` names, route by route until there are 45 or more.

    The synthetic conversations (`pivot_demo.synthetic`) draw users with reservations and
    available flight days from whatever database they are given; this fixes that database, so the
    bundled reference's training data is the same on every install. Busy routes: a search there
    returns several flights, so the conversation goes on to the `calculate` turns whose expert form
    is one of several (the in-domain case where the functional reward matters).
    """
    users = sorted(tables["users"])
    users = users[:: len(users) // DEMO_USERS][:DEMO_USERS]
    reservations = sorted({r for u in users for r in tables["users"][u]["reservations"] if r in tables["reservations"]})
    routes: dict[tuple[str, str], list[str]] = {}
    for number, f in sorted(tables["flights"].items()):
        if f["origin"] in AIRPORTS and f["destination"] in AIRPORTS:
            routes.setdefault((f["origin"], f["destination"]), []).append(number)
    flights: list[str] = []
    for _, numbers in sorted(routes.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        if len(flights) >= DEMO_FLIGHTS:
            break
        flights += numbers
    return {
        "flights": {k: tables["flights"][k] for k in flights},
        "reservations": {r: tables["reservations"][r] for r in reservations},
        "users": {u: tables["users"][u] for u in users},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shared", default=str(ROOT.parent / "shared" / "data"))
    args = parser.parse_args()
    source = Path(args.shared) / "tool_use"
    tables = load_tables(str(source / "tau_bench_airline_db"))
    lines = [
        line
        for line in (source / "tau_bench_airline_gpt4o.jsonl").read_text(encoding="utf-8").splitlines()
        if json.loads(line)["id"] in EXEC_SAMPLE
    ]
    (DATA / EXEC_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")
    trajectories = [
        t
        for name in ("tool_use_tau_airline.jsonl", EXEC_FILE)
        for t in FORMATS["tau-bench"].read_trajectories(DATA / name, {})
    ]
    keep = needed_keys(tables, trajectories)
    subset = {t: {k: v for k, v in tables[t].items() if k in keep[t]} for t in TABLES}
    out = DATA / SUBSET_FILE
    out.write_text(json.dumps(subset, separators=(",", ":")) + "\n", encoding="utf-8")
    report = replay_trajectories(tau_airline(out), trajectories)
    sizes = {t: len(v) for t, v in subset.items()}
    print(f"wrote {out} ({out.stat().st_size} bytes, {sizes}); replay {report.matched}/{report.calls}")
    if report.matched != report.calls:
        raise SystemExit(f"the subset does not reproduce the bundled trajectories: {report.to_json()}")
    demo = json.dumps(demo_slice(tables), separators=(",", ":"), sort_keys=True).encode("utf-8")
    out = DATA / DEMO_FILE
    out.write_bytes(gzip.compress(demo, compresslevel=9, mtime=0))  # mtime 0: the same bytes every run
    print(f"wrote {out} ({out.stat().st_size} bytes gzipped, {len(demo)} raw)")


if __name__ == "__main__":
    main()
