"""`pivot envs` and `pivot verify`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from pivot_cli._common import (
    JSON_OPTION,
    console,
    emit_json,
    env_kwargs,
    err_console,
    fail,
    print_table,
    user_errors,
)


def register(app: typer.Typer) -> None:
    """Add the commands of this module."""
    app.command("envs")(envs)
    app.command("verify")(verify)


def envs(as_json: bool = JSON_OPTION) -> None:
    """List the registered pivot env ids, their bundled pivot counts and default chains."""
    import gymnasium as gym

    import pivot_envs
    from pivot_sandbox import SandboxContext

    rows: list[dict[str, Any]] = []
    with user_errors():
        for env_id in pivot_envs.ENV_IDS:
            env = gym.make(env_id)
            u = env.unwrapped
            rows.append(
                {
                    "id": env_id,
                    "pivots": len(u.pivots),
                    # pivots a container decides (`docker_shell`): the rest are scored by the static chain
                    "sandboxed": sum(SandboxContext.from_context(p.context) is not None for p in u.pivots),
                    "chain": u.chain.names,
                    "parser": u.parser_name,
                    "deterministic": u.chain.deterministic,
                }
            )
            env.close()
    if as_json:
        emit_json({"envs": rows})
        return
    print_table(
        "pivot envs",
        ["id", "pivots", "sandboxed", "default chain", "parser"],
        [(r["id"], r["pivots"], r["sandboxed"], " -> ".join(r["chain"]), r["parser"]) for r in rows],
    )


def verify(
    env: str = typer.Option(..., "--env", help="Env id, e.g. pivot/terminal-v0."),
    pivot: str = typer.Option(..., "--pivot", help="Pivot id within the env's dataset."),
    completion: str = typer.Option(..., "--completion", help="File with the completion text, or '-' for stdin."),
    dataset: Path | None = typer.Option(None, "--dataset", help="Pivot or trajectory file (default: bundled)."),
    verifiers: str | None = typer.Option(None, "--verifiers", help="Comma-separated verifier names."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Score one completion at one pivot and print the verdicts."""
    import gymnasium as gym

    import pivot_envs  # noqa: F401  (registers the ids)

    text = _read(completion)
    kwargs = env_kwargs(dataset, verifiers)
    with user_errors():
        e = gym.make(env, **kwargs)
        e.reset(options={"pivot_id": pivot})
        _, reward, _, _, info = e.step(text)
    payload = {
        "pivot_id": pivot,
        "reward": reward,
        "accepted": info["accepted"],
        "decided_by": info["decided_by"],
        "error": info["error"],
        "verdicts": info["verdicts"],
    }
    if as_json:
        emit_json(payload)
        return
    console.print(f"reward [bold]{reward}[/] (decided by {info['decided_by'] or '-'})")
    print_table(
        "verdicts",
        ["verifier", "accepted", "reward", "reason", "error"],
        [(n, v["accepted"], v["reward"], v["reason"], v["error"] or "") for n, v in info["verdicts"].items()],
    )


def _read(path: str) -> str:
    """The completion file (or stdin for "-") as text; bytes that are not UTF-8 become U+FFFD, with a warning."""
    try:
        raw = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as e:
        fail(f"{path}: cannot read completion: {e.strerror or e}")
        raise  # unreachable: fail() exits
    text = raw.decode("utf-8", errors="replace")
    replaced = text.count("\ufffd") - raw.count("\ufffd".encode())
    if replaced:
        err_console.print(
            f"warning: {path} is not UTF-8 text: {replaced} undecodable byte sequence(s) read as U+FFFD",
            markup=False,
            highlight=False,
        )
    return text
