"""`pivot demo pivotrl`: the whole PivotRL method end to end on CPU, with the paper's comparisons.

tiny model -> same-data SFT on a training split of the bundled tool-use pivots (short, so the
policy is only partially competent) -> profile K samples per training pivot -> select D_adv
(variance > 0, mean < lambda) -> GRPO from the SFT model, three ways:

- `pivotrl`:   D_adv,  functional reward (the tool-use env's default verifier chain);
- `no_filter`: D_cand (every training pivot), functional reward;
- `strict`:    D_cand, strict reward (`exact_match`: the expert action, verbatim);

and `sft` (no RL). Every row's held-out acceptance is measured the same way: G samples per
held-out pivot at temperature 1, scored with the functional chain. Held-out pivots come from
trajectories that no training pivot comes from, chosen by a hash of the trajectory id; nothing
here was tuned on them.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch

import pivot_envs  # noqa: F401  (registers the pivot/* env ids)
from pivot_envs._formats import load_pivots, write_pivots
from pivot_envs._model import Pivot
from pivot_envs._pivots import select_pivots
from trainers._advantages import zero_variance_groups
from trainers.backends._base import SamplingParams
from trainers.grpo import GRPOConfig, GRPOTrainer

ENV_ID = "pivot/tool-use-v0"
STRICT_VERIFIERS = ("exact_match",)


@dataclass(frozen=True)
class DemoConfig:
    """The demo's knobs (defaults: the full run; `reduced()` is the CI configuration)."""

    out: str = "runs/pivotrl-demo"
    """Working folder: models, pivot files, runs, the plot."""
    heldout_every: int = 3
    """Every N-th trajectory (in hash order) is held out."""
    sft_steps: int = 200
    """SFT optimizer steps (batch 8): short, so that the policy stays partially competent."""
    k: int = 8
    """Samples per pivot when profiling."""
    lam: float = 0.9
    """D_adv keeps pivots with reward variance > 0 and mean < lam."""
    steps: int = 12
    """GRPO steps per method."""
    pivots_per_step: int = 4
    """P per GRPO step."""
    group_size: int = 8
    """G per pivot, also the held-out samples per pivot."""
    max_new_tokens: int = 64
    """Longest completion."""
    learning_rate: float = 3e-4
    """GRPO learning rate."""
    beta: float = 0.02
    """KL weight."""
    seed: int = 0
    """One seed for every stage."""
    small_model: bool = False
    """A ~170k-parameter model reading the last 2 messages / 96 tokens (the test fixture's shape)."""
    max_history_messages: int = 4
    """Prompt cut (messages) for SFT, profiling, GRPO and evaluation alike."""
    max_prompt_tokens: int = 256
    """Prompt cut (tokens), idem."""

    def reduced(self) -> DemoConfig:
        """The CI configuration: the small model, short prompts, fewer steps; the same stages."""
        return replace(
            self,
            small_model=True,
            sft_steps=150,
            max_history_messages=2,
            max_prompt_tokens=96,
            steps=4,
            pivots_per_step=2,
            group_size=4,
            max_new_tokens=48,
        )


def trajectory_of(pivot: Pivot) -> str:
    """The trajectory a pivot comes from (pivot ids are `<trajectory id>#<turn>`)."""
    return pivot.id.rsplit("#", 1)[0]


def split_pivots(pivots: Sequence[Pivot], every: int) -> tuple[list[Pivot], list[Pivot]]:
    """(train, held-out): trajectories ordered by a hash of their id, every `every`-th one held out.

    Splitting by trajectory keeps pivots that share a history on one side; ordering by hash makes
    the choice arbitrary but fixed, and taking every N-th keeps the held-out share near 1/N.
    """
    trajectories = sorted({trajectory_of(p) for p in pivots}, key=lambda t: hashlib.sha256(t.encode()).hexdigest())
    held = {t for i, t in enumerate(trajectories) if i % every == 0}
    return [p for p in pivots if trajectory_of(p) not in held], [p for p in pivots if trajectory_of(p) in held]


