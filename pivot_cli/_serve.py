"""`pivot serve`: a pivot env over HTTP."""

from __future__ import annotations

from pathlib import Path

import typer

from pivot_cli._common import JSON_OPTION, emit_json, env_kwargs, err_console, user_errors

# A pivot-protocol session is a pivot id and a seed; an openenv session holds a live env (an
# episode's world or container), so far fewer are allowed unless asked for.
PIVOT_SESSIONS = 4096
OPENENV_SESSIONS = 8


def register(app: typer.Typer) -> None:
    """Add the commands of this module."""
    app.command("serve")(serve)


def serve(
    env: str = typer.Option(..., "--env", help="Env id, e.g. pivot/terminal-v0."),
    port: int = typer.Option(8000, "--port", help="TCP port."),
    host: str = typer.Option(
        "127.0.0.1", "--host", help="Interface to bind; any but loopback needs --token (or $PIVOT_SERVE_TOKEN)."
    ),
    token: str | None = typer.Option(
        None,
        "--token",
        help="Bearer token clients must send (default $PIVOT_SERVE_TOKEN; commas: one per client). "
        "Required off loopback.",
        show_default=False,
    ),
    dataset: Path | None = typer.Option(None, "--dataset", help="Pivot or trajectory file (default: bundled)."),
    verifiers: str | None = typer.Option(None, "--verifiers", help="Comma-separated verifier names."),
    concurrency: int = typer.Option(8, "--concurrency", help="Requests verified at once (worker threads)."),
    max_queue: int = typer.Option(256, "--max-queue", help="Requests allowed to wait; more get 503 + Retry-After."),
    max_sessions: int | None = typer.Option(
        None,
        "--max-sessions",
        help="Live reset/step sessions held in all (default 4096; openenv: 8, each session holds an env).",
        show_default=False,
    ),
    max_sessions_per_client: int = typer.Option(
        1024, "--max-sessions-per-client", help="Live sessions one client (token, else address) may hold."
    ),
    session_ttl: float = typer.Option(3600.0, "--session-ttl", help="Idle seconds after which a session expires."),
    max_body_bytes: int = typer.Option(1024 * 1024, "--max-body-bytes", help="Largest request body; more gets 413."),
    request_timeout: float = typer.Option(
        30.0, "--request-timeout", help="Seconds a client has to send a whole request (slow clients are cut off)."
    ),
    max_connections: int = typer.Option(1024, "--max-connections", help="Open connections; more get 503."),
    forwarded_allow_ips: str = typer.Option(
        "",
        "--forwarded-allow-ips",
        help="Comma-separated proxy addresses whose X-Forwarded-For is believed (default: none, loopback "
        "included; a client's address decides its quota and sessions).",
    ),
    executor: str = typer.Option(
        "in-process",
        "--executor",
        help="Where verify-batch runs: in-process, or ray (workers routed by sandbox state).",
    ),
    protocol: str = typer.Option(
        "pivot",
        "--protocol",
        help="pivot (this project's /v1 API), nemo-gym (a NeMo Gym resources server: POST /verify, "
        "/seed_session) or openenv (openenv-core's server and clients; loopback only).",
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Serve reset / step / verify-batch / health for one env (FastAPI + uvicorn).

    The server runs model-written commands: bind loopback (the default) or give it a token.
    """
    serve_env(
        env,
        protocol=protocol,
        host=host,
        port=port,
        token=token,
        dataset=dataset,
        verifiers=verifiers,
        executor=executor,
        as_json=as_json,
        concurrency=concurrency,
        max_queue=max_queue,
        max_sessions=max_sessions,
        max_sessions_per_client=max_sessions_per_client,
        session_ttl=session_ttl,
        max_body_bytes=max_body_bytes,
        request_timeout=request_timeout,
        max_connections=max_connections,
        forwarded_allow_ips=forwarded_allow_ips,
    )


def serve_env(
    env: str,
    *,
    protocol: str,
    host: str,
    port: int,
    token: str | None,
    dataset: Path | None,
    verifiers: str | None,
    executor: str,
    as_json: bool,
    concurrency: int,
    max_queue: int,
    max_sessions: int | None,
    max_sessions_per_client: int,
    session_ttl: float,
    max_body_bytes: int,
    request_timeout: float,
    max_connections: int,
    forwarded_allow_ips: str,
) -> None:
    """What `pivot serve` does with its options: serve env `env` over `protocol` until stopped."""
    from pivot_cli._server import ServerConfig
    from pivot_cli._server import serve as run_server
    from pivot_cli._server_guard import resolve_tokens

    kwargs = env_kwargs(dataset, verifiers)
    if protocol == "openenv":
        _serve_openenv(env, host, port, max_sessions, kwargs)
        return
    if protocol not in ("pivot", "nemo-gym"):
        raise typer.BadParameter(f"expected pivot, nemo-gym or openenv, got {protocol!r}", param_hint="--protocol")
    with user_errors():
        config = ServerConfig(
            concurrency=concurrency,
            max_queue=max_queue,
            max_sessions=PIVOT_SESSIONS if max_sessions is None else max_sessions,
            max_sessions_per_client=max_sessions_per_client,
            session_ttl_s=session_ttl,
            max_body_bytes=max_body_bytes,
            request_timeout_s=request_timeout,
            max_connections=max_connections,
            forwarded_allow_ips=tuple(ip for ip in (p.strip() for p in forwarded_allow_ips.split(",")) if ip),
        )
        auth = "token" if resolve_tokens(host, token) else "none (loopback only)"
        url = f"http://{host}:{port}" + ("/v1" if protocol == "pivot" else "")
        _announce(env, url, auth, concurrency, max_queue, executor, as_json)
        if protocol == "nemo-gym":
            from pivot_cli._server_nemo_gym import serve_nemo_gym

            serve_nemo_gym(env, host, port, config, token=token, **kwargs)
            return
        run_server(env, host=host, port=port, config=config, executor=executor, token=token, **kwargs)


def _serve_openenv(env: str, host: str, port: int, max_sessions: int | None, kwargs: dict) -> None:
    """`--protocol openenv`: openenv-core's server, each session holding a live env."""
    from trainers.adapters.openenv import serve_openenv

    with user_errors():  # uvicorn prints the address once it listens
        serve_openenv(
            env,
            host=host,
            port=port,
            max_sessions=OPENENV_SESSIONS if max_sessions is None else max_sessions,
            **kwargs,
        )


def _announce(env: str, url: str, auth: str, concurrency: int, max_queue: int, executor: str, as_json: bool) -> None:
    """Say where the server listens before it blocks: one JSON line a supervisor can parse, or one on stderr."""
    if as_json:
        emit_json(
            {
                "env": env,
                "url": url,
                "auth": auth,
                "concurrency": concurrency,
                "max_queue": max_queue,
                "executor": executor,
            }
        )
    else:
        err_console.print(f"serving {env} on {url} (auth {auth}, concurrency {concurrency}, queue {max_queue})")
