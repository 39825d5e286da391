"""`pivot serve --protocol nemo-gym`: a NeMo Gym resources server (`POST /verify`, `POST /seed_session`).

NeMo Gym's agent server POSTs a rollout to its resources server's `/verify`: the dataset row
(`responses_create_params`, `expected_action`, ... as `trainers.adapters.nemo_rl.write_nemo_gym_rows`
writes them) plus `response` (an OpenAI Responses object); the answer is the request plus `reward`
(NeMo Gym's `BaseVerifyRequest` / `BaseVerifyResponse`). `/seed_session` is called before a rollout
so stateful servers can set up; pivot verification is stateless, so it answers `{}` and holds
nothing. The reward is `nemo_rl.verify_payload`: the served env's verifier chain for rows of its
domain, each other domain's default env for the rest (the pivot travels in the row).

The guard is the pivot server's: the token off loopback (`TokenAuth`), the body cap, the request
timeout and connection cap (`uvicorn_config`), at most `concurrency` verifications at once with
`max_queue` waiting and 503 + Retry-After beyond, strict JSON decoding, and completions over the
env's `max_completion_chars` scored 0 with that reason (never echoed as an error page).
"""

from __future__ import annotations

import inspect
from typing import Any

from fastapi import FastAPI, Request
from pydantic import BaseModel, ConfigDict

from pivot_cli._server import Admission, FastJSON, ServerConfig, _add_error_handlers
from pivot_cli._server_guard import TokenAuth
from pivot_cli._server_requests import read_body


class VerifyRequest(BaseModel):
    """NeMo Gym's verify request: a row's fields (kept as sent) plus the policy's `response`."""

    model_config = ConfigDict(extra="allow")

    responses_create_params: dict[str, Any]
    response: dict[str, Any]


class SeedSessionRequest(BaseModel):
    """NeMo Gym's seed-session request (its fields are the row's; nothing here needs them)."""

    model_config = ConfigDict(extra="allow")


def create_nemo_gym_app(
    env: Any, env_id: str, config: ServerConfig | None = None, tokens: tuple[str, ...] = ()
) -> FastAPI:
    """The FastAPI app answering NeMo Gym's resources-server endpoints with `env`'s verifiers.

    Args:
        env: the served env (unwrapped); rows of its domain are scored by its chain.
        env_id: its id (rows of other domains go to `pivot/<domain>-v0`).
        config: the server's caps and quotas.
        tokens: bearer tokens, one of which every request must carry (none: loopback only).
    """
    from trainers.adapters.nemo_rl import verify_payload, verify_scorer

    config = config or ServerConfig()
    if "max_body_size" not in inspect.signature(FastAPI).parameters:
        raise RuntimeError("pivot serve needs FastAPI's max_body_size (fastapi>=0.165): pip install -U fastapi")
    admission = Admission(config)
    scorer = verify_scorer(env)
    max_chars = env.action_space.max_length
    app = FastAPI(
        title=f"pivot-gym {env_id} (NeMo Gym)", default_response_class=FastJSON, max_body_size=config.max_body_bytes
    )
    app.state.admission = admission
    if tokens:
        app.add_middleware(TokenAuth, tokens=tokens)
    _add_error_handlers(app)

    @app.get("/health")
    async def health() -> FastJSON:
        return FastJSON({"status": "ok", "env_id": env_id, "domain": env.domain, **admission.stats()})

    @app.post("/seed_session")
    async def seed_session(request: Request) -> FastJSON:
        await read_body(request, SeedSessionRequest)
        return FastJSON({})

    @app.post("/verify")
    async def verify(request: Request) -> FastJSON:
        body = (await read_body(request, VerifyRequest)).model_dump()
        return FastJSON(await admission.run(verify_payload, body, scorer, max_chars))

    return app


def serve_nemo_gym(
    env_id: str, host: str, port: int, config: ServerConfig, token: str | None = None, **env_kwargs: Any
) -> None:
    """Load `env_id` and serve it as a NeMo Gym resources server until interrupted.

    Raises:
        ServeRefused: a non-loopback `host` without a token, or a token that is too short.
        ValueError: `env_id` is an episode env (NeMo Gym's verify scores one response at a pivot).
    """
    import gymnasium as gym
    import uvicorn

    import pivot_envs  # noqa: F401  (registers the ids)
    from pivot_cli._server import uvicorn_config
    from pivot_cli._server_guard import resolve_tokens
    from pivot_envs import PivotEnv

    tokens = resolve_tokens(host, token)  # before loading anything: refuse fast
    env = gym.make(env_id, **env_kwargs).unwrapped
    if not isinstance(env, PivotEnv):
        raise ValueError(f"--protocol nemo-gym: expected a pivot env id (pivot/<domain>-v0), got {env_id!r}")
    uvicorn.Server(uvicorn_config(create_nemo_gym_app(env, env_id, config, tokens), host, port, config)).run()
