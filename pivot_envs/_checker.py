"""`check_pivot_env`: Gymnasium's `check_env` plus the pivot-specific contract, as small named checks."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from gymnasium.utils.env_checker import check_env

from pivot_core import Pivot, render_completion

RESET_INFO_KEYS = frozenset({"pivot_id", "domain", "index", "num_pivots"})
STEP_INFO_KEYS = frozenset({"pivot_id", "accepted", "decided_by", "error", "verdicts", "action"})


def check_reset_pivot_determinism(env: gym.Env, seed: int = 123) -> None:
    """The same seed draws the same pivot sequence."""
    first = [env.reset(seed=seed)[1]["pivot_id"]] + [env.reset()[1]["pivot_id"] for _ in range(4)]
    second = [env.reset(seed=seed)[1]["pivot_id"]] + [env.reset()[1]["pivot_id"] for _ in range(4)]
    assert first == second, (
        f"reset(seed={seed}) drew {first} then {second}: the env most likely draws pivots from a random "
        "source other than self.np_random, or forgot to call super().reset(seed=seed)"
    )


def check_info_keys(env: gym.Env) -> None:
    """`info` carries the documented keys after reset and after step, and no timings."""
    _, info = env.reset(seed=0)
    missing = RESET_INFO_KEYS - set(info)
    assert not missing, f"reset info lacks {sorted(missing)}; expected at least {sorted(RESET_INFO_KEYS)}"
    _, _, terminated, truncated, info = env.step("")
    missing = STEP_INFO_KEYS - set(info)
    assert not missing, f"step info lacks {sorted(missing)}; expected at least {sorted(STEP_INFO_KEYS)}"
    assert terminated and not truncated, "a pivot is a one-step problem: expected terminated=True, truncated=False"
    timing = [k for k in info if "time" in k.lower() or "latency" in k.lower()]
    assert not timing, f"timings {timing} in info break seeded comparisons; log them as metrics instead"


def check_pivot_round_trip(env: gym.Env) -> None:
    """Every pivot survives `to_json`/`from_json` unchanged."""
    for pivot in env.unwrapped.pivots:
        again = Pivot.from_json(pivot.to_json())
        assert again == pivot, f"pivot {pivot.id} changed in a JSON round trip: check the converter's fields"


def check_random_actions_score_zero(env: gym.Env, n: int = 20) -> None:
    """Random completions from the action space score 0 and never raise."""
    env.reset(seed=0)
    env.action_space.seed(0)
    for _ in range(n):
        action = env.action_space.sample()
        _, reward, *_ = env.step(action)
        assert reward == 0.0, f"random completion {action!r} scored {reward}: a verifier accepts noise"


def check_expert_scores_one(env: gym.Env, limit: int | None = None) -> dict[str, Any]:
    """The expert action itself, rendered as a completion, scores 1 at every pivot."""
    failures: dict[str, Any] = {}
    for pivot in env.unwrapped.pivots[:limit]:
        env.reset(options={"pivot_id": pivot.id})
        _, reward, _, _, info = env.step(render_completion(pivot.expert, pivot.domain))
        if reward != 1.0:
            failures[pivot.id] = {
                "decided_by": info["decided_by"],
                "error": info["error"],
                "reason": info["verdicts"].get(info["decided_by"], {}).get("reason"),
            }
    assert not failures, f"expert actions that do not score 1: {failures}"
    return failures


def check_pivot_env(env: gym.Env, *, expert: bool = True) -> None:
    """Run Gymnasium's `check_env` and every pivot-specific check on `env`.

    Args:
        env: a pivot env (wrapped or not).
        expert: also check that each pivot's expert action scores 1 (needs every verifier's
            backend, e.g. the Docker engine for sandbox pivots).
    """
    check_env(env.unwrapped, skip_render_check=True)
    check_reset_pivot_determinism(env)
    check_info_keys(env)
    check_pivot_round_trip(env)
    check_random_actions_score_zero(env)
    if expert:
        check_expert_scores_one(env)
