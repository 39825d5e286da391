"""`pivot audit`: canned adversarial completions against every pivot of an env."""

from __future__ import annotations

from pathlib import Path

import typer

from pivot_cli._common import JSON_OPTION, console, emit_json, env_kwargs, print_table, user_errors


def register(app: typer.Typer) -> None:
    """Add the commands of this module."""
    app.command("audit")(audit)


def audit(
    env: str = typer.Option(..., "--env", help="Env id, e.g. pivot/swe-v0."),
    dataset: Path | None = typer.Option(None, "--dataset", help="Pivot or trajectory file (default: bundled)."),
    verifiers: str | None = typer.Option(None, "--verifiers", help="Comma-separated chain (default: the env's)."),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Audit only the first N pivots."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 when any case is accepted more than expected."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Count how many adversarial completions each chain and verifier accepts (expected: 0)."""
    import gymnasium as gym

    import pivot_envs  # noqa: F401  (registers the ids)
    from verifiers_plugins import audit as run_audit
    from verifiers_plugins import audit_failures

    kwargs = env_kwargs(dataset, verifiers)
    with user_errors():
        e = gym.make(env, **kwargs)
        pivots = e.unwrapped.pivots[:limit] if limit else None
        rows = run_audit(e, pivots)
    failures = audit_failures(rows)
    if as_json:
        emit_json({"env": env, "pivots": len(pivots or e.unwrapped.pivots), "cases": rows, "failures": len(failures)})
    else:
        print_table(
            f"audit of {env}",
            ["chain / verifier", "role", "case", "accepted", "total", "expected"],
            [
                (
                    r.get("chain") or r.get("verifier"),
                    r["role"],
                    r["case"],
                    r["accepted"],
                    r["total"],
                    "-" if r["expected"] is None else r["expected"],
                )
                for r in rows
            ],
        )
        console.print(f"{len(failures)} row(s) above their expected count")
    if strict and failures:
        raise typer.Exit(1)