def sample_and_score(
    model_dir: str | Path, pivots: Sequence[Pivot], n: int, cfg: DemoConfig, verifiers: Sequence[str] | None = None
) -> tuple[torch.Tensor, torch.Tensor, str]:
    """Sample n completions per pivot and score them: `(rewards [P, n], accepted [P, n], policy id)`."""
    from trainers.backends._transformers import TransformersBackend, TransformersConfig

    backend = TransformersBackend(
        TransformersConfig(
            model=str(model_dir), max_prompt_tokens=cfg.max_prompt_tokens, max_history_messages=cfg.max_history_messages
        )
    )
    groups = backend.generate(list(pivots), n, SamplingParams(max_new_tokens=cfg.max_new_tokens, seed=cfg.seed))
    env = gym.make(ENV_ID, pivots=list(pivots), **({"verifiers": list(verifiers)} if verifiers else {})).unwrapped
    rewards, accepted = [], []
    for pivot, group in zip(pivots, groups, strict=True):
        results = env.score(pivot, [g.text for g in group])
        rewards.append([r.reward for r in results])
        accepted.append([float(r.accepted) for r in results])
    return torch.tensor(rewards), torch.tensor(accepted), backend.policy_id


def profile(model_dir: str | Path, pivots: Sequence[Pivot], out: Path, cfg: DemoConfig) -> list[Pivot]:
    """Each pivot with a `Profile` of K rewards from the frozen SFT policy (the issue-6 profiler)."""
    from trainers.backends._transformers import TransformersBackend, TransformersConfig
    from trainers.profiling._profiler import ProfileConfig, profile_pivots

    backend = TransformersBackend(
        TransformersConfig(
            model=str(model_dir), max_prompt_tokens=cfg.max_prompt_tokens, max_history_messages=cfg.max_history_messages
        )
    )
    out.unlink(missing_ok=True)  # the profiler resumes from an existing file: this run starts afresh
    profile_pivots(
        gym.make(ENV_ID, pivots=list(pivots)),
        backend,
        out,
        ProfileConfig(k=cfg.k, max_new_tokens=cfg.max_new_tokens, seed=cfg.seed),
    )
    return list(load_pivots(out))


def run_grpo(
    name: str,
    model_dir: Path,
    pivot_file: Path,
    cfg: DemoConfig,
    verifiers: Sequence[str] | None,
    log: Callable[..., None],
) -> list[dict[str, float]]:
    """GRPO from the SFT model on one pivot file; returns the per-step metrics."""
    out = Path(cfg.out) / "runs" / name
    grpo = GRPOConfig(
        model=str(model_dir),
        pivots=str(pivot_file),
        verifiers=tuple(verifiers) if verifiers else None,
        output_dir=str(out),
        steps=cfg.steps,
        pivots_per_step=cfg.pivots_per_step,
        group_size=cfg.group_size,
        max_new_tokens=cfg.max_new_tokens,
        learning_rate=cfg.learning_rate,
        beta=cfg.beta,
        seed=cfg.seed,
        max_prompt_tokens=cfg.max_prompt_tokens,
        max_history_messages=cfg.max_history_messages,
    )
    if (out / "metrics.jsonl").exists():
        (out / "metrics.jsonl").unlink()  # a rerun starts a fresh log
    trainer = GRPOTrainer(grpo)
    steps = []

    def on_step(step: int, m: dict[str, float]) -> None:
        steps.append(m)
        log(
            f"  {name} step {step}/{cfg.steps}: reward {m['rollout/reward_mean']:.3f} "
            f"std {m['rollout/reward_std']:.3f} zero-var {m['rollout/zero_var_share']:.2f}"
        )

    trainer.train(on_step)
    return steps


