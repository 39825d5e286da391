"""Two runs' verdicts on the same candidates, compared: did a change of code move any reward?

    python bench/sandbox.py --backends docker,namespace --json --verdicts before.jsonl   # on the old tree
    python bench/sandbox.py --backends docker,namespace --json --verdicts after.jsonl    # on the new one
    python bench/verdicts_diff.py before.jsonl after.jsonl [--json]

Rows are matched by (backend, pivot, candidate index, candidate text); prints how many were
compared, how many rewards differ (with examples) and the rows only one run has.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def load(path: Path) -> dict[tuple[str, str, int, str], float]:
    rows = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        try:
            row = json.loads(line)
            rows[row["backend"], row["pivot"], int(row["i"]), row["candidate"]] = float(row["reward"])
        except (ValueError, KeyError, TypeError) as e:
            raise SystemExit(f"{path}:{n}: not a verdict row: {e}") from e
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    before, after = load(args.before), load(args.after)
    shared = sorted(before.keys() & after.keys())
    differ = [k for k in shared if before[k] != after[k]]
    report = {
        "compared": len(shared),
        "differ": len(differ),
        "only_before": len(before.keys() - after.keys()),
        "only_after": len(after.keys() - before.keys()),
        "by_backend": {b: sum(1 for k in shared if k[0] == b) for b in sorted({k[0] for k in shared})},
        "examples": [
            {"backend": k[0], "pivot": k[1], "candidate": k[3][:120], "before": before[k], "after": after[k]}
            for k in differ[:10]
        ],
    }
    if args.json:
        print(json.dumps(report, indent=1))
        return
    print(
        f"compared {report['compared']} verdicts {report['by_backend']}: {report['differ']} rewards differ; "
        f"only before {report['only_before']}, only after {report['only_after']}"
    )
    for e in report["examples"]:
        print(f"  {e['backend']} {e['pivot']}: {e['before']} -> {e['after']}  {e['candidate']!r}")


if __name__ == "__main__":
    main()
