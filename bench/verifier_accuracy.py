"""Verifier accuracy on the hand-labelled candidates of `bench/data/verifier_labels.jsonl`.

    python bench/verifier_accuracy.py [--labels FILE] [--shared ../shared/data] [--json]

Each row names a pivot of ../shared/data (file + pivot id), a candidate completion, its label
(1 = locally acceptable) and a kind (expert / rewrite / near-miss / wrong). Every candidate is
scored three ways: by the env's default chain for that pivot (the world chain for pivots that carry
a tool world; terminal pivots without sandbox context get the static part of the terminal chain),
by each verifier of that chain alone, and by the strict `exact_match`. Printed per domain:
false-accept rate (accepted among label-0 rows) and false-reject rate (rejected among label-1
rows). A verifier that does not apply to a pivot (a `skip` verdict) counts as not accepting.
Gates (`turn_kind`, `json_schema`) only check form: their standalone false accepts are expected.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import gymnasium as gym  # noqa: E402

import pivot_envs  # noqa: E402, F401  (registers the env ids)
from pivot_envs import load_pivots  # noqa: E402
from verifiers_plugins import get_verifier, verifier_meta  # noqa: E402

LABELS = ROOT / "bench" / "data" / "verifier_labels.jsonl"
ENV_IDS = {
    "tool-use": "pivot/tool-use-v0",
    "swe": "pivot/swe-v0",
    "terminal": "pivot/terminal-v0",
    "browse": "pivot/browse-v0",
}
KINDS = ("expert", "rewrite", "near-miss", "wrong")
STRICT = "exact_match"


@dataclass(frozen=True)
class Row:
    """One labelled candidate."""

    domain: str
    file: str
    pivot_id: str
    completion: str
    label: int
    kind: str
    reason: str


def load_rows(path: Path) -> list[Row]:
    """The labelled rows; a malformed row is an error naming the file and line."""
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            row = Row(**{k: raw[k] for k in Row.__dataclass_fields__})
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}:{n}: expected a label row {list(Row.__dataclass_fields__)}, got {e}") from e
        if row.label not in (0, 1) or row.kind not in KINDS or row.domain not in ENV_IDS:
            raise ValueError(f"{path}:{n}: expected label 0/1, kind in {KINDS}, a known domain; got {raw}")
        rows.append(row)
    return rows


@dataclass
class Tally:
    """Accept counts of one scorer on one domain."""

    positives: int = 0
    negatives: int = 0
    false_accepts: int = 0
    false_rejects: int = 0

    def add(self, label: int, accepted: bool) -> None:
        """Count one scored row."""
        if label:
            self.positives += 1
            self.false_rejects += not accepted
        else:
            self.negatives += 1
            self.false_accepts += accepted

    def to_json(self) -> dict[str, Any]:
        """Counts and rates (None where there is nothing to divide by)."""
        return {
            "positives": self.positives,
            "negatives": self.negatives,
            "false_accepts": self.false_accepts,
            "false_rejects": self.false_rejects,
            "fa_rate": self.false_accepts / self.negatives if self.negatives else None,
            "fr_rate": self.false_rejects / self.positives if self.positives else None,
        }


def _chain_name(names: Iterable[str]) -> str:
    return ">".join(names)


def measure(rows: Sequence[Row], shared: Path) -> dict[str, Any]:
    """Score every row; returns `{"rows": [...], "tallies": {domain: {scorer: Tally json}}}`.

    Scorers are `chain:<names>` (the env's default chain for the pivot), `verifier:<name>` (each
    verifier of that chain alone) and `strict:exact_match`.
    """
    pivots: dict[str, dict] = {}
    envs: dict[str, Any] = {}
    alone: dict[str, Any] = {STRICT: get_verifier(STRICT)}
    tallies: dict[str, dict[str, Tally]] = defaultdict(lambda: defaultdict(Tally))
    scored = []
    groups: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for row in rows:
        groups[(row.file, row.pivot_id)].append(row)
    for (file, pivot_id), group in groups.items():
        if file not in pivots:
            pivots[file] = {p.id: p for p in load_pivots(shared / file)}
        pivot = pivots[file].get(pivot_id)
        if pivot is None:
            raise ValueError(f"{file}: no pivot {pivot_id!r} (the labels name a pivot the data does not hold)")
        domain = group[0].domain
        if domain not in envs:
            envs[domain] = gym.make(ENV_IDS[domain], pivots=[pivot]).unwrapped
        env = envs[domain]
        chain = env.chain_for(pivot)
        names = [name for name, _ in chain.steps]
        results = env.score(pivot, [r.completion for r in group])
        for row, result in zip(group, results, strict=True):
            message = env.parse(row.completion)
            # `default`: whichever default chain the env picks for the pivot (tool-use has two).
            verdicts = {"chain:default": bool(result.accepted), "chain:" + _chain_name(names): bool(result.accepted)}
            for name in [*names, STRICT]:
                if name not in alone:
                    alone[name] = get_verifier(name)
                verdict = alone[name].verify(pivot, message)
                key = ("strict:" if name == STRICT else "verifier:") + name
                verdicts[key] = bool(verdict.accepted and verdict.applicable and verdict.error is None)
            for key, accepted in verdicts.items():
                tallies[domain][key].add(row.label, accepted)
            scored.append(
                {
                    "domain": row.domain,
                    "file": row.file,
                    "pivot_id": row.pivot_id,
                    "kind": row.kind,
                    "label": row.label,
                    "chain_accepted": bool(result.accepted),
                    "decided_by": result.decided_by,
                    "chain_reason": _reason(result),
                    "reason": row.reason,
                }
            )
    roles = {name: verifier_meta(v).get("role", "") for name, v in alone.items()}
    return {
        "rows": scored,
        "roles": roles,
        "tallies": {d: {k: t.to_json() for k, t in sorted(ts.items())} for d, ts in sorted(tallies.items())},
    }


def _reason(result: Any) -> str:
    verdict = result.verdicts.get(result.decided_by) if result.decided_by else None
    return verdict.reason if verdict is not None else str(result.error or "")


def _pct(rate: float | None) -> str:
    return "-" if rate is None else f"{100 * rate:.0f} %"


def table(report: Mapping[str, Any]) -> str:
    """The markdown table: one line per domain and scorer."""
    lines = [
        "| domain | scorer | role | label 1 / label 0 | false accepts | false rejects |",
        "|---|---|---|---|---|---|",
    ]
    for domain, tallies in report["tallies"].items():
        for key, t in sorted(tallies.items(), key=lambda kv: (not kv[0].startswith("chain:"), kv[0])):
            kind, _, name = key.partition(":")
            role = "chain" if kind == "chain" else "strict" if kind == "strict" else report["roles"].get(name, "")
            lines.append(
                f"| {domain} | `{name}` | {role} | {t['positives']} / {t['negatives']} | "
                f"{t['false_accepts']} ({_pct(t['fa_rate'])}) | {t['false_rejects']} ({_pct(t['fr_rate'])}) |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", type=Path, default=LABELS)
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--errors", action="store_true", help="also list the rows each default chain gets wrong")
    args = parser.parse_args()
    report = measure(load_rows(args.labels), args.shared)
    if args.json:
        print(json.dumps(report["tallies"], indent=1))
        return
    print(table(report))
    if args.errors:
        for r in report["rows"]:
            if r["chain_accepted"] != bool(r["label"]):
                what = "FA" if r["chain_accepted"] else "FR"
                print(f"{what} {r['kind']:9} {r['pivot_id'][-60:]} | {r['reason']} | {r['chain_reason'][:120]}")


if __name__ == "__main__":
    main()
