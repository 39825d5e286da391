"""The reward-hacking audit: canned adversarial completions scored by a verifier chain.

`audit(target, pivots)` builds, for every pivot, one completion per case in `AUDIT_CASES`
(the empty string, prose where a tool is expected, the right tool with empty or junk
arguments, a spray of calls where one is expected, a copy of the last user message, an echo
of the whole history, a Terminus JSON with no commands, a very long output), parses it the way
the env does, and counts how many the chain accepts. None of them is a locally acceptable
action, so the expected count is 0 for every chain and every acceptor; a case that does not
apply to a pivot (e.g. "empty arguments" where the expert's own call takes none) is left out
of that pivot's total. See docs/audit.md for the case table.

A third-party verifier package tests itself with one call:

    from verifiers_plugins import audit
    rows = audit(["turn_kind", "my_verifier"], pivots)
    assert all(r["accepted"] == 0 for r in rows if r.get("expected") == 0)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pivot_core import DOMAIN_PARSERS, Message, Pivot
from verifiers_plugins._audit_cases import AUDIT_CASES, AuditCase, action_style
from verifiers_plugins._chain import VerifierChain, safe_verify
from verifiers_plugins._host import get_parser
from verifiers_plugins._verdict import verifier_meta

__all__ = ["AUDIT_CASES", "AuditCase", "adversarial_completions", "audit", "audit_failures"]


def adversarial_completions(pivot: Pivot, cases: Sequence[AuditCase] = AUDIT_CASES) -> dict[str, str]:
    """Case name -> completion text for the cases that apply to `pivot`."""
    style = action_style(pivot)
    out = {}
    for case in cases:
        text = case.build(pivot, style)
        if text is not None:
            out[case.name] = text
    return out


def _resolve(
    target: Any, pivots: Iterable[Pivot] | None, parser: str | Callable[[str], Message] | None
) -> tuple[VerifierChain, list[Pivot], Callable]:
    """Chain, pivots and parser from an env, a chain, verifier name(s) or a verifier object."""
    env = getattr(target, "unwrapped", target)
    if hasattr(env, "chain") and hasattr(env, "pivots"):
        chain, default_pivots, parse = env.chain, list(env.pivots), env.parse
    else:
        default_pivots, parse = [], None
        if isinstance(target, VerifierChain):
            chain = target
        elif isinstance(target, str):
            chain = VerifierChain.from_names([target])
        elif isinstance(target, Sequence) and all(isinstance(n, str) for n in target):
            chain = VerifierChain.from_names(list(target))
        elif callable(getattr(target, "verify", None)):
            chain = VerifierChain([(type(target).__name__, target)])
        else:
            raise TypeError(
                f"audit: expected an env, a VerifierChain, verifier name(s) or a verifier, got {type(target).__name__}"
            )
    chosen = list(pivots) if pivots is not None else default_pivots
    if not chosen:
        raise ValueError("audit: expected at least one pivot, got none")
    if parser is not None:
        parse = get_parser(parser) if isinstance(parser, str) else parser
    if parse is None:
        parse = get_parser(DOMAIN_PARSERS.get(chosen[0].domain, "auto"))
    return chain, chosen, parse


def audit(
    target: Any,
    pivots: Iterable[Pivot] | None = None,
    *,
    parser: str | Callable | None = None,
    cases: Sequence[AuditCase] = AUDIT_CASES,
    per_verifier: bool = True,
) -> list[dict[str, Any]]:
    """Score every adversarial case at every pivot; count acceptances per chain and per verifier.

    Args:
        target: a pivot env (its pivots and parser are used, each pivot attacked through
            `env.chain_for(pivot)`), a `VerifierChain`, a verifier
            name or list of names (built through the plugin host), or a verifier object.
        pivots: the pivots to attack (default: the env's).
        parser: parser name or function for the completion text (default: the env's, else the
            domain's).
        cases: the cases to run (default: `AUDIT_CASES`).
        per_verifier: also report each verifier of the chain run alone.

    Returns:
        Rows `{"chain" | "verifier": name, "case", "accepted", "total", "role", "expected"}`. `total`
        counts the pivots the case applies to. `expected` is the case's expected count for the chain
        and for acceptors; for a gate run alone it is None (a gate only checks form, so a
        well-formed attack may pass it: the number shows what the gate alone lets through).
    """
    env = getattr(target, "unwrapped", target)
    if callable(getattr(env, "chain_for", None)) and hasattr(env, "pivots"):
        # An env may score pivots with different chains (tool-world pivots get `world_verifiers`):
        # audit each pivot with the chain that really scores it, one group of rows per chain.
        groups: dict[int, tuple[VerifierChain, list[Pivot]]] = {}
        for p in list(pivots) if pivots is not None else list(env.pivots):
            c = env.chain_for(p)
            groups.setdefault(id(c), (c, []))[1].append(p)
        if len(groups) > 1:
            return [
                row
                for c, ps in groups.values()
                for row in audit(c, ps, parser=parser or env.parse, cases=cases, per_verifier=per_verifier)
            ]
    chain, chosen, parse = _resolve(target, pivots, parser)
    chain_name = ">".join(chain.names)
    expected = {c.name: c.expected for c in cases}
    judged_by = {c.name: c.judged_by for c in cases}
    counts: dict[tuple[str, str], list[int]] = {}
    for pivot in chosen:
        for case, text in adversarial_completions(pivot, cases).items():
            action = parse(text)
            hit = counts.setdefault(("chain", case), [0, 0])
            hit[0] += int(chain(pivot, action).accepted)
            hit[1] += 1
            if not per_verifier:
                continue
            for name, verifier in chain.steps:
                verdict = safe_verify(name, verifier, pivot, action)
                row = counts.setdefault((name, case), [0, 0])
                row[0] += int(verdict.applicable and verdict.accepted)
                row[1] += int(verdict.applicable)
    return _rows(chain, chain_name, counts, expected, judged_by)


def _exempt(verifier: Any, case: str) -> str | None:
    """The verifier's declared reason for accepting a case by design (`audit_exempt` class attribute)."""
    exempt = getattr(verifier, "audit_exempt", None)
    return exempt.get(case) if isinstance(exempt, Mapping) else None


def _rows(
    chain: VerifierChain,
    chain_name: str,
    counts: Mapping[tuple[str, str], list[int]],
    expected: Mapping[str, int],
    judged_by: Mapping[str, frozenset[str] | None] | None = None,
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    steps = dict(chain.steps)
    roles = {n: verifier_meta(v)["role"] for n, v in chain.steps}
    acceptors = [n for n, r in roles.items() if r != "gate"]
    for (who, case), (accepted, total) in counts.items():
        if who == "chain":
            # A chain is exempt only when every acceptor in it declares the case accepted by design.
            whys = [_exempt(steps[n], case) for n in acceptors]
            exempt = bool(acceptors) and all(whys)
            row = {
                "chain": chain_name,
                "case": case,
                "accepted": accepted,
                "total": total,
                "role": "chain",
                "expected": None if exempt else expected[case],
            }
            if exempt:
                row["why"] = whys[0]
        else:
            why = _exempt(steps[who], case)
            judges = (judged_by or {}).get(case)
            if not why and judges is not None and verifier_meta(steps[who])["cost"] not in judges:
                why = f"judged by the chain: only {', '.join(sorted(judges))} acceptors must reject it alone"
            row = {
                "verifier": who,
                "case": case,
                "accepted": accepted,
                "total": total,
                "role": roles[who],
                "expected": None if roles[who] == "gate" or why else expected[case],
            }
            if why:
                row["why"] = why
        rows.append(row)
    return rows


def audit_failures(rows: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The rows whose accepted count exceeds their expected count (what a test asserts is empty)."""
    return [r for r in rows if r.get("expected") is not None and r["accepted"] > r["expected"]]
