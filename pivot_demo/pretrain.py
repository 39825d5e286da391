"""`pivot model pretrain --world tau-airline-demo`: a small reference policy that can copy from its context.

A model SFT'd only on a few hundred real pivots memorises the ids of its training conversations
and writes them into held-out ones (the right tool, the wrong reservation). Here it first learns,
on synthetic conversations generated from the tool world itself, that ids and values come from
the conversation: random users, reservations and flight requests are drawn from the database,
the agent's calls copy their arguments from what the user said or from earlier tool outputs,
and every tool output is what the world returns for that call. Each assistant turn becomes one
training pivot (history cut exactly as at sampling time), so pretraining is `train_sft` on
synthetic pivots; `pivot sft` on the real training pivots follows.

Nothing here reads held-out data: the tokenizer corpus is the synthetic pivots plus whatever
pivots the caller passes (the training split).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pivot_core import Pivot
from pivot_demo.synthetic import copy_drills, last_turns, synthetic_pivots, world_words
from pivot_demo.tiny_model import TinyModelConfig
from pivot_tool_worlds import DEMO_WORLD_NAME
from trainers.settings import StageSettings

# About 0.9M parameters. The issue asked for 5-10M; measured here, a 6M model's step (batch 16,
# ~400 tokens) took 21.6 s on the loaded 2-core machine (two threads, oversubscribed), so its pretraining would
# outlast the whole demo's budget; this shape's step is about 5x cheaper (see docs/results/training.md).
PRETRAIN_MODEL = TinyModelConfig(
    vocab_size=1024,
    hidden_size=128,
    num_layers=4,
    num_heads=4,
    num_kv_heads=2,
    intermediate_size=384,
    max_positions=1024,
    split_spaces=True,
)
# The CI shape: the same stages, a model that trains in a minute.
QUICK_MODEL = TinyModelConfig(
    vocab_size=1024,
    hidden_size=64,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    intermediate_size=192,
    max_positions=512,
    split_spaces=True,
)


@dataclass(frozen=True)
class PretrainConfig:
    """Synthetic conversations, model shape and the pretraining loop.

    Attributes:
        world: the tool world conversations are generated from.
        conversations: synthetic conversations (each gives several pivots).
        drill_steps: optimizer steps on copy drills (`copy_drills`, fresh data each step) before
            the conversations: the copy skill first, then the conversations that use it.
        drill_cycles: runs the drill steps are split into, each with its own warm-up and cosine
            decay (the learning rate restarts at its peak).
        drill_batch_size: drills per step.
        drill_prompt_tokens: prompt tokens a drill keeps (short: the id is near, steps are cheap).
        drill_bar: the copy skill the drills must reach (greedy acceptance on unseen drills,
            `copy_skill`); after the `drill_cycles` runs, one more run of `drill_steps / drill_cycles`
            steps follows while the skill is below it; 0: no check, the fixed schedule alone.
        max_drill_cycles: the most drill runs in all, whatever the skill (the bar's stopping rule);
            the `drill_cycles` runs always run.
        steps: optimizer steps on the synthetic conversations.
        batch_size: pivots per step.
        lr: peak learning rate.
        model: the model's shape.
        settings: prompt cuts and completion budget (saved with the model; SFT should reuse them).
        seed: seeds the conversations, the initialisation and the batch order.
        handoffs: the conversations include hand-offs (`synthetic_pivots`); they feed the tokenizer.
    """

    world: str = DEMO_WORLD_NAME
    conversations: int = 600
    # measured on PRETRAIN_MODEL (docs/results/training.md): greedy copy accuracy on unseen calls 0/40
    # after 400 conversation steps; 6/40 after 600 drill steps, 33/40 after 1,200 (the phase change)
    drill_steps: int = 1200
    # measured (docs/results/training.md): 1,200 drill steps in one run ended at loss 0.16 per token and its SFT
    # policy at 0.027 held out; two runs of 600 (the second restarting the learning rate) reached 0.04
    # and an SFT policy at 0.254, and 0.035 again from this seed; one other tokenizer stalled at 0.26
    drill_cycles: int = 2
    drill_batch_size: int = 32
    drill_prompt_tokens: int = 64
    # the phase change came at one seed and tokenizer and not at another (docs/results/training.md):
    # drilling until the skill shows, rather than for a fixed count, keeps the reference from
    # depending on one lucky schedule
    drill_bar: float = 0.5
    max_drill_cycles: int = 4
    steps: int = 200
    batch_size: int = 16
    lr: float = 3e-3
    model: TinyModelConfig = PRETRAIN_MODEL
    # T=0.7: a partially trained small policy is right greedily on some pivots but almost never in
    # 4 samples at T=1 (its distribution is flat); 0.7 gives the mixed groups profiling needs, and
    # GRPO's log-probs are taken at the same temperature
    settings: StageSettings = field(default_factory=lambda: StageSettings(4, 256, 96, 0.7))
    seed: int = 0
    handoffs: bool = False

    def __post_init__(self) -> None:
        if self.conversations < 1 or self.steps < 0 or self.drill_steps < 0 or self.drill_cycles < 1:
            raise ValueError(
                f"PretrainConfig: expected conversations, drill_cycles >= 1 and steps, drill_steps >= 0, got {self}"
            )
        if not 0.0 <= self.drill_bar <= 1.0 or self.max_drill_cycles < 1:
            raise ValueError(
                "PretrainConfig: expected 0 <= drill_bar <= 1 and max_drill_cycles >= 1, "
                f"got {self.drill_bar} and {self.max_drill_cycles}"
            )

    def quick(self) -> PretrainConfig:
        """The CI shape: fewer conversations and steps, the small model, shorter prompts."""
        return replace(
            self,
            conversations=150,
            drill_steps=60,
            drill_cycles=1,
            drill_bar=0.0,  # CI checks the stages, not the skill (the bundled reference has it)
            max_drill_cycles=1,
            steps=100,
            batch_size=8,
            model=QUICK_MODEL,
            settings=StageSettings(2, 160, 64, 0.7),
        )

    @property
    def total_steps(self) -> int:
        """Drill and conversation steps together (the stage's progress)."""
        return self.drill_steps + self.steps


# -- the stage ---------------------------------------------------------------------------------


def pretrain(
    out: str | Path,
    config: PretrainConfig | None = None,
    corpus: Sequence[Pivot] = (),
    log: Callable[[int, dict[str, float]], None] | None = None,
    world: Any = None,
) -> dict[str, Any]:
    """Build a tokenizer and a random-init model, then train it on copy drills and synthetic conversations.

    Args:
        out: the model folder written (weights, tokenizer, stage settings).
        config: what to generate and how long to train.
        corpus: extra pivots for the tokenizer only (the real training split; never held-out ones).
        log: `log(step, metrics)` after every step.
        world: the `ToolWorld` to use; built from the registered factory for `config.world` when None.

    Returns:
        A summary: parameters, synthetic pivots, losses, seconds, output path.
    """
    from pivot_demo.tiny_model import build_tiny_model
    from trainers.sft import train_sft

    config = config or PretrainConfig()
    if world is None:
        from verifiers_plugins import get_host

        world = get_host().get("tool_worlds", config.world)()
    pivots = synthetic_pivots(world, config.conversations, config.seed, handoffs=config.handoffs)
    sft = _stage(config, config.steps, config.batch_size, config.settings)
    with tempfile.TemporaryDirectory(prefix="pivot-pretrain-") as work:
        init = Path(work) / "init"
        built = build_tiny_model(
            init,
            pivots=[*last_turns(pivots), *last_turns(corpus)],
            config=replace(config.model, seed=config.seed),
            words=world_words(world),
        )
        drills = _drill(config, world, init, Path(work), log)
        shifted = None if log is None else (lambda step, m: log(drills.steps + step, m))
        summary = train_sft(drills.model, pivots, out, sft, log=shifted)
        summary["copy_skill"] = copy_skill(out, world, drill_prompt_tokens=config.drill_prompt_tokens)
    if drills.losses:
        summary["drill_last_loss"] = drills.losses[-1]
        summary["drill_cycle_losses"] = drills.losses
        summary["drill_steps_run"] = drills.steps
    if drills.skills:  # greedy copy on unseen drills after each checked run: the bar's record
        summary["drill_cycle_skills"] = drills.skills
    info = {**summary, "parameters": built["parameters"], "synthetic_pivots": len(pivots), "world": world.name}
    (Path(out) / "pivot_pretrain.json").write_text(json.dumps(info, indent=2, default=str))
    return info


def _stage(config: PretrainConfig, steps: int, batch_size: int, settings: StageSettings) -> Any:
    """The `SFTConfig` of one pretraining run: the config's peak rate and seed, a warm-up of a tenth (1 to 30 steps)."""
    from trainers.sft import SFTConfig

    warmup = min(30, max(1, steps // 10))
    return SFTConfig.from_settings(
        settings,
        steps=steps,
        batch_size=batch_size,
        lr=config.lr,
        warmup_steps=warmup,
        seed=config.seed,
        log_every=1,
    )


@dataclass(frozen=True)
class _DrillRuns:
    """What the drill runs left: the last model folder, the steps run, each run's last loss, each checked skill."""

    model: Path
    steps: int
    losses: list[float]
    skills: list[float]


def _drill(
    config: PretrainConfig, world: Any, init: Path, work: Path, log: Callable[[int, dict[str, float]], None] | None
) -> _DrillRuns:
    """The drill runs from the model at `init`: `drill_cycles` runs, then more while the skill is below the bar."""
    from trainers.sft import train_sft

    drill_settings = replace(config.settings, max_prompt_tokens=config.drill_prompt_tokens)
    drill_losses, drill_skills = [], []
    done, schedule = 0, cycle_steps(config.drill_steps, config.drill_cycles)
    cycle = 0
    while cycle < len(schedule):
        steps = schedule[cycle]
        # every drill is seen once: copying is the only rule that fits fresh data
        drilled = copy_drills(world, steps * config.drill_batch_size, config.seed + 1000 * cycle)
        run = replace(_stage(config, steps, config.drill_batch_size, drill_settings), seed=config.seed + cycle)
        at = done
        shifted = None if log is None else (lambda step, m, at=at: log(at + step, m))
        drill_losses.append(train_sft(init, drilled, work / f"drilled{cycle}", run, log=shifted)["last_loss"])
        init, done = work / f"drilled{cycle}", done + steps
        cycle += 1
        if config.drill_bar > 0 and cycle == len(schedule):
            # the bar: one more run while the skill is below it, up to max_drill_cycles runs in all
            skill = copy_skill(init, world, drill_prompt_tokens=config.drill_prompt_tokens, kinds=("drills",))
            drill_skills.append(skill["drills"])
            if skill["drills"] < config.drill_bar and cycle < config.max_drill_cycles:
                schedule.append(max(1, config.drill_steps // config.drill_cycles))
    return _DrillRuns(init, done, drill_losses, drill_skills)


def cycle_steps(steps: int, cycles: int) -> list[int]:
    """`steps` split into `cycles` runs as even as can be (no empty run)."""
    base, extra = divmod(steps, cycles)
    return [base + (i < extra) for i in range(cycles) if base + (i < extra)]


# Seeds of the check's drills and conversations: apart from the pretraining's (`PretrainConfig.seed`
# + 1000 x cycle) and the synthetic data's (4242), so the check reads calls the model never trained on.
COPY_CHECK_SEED = 999


def copy_skill(
    model: str | Path,
    world: Any,
    n: int = 40,
    drill_prompt_tokens: int | None = None,
    kinds: Sequence[str] = ("drills", "conversations"),
) -> dict[str, float]:
    """Greedy acceptance of `model` on `n` unseen copy drills and `n` unseen synthetic tool calls.

    Scored through the tool-use env's one scoring path (the call must have the expert's effect in
    the world), so it says whether pretraining gave the policy the copy skill before SFT relies on it.
    Drills are prompted with the cut they were trained at (`drill_prompt_tokens`; the model's saved
    cut when None): a longer cut shows the drill-only model tool schemas it never saw, and it then
    copied nothing (0 of 40 at 256 tokens, measured). `kinds` picks which of the two are scored.
    """
    import gymnasium as gym

    import pivot_envs  # noqa: F401  (registers the pivot/* env ids)
    from trainers.backends import SamplingParams
    from trainers.eval import local_backend, score_samples
    from trainers.settings import settings_of

    calls = [p for p in synthetic_pivots(world, 4 * n, COPY_CHECK_SEED) if p.expert.tool_calls][:n]
    saved = settings_of(model)
    drill_cut = replace(saved, max_prompt_tokens=drill_prompt_tokens or saved.max_prompt_tokens)
    params = SamplingParams(max_new_tokens=saved.max_new_tokens, temperature=0.0)
    out = {}
    for name, pivots, cut in (
        ("drills", copy_drills(world, n, COPY_CHECK_SEED), drill_cut),
        ("conversations", calls, saved),
    ):
        if name not in kinds:
            continue
        backend, _ = local_backend(model, settings=cut)
        env = gym.make("pivot/tool-use-v0", pivots=pivots).unwrapped
        records = score_samples(backend, env, pivots, 1, params)
        out[name] = sum(r.accepted for r in records) / len(records)
    return out
