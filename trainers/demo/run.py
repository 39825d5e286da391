"""`pivot demo pivotrl`: the PivotRL method end to end on CPU, with a fair ablation, seeds and CIs.

Stages, each printed with its elapsed time and a progress bar:

1. **split** the tau-bench airline pivots by task (`pivot split`): no task's trials on both sides;
2. **pretrain** a small model on synthetic conversations of the airline tool world
   (`pivot model pretrain`): it learns to copy ids and values from the conversation;
3. **sft** on the real training pivots (`pivot sft`): the reference policy, partially competent;
4. **profile** K samples per training pivot with it (D_cand) and **select** D_adv
   (variance > 0, mean < lambda);
5. **arms**, each from the SFT model, once per seed, on the same budget of samples
   (steps x P x G):

   | arm | trains on | update |
   |---|---|---|
   | `sft` | D_adv | same-data SFT continued on the expert turns (matched samples) |
   | `pivotrl` | D_adv | GRPO, functional reward (the env's default chain) |
   | `strict` | D_adv | GRPO, strict reward (`exact_match`): only the reward differs from pivotrl |
   | `no_filter` | D_cand | GRPO, functional reward: only the filter differs from pivotrl |
   | `e2e` | training tasks | end-to-end episode GRPO from each task's initial state (the same trainer
     in episode mode, the recorded user, tau-bench's outcome): only what a group is differs |

6. **eval** every arm and seed on the held-out tool-call pivots (`pivot eval`: K samples at the
   training temperature, functional chain), with 95 % bootstrap intervals clustered by trajectory,
   paired across arms for the difference pivotrl - sft;
7. **plots**: reward std per GRPO step, held-out acceptance per arm with error bars.

Nothing is tuned on the held-out pivots. Every stage samples with the stage settings saved
with the model (prompt cuts, completion budget, temperature).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

import pivot_envs  # noqa: F401  (registers the pivot/* env ids)
from pivot_core import Pivot, load_pivots, select_pivots, shared_data_file, split_pivots, write_pivots
from trainers._advantages import zero_variance_groups
from trainers.backends._base import SamplingParams
from trainers.demo.pretrain import PretrainConfig
from trainers.eval import SampleRecord, cluster_counts, contrast_ci, local_backend, score_samples
from trainers.grpo import GRPOTrainer
from trainers.grpo_config import GRPOConfig, end_to_end_config
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
    from trainers.demo.pretrain import synthetic_pivots
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


class StageLog:
    """One line per finished stage (elapsed time) and a progress bar inside each stage.

    Args:
        console: a rich console; output is off when None.
    """

    def __init__(self, console: Any = None) -> None:
        self.console = console
        self.started = time.perf_counter()
        self.stages: dict[str, float] = {}

    def line(self, text: str) -> None:
        """A line of text (no markup)."""
        if self.console is not None:
            self.console.print(text, markup=False, highlight=False)

    @contextlib.contextmanager
    def stage(self, name: str, total: int) -> Iterator[Callable[..., None]]:
        """`with log.stage("sft", steps) as advance: ... advance(n, info="...")`."""
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        t0 = time.perf_counter()
        info: dict[str, str] = {"text": ""}
        columns = (
            TextColumn(f"[bold]{name:<10}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[info]}"),
        )
        with Progress(*columns, console=self.console, transient=True, disable=self.console is None) as bar:
            task = bar.add_task(name, total=max(total, 1), info="")

            def advance(n: int = 1, info_text: str | None = None) -> None:
                if info_text is not None:
                    info["text"] = info_text
                bar.update(task, advance=n, info=info["text"])

            yield advance
        self.stages[name] = self.stages.get(name, 0.0) + time.perf_counter() - t0
        total_s = time.perf_counter() - self.started
        self.line(f"[{total_s:6.0f} s] {name}: {time.perf_counter() - t0:.0f} s {info['text']}".rstrip())


def cpu_threads() -> int:
    """Torch threads for this machine now: 1 when it is already busy, else every core.

    On a loaded machine (load average >= cores) OpenMP worker threads wait for cores that other
    processes hold: a forward+backward of the quick model took 0.75 s with one thread and 5-9 s
    with two at load 9 on 2 cores. On an idle machine two threads are faster.
    """
    cores = os.cpu_count() or 1
    return 1 if os.getloadavg()[0] >= cores else cores


# -- stages ------------------------------------------------------------------------------------------


def profile_pool(pivots: Sequence[Pivot], turns: str) -> list[Pivot]:
    """The training pivots that may be profiled: all of them, or the tool calls (`DemoConfig.profile_turns`)."""
    if turns not in PROFILE_TURNS:
        raise ValueError(f"profile_turns: expected one of {PROFILE_TURNS}, got {turns!r}")
    return list(pivots) if turns == "all" else [p for p in pivots if p.expert.tool_calls]


def evenly(items: Sequence[Any], n: int | None) -> list[Any]:
    """`n` items spread evenly over `items` (all when n is None or larger)."""
    if n is None or n >= len(items):
        return list(items)
    return [items[int(i)] for i in np.linspace(0, len(items) - 1, n).round().astype(int)]


def profile_stage(sft: Path, pivots: Sequence[Pivot], out: Path, cfg: DemoConfig, advance: Callable) -> list[Pivot]:
    """Each pivot with a `Profile` of K rewards from the frozen SFT policy."""
    from trainers.profiling._profiler import ProfileConfig, profile_pivots

    backend, _ = local_backend(sft)
    out.unlink(missing_ok=True)  # the profiler resumes from an existing file: this run starts afresh
    s = cfg.settings
    done = {"n": 0}

    def progress(n: int, total: int) -> None:
        advance(n - done["n"])
        done["n"] = n

    profile_pivots(
        gym.make(ENV_ID, pivots=list(pivots)),
        backend,
        out,
        ProfileConfig(k=cfg.k, max_new_tokens=s.max_new_tokens, temperature=s.temperature, seed=0, chunk_size=8),
        on_progress=progress,
    )
    return list(load_pivots(out))


def sft_arm(sft: Path, d_adv: Sequence[Pivot], out: Path, cfg: DemoConfig, seed: int, advance: Callable) -> None:
    """Same-data SFT continued from the SFT model on D_adv's expert turns, steps x (P x G) examples."""
    from trainers.sft import SFTConfig, train_sft

    batch = cfg.pivots_per_step * cfg.group_size
    config = SFTConfig.from_settings(
        cfg.settings, steps=cfg.steps, batch_size=batch, lr=cfg.sft_arm_lr, warmup_steps=1, seed=seed, log_every=1
    )
    train_sft(sft, list(d_adv), out / "final", config, log=lambda step, m: advance(1))


