"""`pivot train --episodes`: episode GRPO (whole episodes from each start, outcome rewards)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from pivot_cli._common import emit_json, fail, print_table, user_errors

PIVOT_ENV_DEFAULT = "pivot/tool-use-v0"  # `pivot train`'s default env: with --episodes, its episode twin


def episode_config(base: dict[str, Any], overrides: Sequence[str]) -> Any:
    """An `EpisodeConfig` from keyword values plus `key=value` strings, each coerced to its field's type."""
    from pivot_cli._train import _coerce
    from trainers.episodes import EpisodeConfig

    types = {f.name: str(f.type) for f in fields(EpisodeConfig)}
    values = {k: v for k, v in base.items() if v is not None}
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or key not in types:
            raise ValueError(f"expected key=value with key in {sorted(types)}, got {item!r}")
        values[key] = _coerce(types[key], raw)
    return EpisodeConfig(**values)


def train_episodes(
    model: str, env: str, pivots: str | None, steps: int, out: str, overrides: Sequence[str], as_json: bool
) -> None:
    """Run episode GRPO and print (or emit) the last step's metrics.

    Args:
        model: the policy folder.
        env: the env id (`pivot train`'s default pivot env maps to `pivot/tool-use-episode-v0`).
        pivots: a pivot file whose pivots are the starts (D_adv); each trajectory's first pivot when None.
        steps: optimizer steps.
        out: output folder.
        overrides: `key=value` strings for any other `EpisodeConfig` field.
        as_json: emit JSON instead of a table.
    """
    from trainers.episodes import EpisodeTrainer

    with user_errors():
        base = {
            "model": model,
            "env_id": None if env == PIVOT_ENV_DEFAULT else env,
            "starts": pivots,
            "steps": steps,
            "output_dir": out,
        }
        cfg = episode_config(base, overrides)
        trainer = EpisodeTrainer(cfg)
        trainer.train()
        last = trainer.last
    if not all(v == v for v in last.values()):  # NaN never equals itself
        fail(f"training produced a non-finite metric: {last}")
    summary = {"output_dir": out, "steps": trainer.step_count, "metrics": last}
    if as_json:
        emit_json(summary)
    else:
        print_table("final metrics", ["metric", "value"], sorted(last.items()), fmt=lambda x: f"{x:.4f}")
