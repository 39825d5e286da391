"""OpenEnv: every pivot env served through openenv-core's own server, for OpenEnv clients.

OpenEnv clients (openenv-core's `EnvClient`/`GenericEnvClient`, and the trainers built on them:
TRL's OpenEnv examples, SkyRL, Unsloth, ART, Oumi) talk to an `Environment` served by
`openenv.core.env_server.create_fastapi_app`: `reset(seed, episode_id, **kwargs)` and
`step(action)` over a WebSocket session (one env instance per session) or plain HTTP.

`PivotEnvironment` wraps one pivot env: `reset(pivot_id=ID)` (or a seed) picks the pivot and
returns its history and tools; `step({"completion": TEXT})` scores the completion through the
env's own `step` (its one scoring path) and ends the episode. An episode env
(`pivot/tool-use-episode-v0`, `pivot/terminal-episode-v0`) plays a whole episode in one session
instead: each `step` is one turn, its observation carries what the env answered (`verdict["new_messages"]`),
and `done` and the outcome reward come at the episode's end (an undecidable outcome: reward None
and `verdict["outcome"]["error"]`). `openenv_app(ENV_ID)` is the app; `pivot serve --protocol
openenv` runs it with uvicorn.

```python
from openenv.core import GenericEnvClient

with GenericEnvClient(base_url="http://127.0.0.1:8000").sync() as client:
    first = client.reset(pivot_id="tau_bench/airline/gpt-4o/task12/trial3#2")
    result = client.step({"completion": "<tool_call>...</tool_call>"})
    result.reward, result.observation["verdict"]["accepted"]
```
"""

from __future__ import annotations

import uuid
from typing import Any

import gymnasium as gym

import pivot_envs  # noqa: F401  (registers the pivot/* ids with gymnasium)
from trainers.adapters._common import is_episode_env, outcome_reward

try:
    from openenv.core.env_server import Action, Environment, Observation, State, create_fastapi_app
    from pydantic import Field
except ImportError as e:  # no stand-in: the point is openenv-core's own server and protocol
    raise ImportError(f"trainers.adapters.openenv needs openenv-core: pip install openenv-core ({e})") from e


class PivotAction(Action):
    """One assistant completion at the current pivot."""

    completion: str = Field(description="the completion text, as the env's parser reads it")


class PivotObservation(Observation):
    """The pivot's history and tools; after `step`, `reward`, `done` and the chain's `verdict`."""

    pivot_id: str = Field(default="", description="the pivot of this episode")
    messages: list[dict[str, Any]] = Field(default_factory=list, description="history, OpenAI chat messages")
    tools: list[dict[str, Any]] = Field(default_factory=list, description="tool schemas at the pivot")
    # Not `metadata`: openenv-core's serializer leaves that out of what the client receives.
    verdict: dict[str, Any] | None = Field(default=None, description="after step: accepted, decided_by, error, ...")


class PivotState(State):
    """Which pivot the session is at."""

    pivot_id: str | None = Field(default=None, description="the current pivot, None before reset")


class PivotEnvironment(Environment[PivotAction, PivotObservation, PivotState]):
    """An OpenEnv `Environment` over one pivot env (one per session).

    Args:
        env: the pivot env (unwrapped or not); each OpenEnv session gets its own.
    """

    # Each session builds its own pivot env (see `openenv_app`): no state is shared between them.
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, env: gym.Env) -> None:
        super().__init__()
        self.env: Any = env.unwrapped
        self.episodic = is_episode_env(env.spec.id if env.spec else None)
        self._state = PivotState()

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, pivot_id: str | None = None, **kwargs: Any
    ) -> PivotObservation:
        """Pick the pivot (`pivot_id`, else drawn with `seed`) and observe its history and tools."""
        obs, _ = self.env.reset(seed=seed, options={"pivot_id": pivot_id} if pivot_id is not None else None)
        self._state = PivotState(episode_id=episode_id or str(uuid.uuid4()), step_count=0, pivot_id=obs["pivot_id"])
        return PivotObservation(**obs)

    def step(self, action: PivotAction, timeout_s: float | None = None, **kwargs: Any) -> PivotObservation:
        """Score the completion at the current pivot (the env's `step`); the episode ends (an episode env: one turn)."""
        obs, reward, terminated, truncated, info = self.env.step(action.completion)
        self._state.step_count += 1
        if self.episodic:
            done = bool(terminated or truncated)
            turn = {"turn": info["turn"], "new_messages": info["new_messages"], "outcome": info.get("outcome")}
            return PivotObservation(**obs, reward=outcome_reward(info) if done else 0.0, done=done, verdict=turn)
        verdict = {k: info[k] for k in ("accepted", "decided_by", "error", "verdicts")}
        return PivotObservation(**obs, reward=reward, done=terminated, verdict=verdict)

    def close(self) -> None:
        """Release what the session's env holds (an episode's container)."""
        self.env.close()

    @property
    def state(self) -> PivotState:
        """The session's episode id, step count and pivot."""
        return self._state


def openenv_app(env_id: str = "pivot/tool-use-v0", max_concurrent_envs: int = 8, **env_kwargs: Any) -> Any:
    """A FastAPI app serving `env_id` with openenv-core's server (`/ws`, `/reset`, `/step`, `/schema`, ...).

    Args:
        env_id: the pivot env to serve.
        max_concurrent_envs: WebSocket sessions at once (each has its own env).
        env_kwargs: keyword arguments for `gym.make` (dataset, verifiers, ...).

    Raises:
        ValueError: `verifiers` given for an episode env (its reward is the task's outcome).
    """
    gym.spec(env_id)  # an unknown id fails here, not in the first session
    if is_episode_env(env_id) and env_kwargs.get("verifiers"):
        raise ValueError(
            f"{env_id} is an episode env: it ends with the task's own outcome, so --verifiers does not apply "
            "(it picks the chain of single-step ids such as pivot/tool-use-v0)"
        )

    def factory() -> PivotEnvironment:
        return PivotEnvironment(gym.make(env_id, **env_kwargs))

    return create_fastapi_app(factory, PivotAction, PivotObservation, max_concurrent_envs=max_concurrent_envs)


def serve_openenv(
    env_id: str, host: str = "127.0.0.1", port: int = 8000, max_sessions: int = 8, **env_kwargs: Any
) -> None:
    """Run `openenv_app(env_id)` with uvicorn (what `pivot serve --protocol openenv` does).

    `max_sessions` WebSocket sessions run at once, each with its own env (`--max-sessions`);
    openenv-core refuses another with CAPACITY_REACHED.

    openenv-core's server has no authentication, and a pivot server runs model-written commands,
    so it binds loopback only; serve other hosts with the project's own protocol and a token.

    Raises:
        ServeRefused: `host` is not a loopback address.
    """
    import uvicorn

    from pivot_core import ServeRefused, is_loopback

    if not is_loopback(host):
        raise ServeRefused(
            f"--protocol openenv serves loopback only (openenv-core's server has no auth), got --host {host}; "
            "bind 127.0.0.1, or use the default protocol with --token"
        )
    # No forwarding header is believed (uvicorn believes loopback's by default): a client is its peer address.
    uvicorn.run(
        openenv_app(env_id, max_concurrent_envs=max_sessions, **env_kwargs),
        host=host,
        port=port,
        log_level="info",
        proxy_headers=False,
        forwarded_allow_ips=[],
    )
