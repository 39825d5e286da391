"""What `pivot demo pivotrl` runs: its arms, its data, and `DemoConfig` (the full run, `quick()`, `on_synthetic()`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from pivot_core import Pivot, shared_data_file, write_pivots
from trainers.demo.pretrain import PretrainConfig
from trainers.settings import StageSettings

ENV_ID = "pivot/tool-use-v0"
STRICT_VERIFIERS = ("exact_match",)
TRAIN_SETS = {"sft": "D_adv", "pivotrl": "D_adv", "strict": "D_adv", "no_filter": "D_cand", "e2e": "episodes"}
ARMS = tuple(TRAIN_SETS)  # every arm and what it trains on, in table order
PROFILE_TURNS = ("all", "tool_calls")  # which training turns D_cand is drawn from
BUNDLED_DATA = "tool_use_tau_airline_exec.jsonl"
FULL_DATA = Path("tool_use") / "tau_bench_airline_gpt4o.jsonl"


SYNTHETIC = "synthetic"
# The synthetic data's conversations are drawn with their own seed, apart from the pretraining's
# (`PretrainConfig.seed` and the drills'), so no held-out conversation is a pretraining one.
SYNTHETIC_DATA_SEED = 4242


def synthetic_data(conversations: int, out: Path) -> Path:
    """Write `conversations` synthetic airline conversations' pivots to `out` (the `"synthetic"` data).

    The airline world writes them (`synthetic_pivots`: users, reservations and requests drawn from its
    database, every tool output the world's own), so the reference policy can be partially competent
    on them at this scale; on the real tau-bench turns, the cut prompt holds the values of only 40 %
    of the held-out calls (`bench/copy_ceiling.py`). They have no recorded user or outcome: no e2e arm.
    """
    from trainers.demo.synthetic import synthetic_pivots
    from verifiers_plugins import get_host

    world = get_host().get("tool_worlds", "tau-airline")()
    write_pivots(synthetic_pivots(world, conversations, seed=SYNTHETIC_DATA_SEED), out)
    return out


def demo_arms(data: str | None) -> tuple[str, ...]:
    """The arms a run has: every arm, less `e2e` on data without episodes (the synthetic conversations)."""
    return tuple(a for a in ARMS if not (a == "e2e" and data == SYNTHETIC))


def default_data() -> Path:
    """The full tau-bench airline file under `$PIVOT_SHARED_DATA` or `../shared/data`, else the bundled sample."""
    from importlib import resources

    return shared_data_file(FULL_DATA) or Path(str(resources.files("pivot_core") / "data" / BUNDLED_DATA))


def profile_pool(pivots: Sequence[Pivot], turns: str) -> list[Pivot]:
    """The training pivots that may be profiled: all of them, or the tool calls (`DemoConfig.profile_turns`)."""
    if turns not in PROFILE_TURNS:
        raise ValueError(f"profile_turns: expected one of {PROFILE_TURNS}, got {turns!r}")
    return list(pivots) if turns == "all" else [p for p in pivots if p.expert.tool_calls]


@dataclass(frozen=True)
class DemoConfig:
    """The demo's knobs (defaults: the full run; `quick()` is the CI configuration)."""

    out: str = "runs/pivotrl-demo"
    """Working folder: models, pivot files, runs, plots, results.json."""
    data: str | None = None
    """Airline pivots (any format load_pivots reads); `default_data()` when None; `"synthetic"`:
    conversations generated from the airline world (`synthetic_data`), held out by conversation."""
    synthetic_conversations: int = 600
    """Conversations of the `"synthetic"` data (about 5.5 pivots each)."""
    heldout: float = 0.2
    """Share of tasks held out."""
    split_seed: int = 0
    """Seeds which tasks are held out."""
    max_train_pivots: int | None = 64
    """Training pivots profiled (D_cand), drawn evenly over the training split; None: all."""
    profile_turns: str = "all"
    """Turns of the training split profiled: `"all"`, or `"tool_calls"`: every arm then trains on tool
    calls alone, and the held-out text turns (`max_heldout_text`) measure what training on one kind of
    turn does to the other (the paper's out-of-domain retention)."""
    max_heldout_pivots: int | None = 24
    """Held-out tool-call pivots evaluated, drawn evenly; None: all."""
    max_heldout_text: int | None = 0
    """Held-out text turns evaluated as well (a second measure: the chain judges them by similarity to
    the expert's text, so a paraphrase can pass), drawn evenly; 0: none, None: all."""
    pretrain: PretrainConfig = field(default_factory=PretrainConfig)
    """Synthetic pretraining (model shape, steps, stage settings)."""
    sft_steps: int = 200
    """SFT steps on the real training pivots (batch 16)."""
    sft_lr: float = 3e-3
    """SFT learning rate."""
    k: int = 8
    """Samples per pivot when profiling."""
    lam: float = 0.9
    """D_adv keeps pivots with reward variance > 0 and mean < lam."""
    steps: int = 5
    """Updates per arm (GRPO steps; the sft arm takes as many steps on as many samples)."""
    pivots_per_step: int = 4
    """P per step."""
    group_size: int = 8
    """G per pivot (the sft arm's batch is P x G expert turns)."""
    learning_rate: float = 3e-4
    """GRPO learning rate (the sft arm uses `sft_arm_lr`)."""
    sft_arm_lr: float = 3e-4
    """Learning rate of the continued-SFT arm."""
    beta: float = 0.02
    """KL weight."""
    seeds: tuple[int, ...] = (0, 1, 2)
    """One run per arm and seed."""
    eval_k: int = 4
    """Samples per held-out pivot per arm and seed."""
    e2e_max_turns: int = 3
    """Agent turns per end-to-end episode (the e2e arm)."""
    e2e_max_observation_tokens: int = 96
    """Tokens kept of each observation in an episode (prompt + turns must fit the model's positions)."""
    threads: int | None = None
    """Torch threads; `cpu_threads()` (1 on a busy machine, else every core) when None."""

    def __post_init__(self) -> None:
        profile_pool((), self.profile_turns)  # the one check of the value, at construction rather than mid-run

    def quick(self) -> DemoConfig:
        """The CI configuration: the bundled sample, a small model, short stages; every stage kept."""
        from importlib import resources

        return replace(
            self,
            data=str(resources.files("pivot_core") / "data" / BUNDLED_DATA),
            heldout=0.34,
            max_train_pivots=24,
            max_heldout_pivots=8,
            max_heldout_text=8,
            pretrain=self.pretrain.quick(),
            sft_steps=150,
            sft_lr=4e-3,
            k=4,
            steps=4,
            pivots_per_step=4,
            group_size=4,
            learning_rate=1e-3,
            sft_arm_lr=1e-3,
            seeds=(0, 1),
            eval_k=2,
            e2e_max_turns=2,
            e2e_max_observation_tokens=64,
        )

    def on_synthetic(self) -> DemoConfig:
        """The run on `"synthetic"` data, with the arms' settings measured on it.

        Pretraining stops after the copy drills, in two runs of 600 steps (`drill_cycles`): the sft
        stage trains on the same kind of conversations, and a conversation stage at the pretraining's
        3e-3 eroded the copy skill (13 to 8 of 40). SFT runs at 1e-3. D_cand is 640 tool-call pivots
        of the training split (`profile_turns`), and each arm takes 100 updates at 1e-4 (at 1e-3 GRPO
        collapsed in 2 steps). Held-out: 64 tool calls, the kind every arm trains on, and 96 text
        turns, the kind none does. On these tool calls the verifier accepts one completion, so a GRPO
        step is a reweighted SFT step (`bench/grpo_vs_sft_gradient.py`) and the arms are not expected
        to separate there; on the text turns, what each update does to a kind it never trains on
        separates them (docs/training.md).
        """
        return replace(
            self,
            data=SYNTHETIC,
            pretrain=replace(self.pretrain, steps=0),
            sft_steps=300,
            sft_lr=1e-3,
            max_train_pivots=640,
            profile_turns="tool_calls",
            max_heldout_pivots=64,
            max_heldout_text=96,
            steps=100,
            learning_rate=1e-4,
            sft_arm_lr=1e-4,
        )

    @property
    def settings(self) -> StageSettings:
        """Prompt cuts and completion budget of every stage (the pretraining's)."""
        return self.pretrain.settings


# -- progress --------------------------------------------------------------------------------------
