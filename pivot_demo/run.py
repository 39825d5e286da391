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
7. **plots**: `arms.png` (held-out acceptance per arm, tool calls and text turns, with intervals)
   and `zero_var.png` (zero-variance share of D_cand, D_adv and each GRPO arm's batches).

With a given reference (`DemoConfig.reference`; `--quick` and `--data synthetic` use the bundled
one), stages 2 and 3 are one **reference** stage: the arms start from it and sample with its settings.

Nothing is tuned on the held-out pivots. Every stage samples with the stage settings saved
with the model (prompt cuts, completion budget, temperature).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

import pivot_envs  # noqa: F401  (registers the pivot/* env ids)
from pivot_core import Pivot, load_pivots, select_pivots, split_pivots, write_pivots
from pivot_demo.config import (
    BUNDLED,
    ENV_ID,
    STRICT_VERIFIERS,
    SYNTHETIC,
    DemoConfig,
    bundled_reference,
    default_data,
    demo_arms,
    profile_pool,
    synthetic_data,
)
from pivot_demo.results import arm_intervals, arm_rows, jsonable, plot_results
from pivot_demo.stage_log import StageLog, cpu_threads
from trainers.backends import GenerationBackend, SamplingParams
from trainers.eval import SampleRecord, local_backend, score_samples
from trainers.grpo import GRPOTrainer, zero_variance_groups
from trainers.grpo_config import GRPOConfig, end_to_end_config

# -- stages ------------------------------------------------------------------------------------------


def evenly(items: Sequence[Any], n: int | None) -> list[Any]:
    """`n` items spread evenly over `items` (all when n is None or larger)."""
    if n is None or n >= len(items):
        return list(items)
    return [items[int(i)] for i in np.linspace(0, len(items) - 1, n).round().astype(int)]


def profile_stage(sft: Path, pivots: Sequence[Pivot], out: Path, cfg: DemoConfig, advance: Callable) -> list[Pivot]:
    """Each pivot with a `Profile` of K rewards from the frozen SFT policy."""
    from trainers.profiling import ProfileConfig, profile_pivots

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

    config = SFTConfig.from_settings(
        cfg.settings,
        steps=cfg.grpo.steps,
        batch_size=cfg.grpo.batch_size,
        lr=cfg.sft_arm_lr,
        warmup_steps=1,
        seed=seed,
        log_every=1,
    )
    train_sft(sft, list(d_adv), out / "final", config, log=lambda step, m: advance(1))


def arm_config(sft: Path, pivot_file: Path, out: Path, cfg: DemoConfig, seed: int, verifiers: Sequence[str] | None):
    """The GRPO config of a pivot arm (the e2e arm is its episode-mode twin): `cfg.grpo`, filled in for this arm."""
    s = cfg.settings
    return cfg.grpo.with_values(
        model=str(sft),
        pivots=str(pivot_file),
        env_id=ENV_ID,
        verifiers=tuple(verifiers) if verifiers else None,
        output_dir=str(out),
        max_new_tokens=s.max_new_tokens,
        max_prompt_tokens=s.max_prompt_tokens,
        max_history_messages=s.max_history_messages,
        temperature=s.temperature,
        seed=seed,
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


# -- the run -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Split:
    """The split stage's output: the training pivots (whole split, and the profiled subset) and the held-out ones."""

    data: Path
    train: list[Pivot]
    profiled: list[Pivot]
    heldout: list[Pivot]


@dataclass(frozen=True)
class HeldOut:
    """The held-out pivots every arm is evaluated on: tool calls (in domain) and text turns (out of domain)."""

    calls: list[Pivot]
    texts: list[Pivot]


@dataclass(frozen=True)
class Candidates:
    """D_cand (every profiled pivot) and D_adv (variance > 0, mean < lambda)."""

    d_cand: list[Pivot]
    d_adv: list[Pivot]


@dataclass(frozen=True)
class Evaluation:
    """Held-out samples per (arm, seed), the SFT start's, and how far each arm's weights moved."""

    calls: dict[tuple[str, int], list[SampleRecord]]
    texts: dict[tuple[str, int], list[SampleRecord]]
    start_calls: list[SampleRecord]
    start_texts: list[SampleRecord]
    changes: dict[tuple[str, int], float]


def split_stage(cfg: DemoConfig, root: Path, log: StageLog) -> Split:
    """Split the data by task (synthetic conversations generated first) and pick the pivots to profile."""
    with log.stage("split", 1) as advance:
        if cfg.data == SYNTHETIC:
            data = synthetic_data(cfg.synthetic_conversations, root / "synthetic.jsonl", cfg.synthetic_handoffs)
        else:
            data = Path(cfg.data) if cfg.data else default_data()
        split = split_pivots(list(load_pivots(data)), heldout=cfg.heldout, by="auto", seed=cfg.split_seed)
        profiled = evenly(profile_pool(split.train, cfg.profile_turns), cfg.max_train_pivots)
        write_pivots(profiled, root / "train.jsonl")
        write_pivots(split.train, root / "train_split.jsonl")  # whole training trajectories: the e2e arm's tasks
        advance(1, f"{data.name} by {split.by}: {len(split.train)} train / {len(split.heldout)} held-out pivots")
    return Split(data, list(split.train), profiled, list(split.heldout))


def pretrain_stage(cfg: DemoConfig, root: Path, split: Split, log: StageLog) -> dict[str, Any]:
    """Pretrain the small model on synthetic conversations of the tool world; returns its report."""
    from pivot_demo.pretrain import pretrain

    with log.stage("pretrain", cfg.pretrain.total_steps) as advance:
        # the tokenizer also reads the real training split; synthetic data comes from the pretraining's own
        # generator, so it adds no words (measured: with it, the drills of one seed stalled at loss 0.26
        # in both runs and copied nothing; without it the same seed reached 0.035 and copied 27 of 40)
        corpus = [] if cfg.data == SYNTHETIC else split.train
        info = pretrain(root / "pretrain", cfg.pretrain, corpus=corpus, log=lambda st, m: advance(1))
        skill = info["copy_skill"]
        advance(
            0,
            f"{info['parameters'] / 1e6:.1f}M params, {info['synthetic_pivots']} synthetic pivots; greedy copy "
            f"{skill['drills']:.2f} on unseen drills, {skill['conversations']:.2f} on unseen conversations",
        )
    return info


def sft_stage(cfg: DemoConfig, root: Path, split: Split, log: StageLog) -> HeldOut:
    """SFT on the training split (the reference policy); then the held-out turns that fit its completion budget."""
    from trainers.sft import SFTConfig, train_sft

    s, sft = cfg.settings, root / "sft"
    with log.stage("sft", cfg.sft_steps) as advance:
        summary = train_sft(
            root / "pretrain",
            split.train,
            sft,
            SFTConfig.from_settings(s, steps=cfg.sft_steps, batch_size=16, lr=cfg.sft_lr, log_every=1),
            log=lambda st, m: advance(1),
        )
        advance(0, f"{len(split.train)} pivots, {summary['targets_cut']} targets longer than the budget")
    return heldout_stage(cfg, root, split, sft, log)


def reference_stage(cfg: DemoConfig, root: Path, split: Split, log: StageLog) -> tuple[HeldOut, dict[str, Any]]:
    """Start from a given reference policy (no pretraining or SFT here); the held-out turns that fit its budget."""
    model = reference_model(cfg, root)
    with log.stage("reference", 1) as advance:
        from safetensors import safe_open

        with safe_open(str(model / "model.safetensors"), "pt") as f:
            parameters = sum(math.prod(f.get_slice(k).get_shape()) for k in f.keys())
        built = model / "pivot_reference.json"
        how = json.loads(built.read_text()) if built.is_file() else {}
        skill = how.get("copy_skill", {})
        about = "".join(f", greedy copy {v:.2f} on unseen {k}" for k, v in sorted(skill.items()))
        advance(1, f"{'bundled' if cfg.reference == BUNDLED else model}: {parameters / 1e6:.2f}M params{about}")
    return heldout_stage(cfg, root, split, model, log), {"parameters": parameters, **how}


def reference_model(cfg: DemoConfig, root: Path) -> Path:
    """The policy the arms start from: the given reference, else the SFT model this run trains."""
    if cfg.reference is None:
        return root / "sft"
    return bundled_reference() if cfg.reference == BUNDLED else Path(cfg.reference)


def heldout_stage(cfg: DemoConfig, root: Path, split: Split, model: Path, log: StageLog) -> HeldOut:
    """The held-out turns the arms are scored on: those whose expert turn fits the completion budget."""
    from transformers import AutoTokenizer

    s = cfg.settings
    # held-out turns whose expert turn fits the completion budget: a longer one cannot be sampled whole
    tokenizer = AutoTokenizer.from_pretrained(model)
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
    return HeldOut(heldout, heldout_text)


def candidates_stage(cfg: DemoConfig, root: Path, split: Split, log: StageLog) -> Candidates:
    """Profile K samples per pivot with the frozen reference policy (D_cand) and select D_adv."""
    with log.stage("profile", len(split.profiled)) as advance:
        d_cand = profile_stage(reference_model(cfg, root), split.profiled, root / "d_cand.jsonl", cfg, advance)
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
    return Candidates(d_cand, d_adv)


def arms_stage(
    cfg: DemoConfig, root: Path, arms: Sequence[str], d_adv: Sequence[Pivot], log: StageLog
) -> dict[tuple[str, int], list[dict[str, float]]]:
    """Train every arm once per seed from the reference policy; returns each GRPO run's per-step metrics."""
    sft, runs = reference_model(cfg, root), {}
    with log.stage("arms", len(arms) * len(cfg.seeds) * cfg.grpo.steps) as advance:
        for seed in cfg.seeds:
            for arm in arms:
                out = root / "runs" / f"{arm}-seed{seed}"
                if arm == "sft":
                    sft_arm(sft, d_adv, out, cfg, seed, advance)
                    continue
                pivot_file = root / ("d_cand.jsonl" if arm == "no_filter" else "d_adv.jsonl")
                grpo = arm_config(sft, pivot_file, out, cfg, seed, STRICT_VERIFIERS if arm == "strict" else None)
                if arm == "e2e":  # the pivotrl arm's twin: same trainer, samples and seed; episodes for groups
                    grpo = end_to_end_config(grpo, str(root / "train_split.jsonl"), str(out))
                runs[(arm, seed)] = grpo_arm(grpo, out, advance)
    return runs


def eval_stage(cfg: DemoConfig, root: Path, arms: Sequence[str], heldout: HeldOut, log: StageLog) -> Evaluation:
    """Sample every arm and seed (and the SFT start) on the held-out pivots, at the training temperature."""
    s, sft = cfg.settings, reference_model(cfg, root)
    env = gym.make(ENV_ID, pivots=[*heldout.calls, *heldout.texts]).unwrapped
    params = SamplingParams(max_new_tokens=s.max_new_tokens, temperature=s.temperature)

    def sample(backend: GenerationBackend, pivots: Sequence[Pivot], seed: int) -> list[SampleRecord]:
        return score_samples(backend, env, pivots, cfg.eval_k, params, seeds=(seed,)) if pivots else []

    calls, texts, changes = {}, {}, {}
    with log.stage("eval", len(arms) * len(cfg.seeds) + 1) as advance:
        base, _ = local_backend(sft)
        start_calls, start_texts = sample(base, heldout.calls, 10_000), sample(base, heldout.texts, 10_000)
        advance(1)
        for arm in arms:
            for seed in cfg.seeds:
                folder = root / "runs" / f"{arm}-seed{seed}" / "final"
                backend, _ = local_backend(folder)
                # one sampling seed per (arm, seed): arms are compared on equal terms
                calls[(arm, seed)] = sample(backend, heldout.calls, 10_000 + seed)
                if heldout.texts:
                    texts[(arm, seed)] = sample(backend, heldout.texts, 10_000 + seed)
                changes[(arm, seed)] = weight_change(sft, folder)
                advance(1, f"{arm} seed {seed}")
    return Evaluation(calls, texts, start_calls, start_texts, changes)


def run_demo(cfg: DemoConfig, log: StageLog | None = None) -> dict[str, Any]:
    """Run every stage; returns `{"rows", "contrast", "plots", "sizes", "stages", "config", "seconds"}`."""
    log = log or StageLog()
    torch.set_num_threads(cfg.threads or cpu_threads())
    root = Path(cfg.out)
    root.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)

    if cfg.reference is not None:  # sample with the settings the reference was trained at
        from trainers.settings import settings_of

        cfg = replace(cfg, pretrain=replace(cfg.pretrain, settings=settings_of(reference_model(cfg, root))))
    split = split_stage(cfg, root, log)
    if cfg.reference is None:
        info = pretrain_stage(cfg, root, split, log)
        heldout = sft_stage(cfg, root, split, log)
    else:
        heldout, info = reference_stage(cfg, root, split, log)
    candidates = candidates_stage(cfg, root, split, log)
    arms = cfg.arms or demo_arms(cfg.data)
    if "e2e" not in arms and cfg.data == SYNTHETIC:
        log.line("no e2e arm: the synthetic conversations have no recorded user or outcome to run episodes with")
    runs = arms_stage(cfg, root, arms, candidates.d_adv, log)
    evaluation = eval_stage(cfg, root, arms, heldout, log)

    prof = torch.tensor([list(p.profile.rewards) for p in candidates.d_cand])
    adv_prof = torch.tensor([list(p.profile.rewards) for p in candidates.d_adv])
    rows, contrast = arm_rows(evaluation.calls, runs, prof, adv_prof, evaluation.changes, cfg.seeds, arms)
    contrast["sft_start_accept"] = float(np.mean([r.accepted for r in evaluation.start_calls]))
    if heldout.texts:
        per_arm, contrast["text"] = arm_intervals(evaluation.texts, cfg.seeds, arms)
        contrast["text"]["sft_start_accept"] = float(np.mean([r.accepted for r in evaluation.start_texts]))
        for row in rows:
            value, low, high = per_arm[row["method"]]
            row["heldout_text_accept"], row["heldout_text_ci"] = value, [low, high]
    result = {
        "rows": rows,
        "contrast": contrast,
        "plots": plot_results(rows, runs, cfg.seeds, root, arms, contrast),
        "sizes": {
            "train_split": len(split.train),
            "heldout_split": len(split.heldout),
            "d_cand": len(candidates.d_cand),
            "d_adv": len(candidates.d_adv),
            "heldout_eval": len(heldout.calls),
            "heldout_text_eval": len(heldout.texts),
            "parameters": info["parameters"],
        },
        "stages": {k: round(v, 1) for k, v in log.stages.items()},
        "config": jsonable(asdict(cfg)),
        "seconds": round(time.perf_counter() - log.started, 1),
    }
    (root / "results.json").write_text(json.dumps(result, indent=2))
    return result