def arm_config(sft: Path, pivot_file: Path, out: Path, cfg: DemoConfig, seed: int, verifiers: Sequence[str] | None):
    """The GRPO config of a pivot arm (the e2e arm is its episode-mode twin)."""
    s = cfg.settings
    return GRPOConfig.from_flat(
        dict(
            model=str(sft),
            pivots=str(pivot_file),
            env_id=ENV_ID,
            verifiers=tuple(verifiers) if verifiers else None,
            output_dir=str(out),
            steps=cfg.steps,
            pivots_per_step=cfg.pivots_per_step,
            group_size=cfg.group_size,
            max_new_tokens=s.max_new_tokens,
            max_prompt_tokens=s.max_prompt_tokens,
            max_history_messages=s.max_history_messages,
            temperature=s.temperature,
            learning_rate=cfg.learning_rate,
            beta=cfg.beta,
            seed=seed,
        )
    )


def grpo_arm(grpo: GRPOConfig, out: Path, advance: Callable) -> list[dict[str, float]]:
    """Train one GRPO arm (pivot or episode mode); returns the per-step metrics."""
    (out / "metrics.jsonl").unlink(missing_ok=True)  # a rerun starts a fresh log
    steps: list[dict[str, float]] = []

    def on_step(step: int, m: dict[str, float]) -> None:
        steps.append(m)
        advance(1, f"reward {m['rollout/reward_mean']:.2f} zero-var {m['rollout/zero_var_share']:.2f}")

    GRPOTrainer(grpo).train(on_step)
    return steps


def expert_tokens(tokenizer: Any, pivot: Pivot) -> int:
    """Tokens of a pivot's expert turn under the policy's tokenizer, end of turn included."""
    from pivot_core import render_completion

    text = render_completion(pivot.expert, pivot.domain) + (tokenizer.eos_token or "")
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def weight_change(a: Path, b: Path) -> float:
    """Largest absolute difference between two model folders' weights (0: the arm did not move)."""
    from safetensors.torch import load_file

    wa, wb = load_file(str(a / "model.safetensors")), load_file(str(b / "model.safetensors"))
    return max(float((wa[k].float() - wb[k].float()).abs().max()) for k in wa)


# -- results -----------------------------------------------------------------------------------------


