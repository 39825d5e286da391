"""What `pivot demo pivotrl` runs: its arms, its data, and `DemoConfig` (the full run, `quick()`, `on_synthetic()`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from pivot_core import Pivot, shared_data_file, write_pivots
from pivot_demo.pretrain import PretrainConfig
from pivot_tool_worlds import DEMO_WORLD_NAME
from trainers.grpo_config import EpisodeConfig, GRPOConfig, ObjectiveConfig
from trainers.settings import StageSettings

ENV_ID = "pivot/tool-use-v0"
STRICT_VERIFIERS = ("exact_match",)
TRAIN_SETS = {"sft": "D_adv", "pivotrl": "D_adv", "strict": "D_adv", "no_filter": "D_cand", "e2e": "episodes"}
ARMS = tuple(TRAIN_SETS)  # every arm and what it trains on, in table order
PROFILE_TURNS = ("all", "tool_calls")  # which training turns D_cand is drawn from
BUNDLED_DATA = "tool_use_tau_airline_exec.jsonl"
FULL_DATA = Path("tool_use") / "tau_bench_airline_gpt4o.jsonl"


SYNTHETIC = "synthetic"
BUNDLED = "bundled"
"""`--data bundled`: the bundled real airline sample; `reference="bundled"`: the bundled reference policy."""
# The data the bundled reference was SFT'd on: the synthetic data's training split at these values
# (pivot_demo/reference/README.md). A run from it must split the same way, or its held-out
# conversations would be ones the reference trained on.
REFERENCE_DATA = {
    "data": SYNTHETIC,
    "synthetic_conversations": 600,
    "synthetic_handoffs": False,
    "heldout": 0.2,
    "split_seed": 0,
}
# The synthetic data's conversations are drawn with their own seed, apart from the pretraining's
# (`PretrainConfig.seed` and the drills'), so no held-out conversation is a pretraining one.
SYNTHETIC_DATA_SEED = 4242
# The world they are written in: the airline world on a bundled slice of its database, the same on
# every install (a fresh clone has only the bundled subset, ../shared the full database), so the
# reference's training split and every run's held-out split are the same conversations everywhere.
SYNTHETIC_WORLD = DEMO_WORLD_NAME
# The GRPO arms' settings (`DemoConfig.grpo`). Each arm fills in its own policy, pivots, output folder,
# verifiers, seed and the reference's sampling settings (`pivot_demo.run.arm_config`): `model` is empty here.
DEMO_GRPO = GRPOConfig(
    model="",
    steps=5,
    pivots_per_step=4,
    group_size=8,
    objective=ObjectiveConfig(learning_rate=3e-4, beta=0.02),
    episode=EpisodeConfig(max_turns=3, max_observation_tokens=96),
)


def synthetic_data(conversations: int, out: Path, handoffs: bool = False) -> Path:
    """Write `conversations` synthetic airline conversations' pivots to `out` (the `"synthetic"` data).

    The airline world writes them (`synthetic_pivots`: users, reservations and requests drawn from its
    database, every tool output the world's own), so the reference policy can be partially competent
    on them at this scale; on the real tau-bench turns, the cut prompt holds the values of only 40 %
    of the held-out calls (`bench/copy_ceiling.py`). They have no recorded user or outcome: no e2e arm.
    `handoffs`: hand-off conversations as well (`synthetic_pivots`; not the bundled reference's data).
    """
    from pivot_demo.synthetic import synthetic_pivots
    from verifiers_plugins import get_host

    world = get_host().get("tool_worlds", SYNTHETIC_WORLD)()
    write_pivots(synthetic_pivots(world, conversations, seed=SYNTHETIC_DATA_SEED, handoffs=handoffs), out)
    return out


def bundled_reference() -> Path:
    """The bundled reference policy's folder (drill-pretrained, then SFT'd on the synthetic training split)."""
    from importlib import resources

    return Path(str(resources.files("pivot_demo") / "reference"))


def bundled_sample() -> Path:
    """The bundled real airline sample (`--data bundled`)."""
    from importlib import resources

    return Path(str(resources.files("pivot_core") / "data" / BUNDLED_DATA))


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
    synthetic_handoffs: bool = False
    """The `"synthetic"` data has hand-off conversations as well (`synthetic_data`)."""
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
    grpo: GRPOConfig = DEMO_GRPO
    """The GRPO arms: `steps` updates per arm (the sft arm takes as many steps on as many samples),
    P = `pivots_per_step`, G = `group_size` (the sft arm's batch is P x G expert turns), the
    objective's `learning_rate` and `beta` (KL weight), and the e2e arm's episodes (`episode.max_turns`
    agent turns, `episode.max_observation_tokens` kept of each observation: prompt + turns must fit the
    model's positions). Set fields by their own names: `cfg.grpo.with_values(steps=7, beta=0)`.
    Each arm fills in its policy, pivots, output folder and sampling settings (`DEMO_GRPO`)."""
    sft_arm_lr: float = 3e-4
    """Learning rate of the continued-SFT arm."""
    seeds: tuple[int, ...] = (0, 1, 2)
    """One run per arm and seed."""
    eval_k: int = 4
    """Samples per held-out pivot per arm and seed."""
    threads: int | None = None
    """Torch threads; `cpu_threads()` (1 on a busy machine, else every core) when None."""
    reference: str | None = None
    """A reference policy to start from instead of pretraining and SFT here: a model folder, or
    `"bundled"` (`bundled_reference()`, made on the synthetic data's training split: the run must
    split that data as it was split, `REFERENCE_DATA`). None: pretrain and SFT in this run."""
    arms: tuple[str, ...] | None = None
    """The arms run, in table order; None: every arm the data allows (`demo_arms`)."""

    def __post_init__(self) -> None:
        profile_pool((), self.profile_turns)  # the one check of the value, at construction rather than mid-run
        if self.arms is not None and ("sft" not in self.arms or "pivotrl" not in self.arms):
            raise ValueError(f"arms: expected sft and pivotrl among them (the contrasts), got {self.arms}")
        if self.arms is not None and set(self.arms) - set(ARMS):
            raise ValueError(f"arms: expected a subset of {ARMS}, got {self.arms}")
        if self.reference == BUNDLED:
            wrong = {k: getattr(self, k) for k, v in REFERENCE_DATA.items() if getattr(self, k) != v}
            if wrong:
                raise ValueError(
                    f"the bundled reference was SFT'd on the training split of {REFERENCE_DATA}; this run has "
                    f"{wrong}: its held-out pivots could be ones the reference trained on"
                )

    def quick(self) -> DemoConfig:
        """The main job (`pivot demo pivotrl --quick`): the bundled reference on synthetic data, sft and pivotrl.

        No pretraining or SFT here (the reference is bundled): profile 48 training tool calls (K=4),
        24 updates per arm at 3e-4 (P=4, G=4), three seeds, 64 held-out tool calls (in domain) and
        96 held-out text turns (out of domain: no arm trains on them), K=2. Three small runs rather
        than one large one: measured, single seeds of either size point both ways on the text turns
        (docs/results/demo.md), and a one-seed result a reader could not trust is no main job.
        """
        return replace(
            self,
            **REFERENCE_DATA,
            reference=BUNDLED,
            pretrain=self.pretrain.quick(),
            profile_turns="tool_calls",
            max_train_pivots=48,
            max_heldout_pivots=64,
            max_heldout_text=96,
            k=4,
            grpo=self.grpo.with_values(steps=24, pivots_per_step=4, group_size=4, learning_rate=3e-4),
            sft_arm_lr=3e-4,
            seeds=(0, 1, 2),
            eval_k=2,
            arms=("sft", "pivotrl"),
        )

    def quick_bundled(self, data: str | None = None) -> DemoConfig:
        """`--quick --data bundled` (or a file): every stage on real airline pivots, a small model, short stages.

        The CI configuration before the bundled reference: it checks the stages (pretraining and
        SFT included), not the method: on the bundled 6-trajectory sample every arm scores 0 held out.
        """
        return replace(
            self,
            data=data if data not in (None, BUNDLED) else str(bundled_sample()),
            heldout=0.34,
            max_train_pivots=24,
            max_heldout_pivots=8,
            max_heldout_text=8,
            pretrain=self.pretrain.quick(),
            sft_steps=150,
            sft_lr=4e-3,
            k=4,
            grpo=self.grpo.with_values(
                steps=4,
                pivots_per_step=4,
                group_size=4,
                learning_rate=1e-3,
                max_turns=2,
                max_observation_tokens=64,
            ),
            sft_arm_lr=1e-3,
            seeds=(0, 1),
            eval_k=2,
        )

    def on_synthetic(self) -> DemoConfig:
        """The full comparison on `"synthetic"` data from the bundled reference: 4 arms, 3 seeds.

        D_cand is 320 tool-call pivots of the training split (`profile_turns`: every arm trains on
        tool calls alone), K=8; each arm takes 30 updates (P=4, G=8) at 3e-4. Held out: 64 tool
        calls (in domain, where `calculate` turns accept several equivalent forms: `tool_exec`
        takes any, `exact_match` the expert's alone) and 96 text turns (out of domain: no arm
        trains on them). `reference=None` pretrains and SFTs here first instead (the settings of
        docs/results/training.md: 1,200 drill steps in two runs, SFT 300 steps at 1e-3).
        """
        return replace(
            self,
            **REFERENCE_DATA,
            reference=BUNDLED,
            pretrain=replace(self.pretrain, steps=0),
            sft_steps=300,
            sft_lr=1e-3,
            max_train_pivots=320,
            profile_turns="tool_calls",
            max_heldout_pivots=64,
            max_heldout_text=96,
            grpo=self.grpo.with_values(steps=30, learning_rate=3e-4),
            sft_arm_lr=3e-4,
        )

    @property
    def settings(self) -> StageSettings:
        """Prompt cuts and completion budget of every stage (the pretraining's)."""
        return self.pretrain.settings


# -- progress --------------------------------------------------------------------------------------