def plot_reward_std(runs: dict[str, list[dict[str, float]]], path: Path) -> Path:
    """Reward std per step, D_adv vs D_cand (the paper's Fig. 3), as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for name, label in (("pivotrl", "D_adv (PivotRL)"), ("no_filter", "D_cand (no filter)")):
        ys = [m["rollout/reward_std"] for m in runs[name]]
        ax.plot(range(1, len(ys) + 1), ys, marker="o", label=label)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("GRPO step")
    ax.set_ylabel("mean within-group reward std")
    ax.set_title("Reward std per batch")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _mean(xs: Sequence[float]) -> float:
    return float(sum(xs) / len(xs)) if xs else float("nan")


def run_demo(cfg: DemoConfig, log: Callable[..., None] = print) -> dict[str, Any]:
    """Run every stage; returns `{"rows": [...], "plot": path, "config": {...}, "sizes": {...}}`."""
    from trainers.sft import SFTConfig, train_sft
    from trainers.tiny_model import TEST_MODEL, build_tiny_model

    root = Path(cfg.out)
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    torch.manual_seed(cfg.seed)
    train, heldout = split_pivots(gym.make(ENV_ID).unwrapped.pivots, cfg.heldout_every)
    log(f"pivots: {len(train)} train, {len(heldout)} held out")
    sft, marker = root / "sft", root / "sft" / "pivot_demo_sft.json"
    key = {"sft_steps": cfg.sft_steps, "seed": cfg.seed, "small": cfg.small_model, "train": [p.id for p in train]}
    if not (marker.exists() and json.loads(marker.read_text()) == key):  # a rerun reuses the same SFT model
        build_tiny_model(root / "tiny", pivots=train, config=TEST_MODEL if cfg.small_model else None)
        train_sft(
            root / "tiny",
            train,
            sft,
            SFTConfig(
                steps=cfg.sft_steps,
                seed=cfg.seed,
                max_history_messages=cfg.max_history_messages,
                max_prompt_tokens=cfg.max_prompt_tokens,
            ),
        )
        marker.write_text(json.dumps(key))
    log(f"SFT done ({time.perf_counter() - t0:.0f} s)")

    d_cand = profile(sft, train, root / "d_cand.jsonl", cfg)
    d_adv = list(select_pivots(d_cand, cfg.lam).kept)
    if not d_adv:
        raise RuntimeError(f"D_adv is empty: no training pivot had mixed rewards under lam={cfg.lam}")
    for name, pivots in (("d_adv", d_adv), ("heldout", heldout)):
        write_pivots(pivots, root / f"{name}.jsonl")
    log(f"profiled K={cfg.k}: D_cand {len(d_cand)} pivots, D_adv {len(d_adv)} ({time.perf_counter() - t0:.0f} s)")

    runs = {
        "pivotrl": run_grpo("pivotrl", sft, root / "d_adv.jsonl", cfg, None, log),
        "no_filter": run_grpo("no_filter", sft, root / "d_cand.jsonl", cfg, None, log),
        "strict": run_grpo("strict", sft, root / "d_cand.jsonl", cfg, STRICT_VERIFIERS, log),
    }
    prof = torch.tensor([list(p.profile.rewards) for p in d_cand])
    rows = [
        {
            "method": "sft",
            "train_set": "-",
            "heldout_accept": _heldout(sft, heldout, cfg),
            "zero_var_share": float(zero_variance_groups(prof).float().mean()),
            "reward_std": float(prof.std(dim=1).mean()),
        }
    ]
    for name, train_set in (("pivotrl", "D_adv"), ("no_filter", "D_cand"), ("strict", "D_cand")):
        steps = runs[name]
        rows.append(
            {
                "method": name,
                "train_set": train_set,
                "heldout_accept": _heldout(root / "runs" / name / "final", heldout, cfg),
                "zero_var_share": _mean([m["rollout/zero_var_share"] for m in steps]),
                "reward_std": _mean([m["rollout/reward_std"] for m in steps]),
            }
        )
    plot = plot_reward_std(runs, root / "reward_std.png")
    log(f"done in {time.perf_counter() - t0:.0f} s")
    result = {
        "rows": rows,
        "plot": str(plot),
        "config": asdict(cfg),
        "sizes": {"train": len(train), "heldout": len(heldout), "d_cand": len(d_cand), "d_adv": len(d_adv)},
        "seconds": time.perf_counter() - t0,
    }
    (root / "results.json").write_text(json.dumps(result, indent=2))
    return result


def _heldout(model_dir: Path, heldout: Sequence[Pivot], cfg: DemoConfig) -> float:
    _, accepted, _ = sample_and_score(model_dir, heldout, cfg.group_size, cfg)
    return float(accepted.mean())