def arm_intervals(
    records: dict[tuple[str, int], list[SampleRecord]], seeds: Sequence[int], arms: Sequence[str]
) -> tuple[dict[str, tuple[float, float, float]], dict[str, Any]]:
    """Per arm, `(mean over seeds, low, high)`; per other arm, pivotrl minus it with its paired interval.

    Every interval resamples the same held-out trajectories for every run (`contrast_ci`), so a
    difference between two arms is judged on the pivots both were scored on.
    """
    keys = [(arm, s) for arm in arms for s in seeds]
    _, succ, trials = cluster_counts([records[k] for k in keys])
    per_arm = {arm: contrast_ci(succ, trials, [1.0 / len(seeds) if k[0] == arm else 0.0 for k in keys]) for arm in arms}
    contrasts = {}
    for other in (a for a in arms if a != "pivotrl" and "pivotrl" in arms):
        w = [(1.0 if k[0] == "pivotrl" else -1.0 if k[0] == other else 0.0) / len(seeds) for k in keys]
        diff, low, high = contrast_ci(succ, trials, w)
        contrasts[other] = {"pivotrl_minus": diff, "ci": [low, high]}
    return per_arm, {"vs": contrasts, "clusters": int(succ.shape[0])}


def arm_rows(
    records: dict[tuple[str, int], list[SampleRecord]],
    runs: dict[tuple[str, int], list[dict[str, float]]],
    prof: torch.Tensor,
    adv_prof: torch.Tensor,
    changes: dict[tuple[str, int], float],
    seeds: Sequence[int],
    arms: Sequence[str] = ARMS,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One row per arm (mean over seeds, clustered paired intervals) and pivotrl's contrasts with the others."""
    per_arm, paired = arm_intervals(records, seeds, arms)
    rows = []
    for arm in arms:
        value, low, high = per_arm[arm]
        steps = [m for s in seeds for m in runs.get((arm, s), [])]
        if arm == "sft":  # no rollouts: the share its data faces under the reference policy
            zero_var, reward_std = float(zero_variance_groups(adv_prof).float().mean()), float(adv_prof.std(1).mean())
            turns = 0.0
        else:
            zero_var = float(np.mean([m["rollout/zero_var_share"] for m in steps]))
            reward_std = float(np.mean([m["rollout/reward_std"] for m in steps]))
            turns = float(np.mean([m.get("rollout/turns_mean", 1.0) for m in steps]))  # a pivot rollout is one turn
        per_seed = [float(sum(r.accepted for r in records[(arm, s)]) / len(records[(arm, s)])) for s in seeds]
        rows.append(
            {
                "method": arm,
                "train_set": TRAIN_SETS[arm],
                "heldout_accept": value,
                "heldout_ci": [low, high],
                "heldout_per_seed": per_seed,
                "zero_var_share": zero_var,
                "reward_std": reward_std,
                "turns_per_rollout": turns,
                "seeds": list(seeds),
                "weight_change": [changes[(arm, s)] for s in seeds],
            }
        )
    sft = paired["vs"]["sft"]
    contrast = {"pivotrl_minus_sft": sft["pivotrl_minus"], "ci": sft["ci"], "clusters": paired["clusters"]}
    contrast["vs"] = paired["vs"]
    contrast["d_cand_zero_var_share"] = float(zero_variance_groups(prof).float().mean())
    return rows, contrast


def plot_results(
    rows: Sequence[dict[str, Any]], runs: dict, seeds: Sequence[int], root: Path, arms: Sequence[str] = ARMS
) -> list[str]:
    """`reward_std.png` (per GRPO step, mean over seeds) and `heldout.png` (acceptance with 95 % CIs)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for arm in (a for a in arms if a != "sft"):  # the GRPO arms: the sft arm has no rollouts
        label = f"{arm} ({TRAIN_SETS[arm]})"
        per_seed = [[m["rollout/reward_std"] for m in runs[(arm, s)]] for s in seeds]
        ys = np.mean(np.array(per_seed), axis=0)
        ax.plot(range(1, len(ys) + 1), ys, marker="o", label=label)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set(
        xlabel="GRPO step", ylabel="within-group reward std", title=f"Reward std per batch (mean of {len(seeds)} seeds)"
    )
    ax.legend()
    fig.tight_layout()
    fig.savefig(root / "reward_std.png", dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 3.5))
    x = np.arange(len(rows))
    vals = np.array([r["heldout_accept"] for r in rows])
    err = np.array([[v - r["heldout_ci"][0], r["heldout_ci"][1] - v] for v, r in zip(vals, rows, strict=True)]).T
    ax.bar(x, vals, yerr=err, capsize=5, color="#4c72b0")
    ax.set_xticks(x, [r["method"] for r in rows])
    ax.set(ylabel="held-out acceptance", title="Held-out tool-call acceptance, 95 % CI (clustered by trajectory)")
    fig.tight_layout()
    fig.savefig(root / "heldout.png", dpi=120)
    plt.close(fig)
    return [str(root / "reward_std.png"), str(root / "heldout.png")]


# -- the run -----------------------------------------------------------------------------------------


def run_demo(cfg: DemoConfig, log: StageLog | None = None) -> dict[str, Any]:
    """Run every stage; returns `{"rows", "contrast", "plots", "sizes", "stages", "config", "seconds"}`."""
    from trainers.demo.pretrain import pretrain
    from trainers.sft import SFTConfig, train_sft

    log = log or StageLog()
    torch.set_num_threads(cfg.threads or cpu_threads())
    root = Path(cfg.out)
    root.mkdir(parents=True, exist_ok=True)
    s = cfg.settings
    torch.manual_seed(0)

    with log.stage("split", 1) as advance:
        if cfg.data == SYNTHETIC:
            data = synthetic_data(cfg.synthetic_conversations, root / "synthetic.jsonl")
        else:
            data = Path(cfg.data) if cfg.data else default_data()
        split = split_pivots(list(load_pivots(data)), heldout=cfg.heldout, by="auto", seed=cfg.split_seed)
        train = evenly(profile_pool(split.train, cfg.profile_turns), cfg.max_train_pivots)
        write_pivots(train, root / "train.jsonl")
        write_pivots(split.train, root / "train_split.jsonl")  # whole training trajectories: the e2e arm's tasks
        advance(1, f"{data.name} by {split.by}: {len(split.train)} train / {len(split.heldout)} held-out pivots")

    with log.stage("pretrain", cfg.pretrain.total_steps) as advance:
        # the tokenizer also reads the real training split; synthetic data comes from the pretraining's own
        # generator, so it adds no words (measured: with it, the drills of one seed stalled at loss 0.26
        # in both runs and copied nothing; without it the same seed reached 0.035 and copied 27 of 40)
        corpus = [] if cfg.data == SYNTHETIC else list(split.train)
        info = pretrain(root / "pretrain", cfg.pretrain, corpus=corpus, log=lambda st, m: advance(1))
        skill = info["copy_skill"]
        advance(
            0,
            f"{info['parameters'] / 1e6:.1f}M params, {info['synthetic_pivots']} synthetic pivots; greedy copy "
            f"{skill['drills']:.2f} on unseen drills, {skill['conversations']:.2f} on unseen conversations",
        )

    sft = root / "sft"
    with log.stage("sft", cfg.sft_steps) as advance:
        summary = train_sft(
            root / "pretrain",
            list(split.train),
            sft,
            SFTConfig.from_settings(s, steps=cfg.sft_steps, batch_size=16, lr=cfg.sft_lr, log_every=1),
            log=lambda st, m: advance(1),
        )
        advance(0, f"{len(split.train)} pivots, {summary['targets_cut']} targets longer than the budget")
        # held-out tool calls whose expert turn fits the completion budget: a longer one cannot be sampled whole
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(sft)
        calls = [p for p in split.heldout if p.expert.tool_calls]
        fitting = [p for p in calls if expert_tokens(tokenizer, p) <= s.max_new_tokens]
        heldout = evenly(fitting, cfg.max_heldout_pivots)
        if not heldout:
            raise ValueError(f"no held-out tool call fits the completion budget of {s.max_new_tokens} tokens")
        write_pivots(heldout, root / "heldout.jsonl")
        log.line(
            f"held out: {len(heldout)} of the {len(fitting)} tool calls that fit {s.max_new_tokens} tokens "
            f"({len(calls)} in all)"
        )
        texts = [p for p in split.heldout if not p.expert.tool_calls]
        text_fitting = [p for p in texts if expert_tokens(tokenizer, p) <= s.max_new_tokens]
        heldout_text = evenly(text_fitting, cfg.max_heldout_text) if cfg.max_heldout_text != 0 else []
        if heldout_text:
            write_pivots(heldout_text, root / "heldout_text.jsonl")
            log.line(f"held out as well: {len(heldout_text)} of the {len(text_fitting)} text turns that fit")

    with log.stage("profile", len(train)) as advance:
        d_cand = profile_stage(sft, train, root / "d_cand.jsonl", cfg, advance)
        d_adv = list(select_pivots(d_cand, cfg.lam).kept)
        if not d_adv:
            raise ValueError(
                f"D_adv is empty: none of the {len(d_cand)} profiled pivots had mixed rewards under lam={cfg.lam} "
                "(the SFT policy is all-wrong or all-right on each): train longer or profile more pivots"
            )
        write_pivots(d_adv, root / "d_adv.jsonl")
        prof = torch.tensor([list(p.profile.rewards) for p in d_cand])
        advance(
            0,
            f"K={cfg.k}: D_cand {len(d_cand)} (zero-var {zero_variance_groups(prof).float().mean():.2f}), "
            f"D_adv {len(d_adv)}",
        )

    runs: dict[tuple[str, int], list[dict[str, float]]] = {}
    arms = demo_arms(cfg.data)
    if len(arms) < len(ARMS):
        log.line("no e2e arm: the synthetic conversations have no recorded user or outcome to run episodes with")
    with log.stage("arms", len(arms) * len(cfg.seeds) * cfg.steps) as advance:
        for seed in cfg.seeds:
            for arm in arms:
                out = root / "runs" / f"{arm}-seed{seed}"
                if arm == "sft":
                    sft_arm(sft, d_adv, out, cfg, seed, advance)
                    continue
                pivot_file = root / ("d_cand.jsonl" if arm == "no_filter" else "d_adv.jsonl")
                grpo = arm_config(sft, pivot_file, out, cfg, seed, STRICT_VERIFIERS if arm == "strict" else None)
                if arm == "e2e":  # the pivotrl arm's twin: same trainer, samples and seed; episodes for groups
                    grpo = end_to_end_config(grpo, str(root / "train_split.jsonl"), str(out), cfg.e2e_max_turns)
                    grpo = grpo.with_values(max_observation_tokens=cfg.e2e_max_observation_tokens)
                runs[(arm, seed)] = grpo_arm(grpo, out, advance)

    records: dict[tuple[str, int], list[SampleRecord]] = {}
    text_records: dict[tuple[str, int], list[SampleRecord]] = {}
    changes: dict[tuple[str, int], float] = {}
    env = gym.make(ENV_ID, pivots=[*heldout, *heldout_text]).unwrapped
    params = SamplingParams(max_new_tokens=s.max_new_tokens, temperature=s.temperature)
    with log.stage("eval", len(arms) * len(cfg.seeds) + 1) as advance:
        base, _ = local_backend(sft)
        base_records = score_samples(base, env, heldout, cfg.eval_k, params, seeds=(10_000,))
        base_text = score_samples(base, env, heldout_text, cfg.eval_k, params, seeds=(10_000,)) if heldout_text else []
        advance(1)
        for arm in arms:
            for seed in cfg.seeds:
                folder = root / "runs" / f"{arm}-seed{seed}" / "final"
                backend, _ = local_backend(folder)
                # one sampling seed per (arm, seed): arms are compared on equal terms
                records[(arm, seed)] = score_samples(backend, env, heldout, cfg.eval_k, params, seeds=(10_000 + seed,))
                if heldout_text:
                    text_records[(arm, seed)] = score_samples(
                        backend, env, heldout_text, cfg.eval_k, params, seeds=(10_000 + seed,)
                    )
                changes[(arm, seed)] = weight_change(sft, folder)
                advance(1, f"{arm} seed {seed}")

    adv_prof = torch.tensor([list(p.profile.rewards) for p in d_adv])
    rows, contrast = arm_rows(records, runs, prof, adv_prof, changes, cfg.seeds, arms)
    contrast["sft_start_accept"] = float(np.mean([r.accepted for r in base_records]))
    if heldout_text:
        per_arm, contrast["text"] = arm_intervals(text_records, cfg.seeds, arms)
        contrast["text"]["sft_start_accept"] = float(np.mean([r.accepted for r in base_text]))
        for row in rows:
            value, low, high = per_arm[row["method"]]
            row["heldout_text_accept"], row["heldout_text_ci"] = value, [low, high]
    plots = plot_results(rows, runs, cfg.seeds, root, arms)
    result = {
        "rows": rows,
        "contrast": contrast,
        "plots": plots,
        "sizes": {
            "train_split": len(split.train),
            "heldout_split": len(split.heldout),
            "d_cand": len(d_cand),
            "d_adv": len(d_adv),
            "heldout_eval": len(heldout),
            "heldout_text_eval": len(heldout_text),
            "parameters": info["parameters"],
        },
        "stages": {k: round(v, 1) for k, v in log.stages.items()},
        "config": _jsonable(asdict(cfg)),
        "seconds": round(time.perf_counter() - log.started, 1),
    }
    (root / "results.json").write_text(json.dumps(result, indent=2))
    return result


def _jsonable(x: Any) -> Any:
    return json.loads(json.dumps(x, default=str))
