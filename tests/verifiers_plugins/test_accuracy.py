"""The labelled accuracy set (bench/data/verifier_labels.jsonl): no default chain accepts a label-0 row.

Terminal rows come from NeMo Gym pivots without sandbox context, so the terminal chain's static part
decides them and no container starts: the whole set scores in a few seconds.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "verifier_accuracy.py"


def _bench():
    spec = importlib.util.spec_from_file_location("verifier_accuracy", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench():
    return _bench()


@pytest.fixture(scope="module")
def rows(bench):
    return bench.load_rows(bench.LABELS)


@pytest.fixture(scope="module")
def report(bench, rows, shared_data):
    return bench.measure(rows, shared_data)


def test_the_set_covers_four_domains_with_rewrites_and_near_misses(rows):
    assert len(rows) >= 200
    by_domain = Counter(r.domain for r in rows)
    assert set(by_domain) == {"tool-use", "swe", "terminal", "browse"}
    for domain in by_domain:
        kinds = Counter(r.kind for r in rows if r.domain == domain)
        assert kinds["rewrite"] and kinds["near-miss"] and kinds["expert"], (domain, kinds)
    seen = {}
    for r in rows:
        key = (r.file, r.pivot_id, r.completion)
        assert seen.setdefault(key, r.label) == r.label, f"the same candidate labelled both ways: {key}"
        assert r.reason.strip() and "\n" not in r.reason


def test_no_default_chain_accepts_a_label_zero_row(report):
    for domain, tallies in report["tallies"].items():
        default = tallies["chain:default"]
        wrong = [
            (r["pivot_id"], r["reason"], r["chain_reason"])
            for r in report["rows"]
            if r["domain"] == domain and r["chain_accepted"] and not r["label"]
        ]
        assert default["false_accepts"] == 0, (domain, wrong)


def test_false_rejects_stay_within_a_fifth_per_domain(report):
    for domain, tallies in report["tallies"].items():
        assert tallies["chain:default"]["fr_rate"] <= 0.2, (domain, tallies["chain:default"])


def test_expert_rows_are_accepted_by_their_chain(report):
    missed = [
        (r["pivot_id"], r["chain_reason"]) for r in report["rows"] if r["kind"] == "expert" and not r["chain_accepted"]
    ]
    assert missed == []


def test_strict_matching_rejects_acceptable_rewrites(report):
    # The paper's point, measured here: exact matching misses acceptable actions the default chains accept.
    assert sum(t["strict:exact_match"]["false_rejects"] for t in report["tallies"].values()) > 0


def test_a_malformed_row_names_the_file_and_line(bench, tmp_path):
    path = tmp_path / "labels.jsonl"
    good = {
        "domain": "swe",
        "file": "f",
        "pivot_id": "p",
        "completion": "c",
        "label": 1,
        "kind": "expert",
        "reason": "r",
    }
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "label": 2}) + "\n")
    with pytest.raises(ValueError, match=r"labels\.jsonl:2"):
        bench.load_rows(path)
