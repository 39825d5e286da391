"""Benchmark: rollout cost of PivotRL groups vs end-to-end groups, and pivot acceptance vs episode outcome.

    python bench/pivot_vs_e2e.py [--domain tool-use|terminal] [--model DIR] [--group 4] [--k 4]
        [--max-turns N] [--temperature T] [--trajectories N] [--outcome-episodes N] [--json OUT]

On the airline tasks (`--domain tool-use`: the bundled sample, or `--data`) or the synthesized
Terminal-Bench tasks (`--domain terminal`: the 3 bundled tasks and their 10 sandboxed pivots,
or `--data`), with one policy:

- (a) PivotRL: profile every pivot with K samples scored by the pivot env's chain (`env.score`;
  on terminal pivots the sandbox's `docker_shell` decides), keep D_adv (0 < mean, variance > 0),
  then draw one group of G completions at each D_adv pivot;
- (b) end-to-end: G episodes from each task's first pivot (its initial state) in the episode
  env (airline: the recorded user; terminal: a live container, scored by the task's own tests),
  each to its end or `--max-turns`.

For each way it counts rollout turns, generated tokens and wall time per group and per
non-zero-variance group (the groups GRPO learns from), and prints the ratios e2e / PivotRL
(the paper reports about 4x turns and 5.5x time for the same SWE-Bench score). It also gives
the Pearson correlation between the policy's pivot-level acceptance and its episode outcome
from the same pivots, over trajectories (means) and over pivots. A ratio or correlation that
cannot be computed is NaN, and `notes` says why. Wall times are on a shared machine: read the
ratios, not the seconds.

The policy: `--model`, else on airline the tiny test policy; on terminal the tiny test policy
fine-tuned further on the bundled terminal expert turns that fit its turn budget (it has seen
these tasks: the run measures cost and correlation, not generalisation). Its 512 positions
bound a terminal episode to 2 turns of up to 132 tokens: only hello-world is solvable end to
end (the first turn of the other two tasks writes a script of thousands of tokens).
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path and bench/profile.py shadows the stdlib
# `profile` module that torch imports (through cProfile); drop that folder before any import.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402

import gymnasium as gym  # noqa: E402

import pivot_envs  # noqa: E402, F401  (registers the env ids)


@dataclass
class Tally:
    """Rollout cost of one way of making groups."""

    groups: int = 0
    signal_groups: int = 0
    turns: int = 0
    tokens: int = 0
    seconds: float = 0.0
    seen: set[float] = field(default_factory=set)

    def add(self, rewards: list[float], turns: int, tokens: int, seconds: float) -> None:
        """Count one group."""
        self.groups += 1
        self.seen.update(rewards)
        self.turns, self.tokens, self.seconds = self.turns + turns, self.tokens + tokens, self.seconds + seconds
        if max(rewards) != min(rewards):
            self.signal_groups += 1

    def per_signal_group(self) -> dict[str, float]:
        """Cost per non-zero-variance group (inf when none came out).

        Every group costs its rollouts whether it turns out to carry signal or not, so the whole
        cost is divided by the groups that do.
        """
        n = self.signal_groups
        return {k: (v / n if n else math.inf) for k, v in self._totals().items()}

    def _totals(self) -> dict[str, float]:
        return {"turns": float(self.turns), "tokens": float(self.tokens), "seconds": self.seconds}

    def to_json(self) -> dict[str, object]:
        """JSON-ready summary."""
        return {
            "groups": self.groups,
            "nonzero_variance_groups": self.signal_groups,
            "turns": self.turns,
            "tokens": self.tokens,
            "seconds": round(self.seconds, 3),
            "rewards_seen": sorted(self.seen),
            "per_group": {k: v / max(self.groups, 1) for k, v in self._totals().items()},
            "per_nonzero_variance_group": self.per_signal_group(),
        }


def pearson(xs: list[float], ys: list[float]) -> float:
    """Pearson correlation (nan when either side is constant)."""
    n = len(xs)
    if n < 2:
        return math.nan
    mx, my = sum(xs) / n, sum(ys) / n
    sx = math.sqrt(sum((x - mx) ** 2 for x in xs))
    sy = math.sqrt(sum((y - my) ** 2 for y in ys))
    if sx == 0 or sy == 0:
        return math.nan
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / (sx * sy)


@dataclass(frozen=True)
class Domain:
    """What differs between the two domains: envs, and the turn and observation budgets of the tiny policy."""

    pivot_env: str
    episode_env: str
    max_new_tokens: int
    max_observation_tokens: int
    default_turns: int


DOMAINS = {
    # a whole tool call of the tiny policy; with 24-token observations, 5 turns fit its 512 positions
    "tool-use": Domain("pivot/tool-use-v0", "pivot/tool-use-episode-v0", 48, 24, 5),
    # the bundled tasks' short Terminus turns are up to 131 tokens; 2 such turns fit 512 positions
    "terminal": Domain("pivot/terminal-v0", "pivot/terminal-episode-v0", 132, 64, 2),
}
TERMINAL_TASKS = "terminal_tasks.jsonl"  # the 3 bundled Terminal-Bench tasks' sandboxed pivots


class Rollouts:
    """One policy sampling turns for both ways (the same prompt cuts and sampling code)."""

    def __init__(
        self, model_dir: str, cuts: tuple[int, int, float], domain: Domain, data: str | None, max_turns: int
    ) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from trainers.episodes import check_length
        from trainers.grpo import GRPOConfig

        self.cfg = GRPOConfig.from_flat(
            dict(  # the episode-mode config a training run would use, sampling settings only
                model=model_dir,
                episodes=True,
                env_id=domain.episode_env,
                max_history_messages=cuts[0],
                max_prompt_tokens=cuts[1],
                temperature=cuts[2],
                max_new_tokens=domain.max_new_tokens,
                max_observation_tokens=domain.max_observation_tokens,
                max_turns=max_turns,
            )
        )
        self.tok = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
        check_length(self.cfg, int(self.model.config.max_position_embeddings))
        kwargs = {"dataset": data} if data else {}
        self.episodes = gym.make(domain.episode_env, max_turns=max_turns, **kwargs).unwrapped
        self.pivot_env = gym.make(domain.pivot_env, pivots=self.episodes.pivots).unwrapped
        self.by_traj: dict[str, list] = {}
        for p in self.episodes.pivots:
            self.by_traj.setdefault(str(p.context["trajectory_id"]), []).append(p)

    def group(self, pivot, n: int, seed: int) -> tuple[list[float], int]:
        """N completions at `pivot`, scored by the pivot env's chain: (rewards, generated tokens)."""
        from trainers.episodes import sample_turn
        from trainers.grpo import encode_prompt

        prompt = encode_prompt(self.tok, pivot, self.cfg)
        turns = [sample_turn(self.model, self.tok, prompt, self.cfg, seed * 131 + i) for i in range(n)]
        texts = [self.tok.decode(t, skip_special_tokens=True) for t in turns]
        return [r.reward for r in self.pivot_env.score(pivot, texts)], sum(len(t) for t in turns)

    def episode(self, pivot_id: str, seed: int):
        """One episode from `pivot_id` (recorded user)."""
        from trainers.episodes import run_episode

        return run_episode(self.episodes, self.model, self.tok, pivot_id, self.cfg, seed)


def pivotrl(ro: Rollouts, trajs: list[str], k: int, g: int) -> tuple[Tally, dict[str, list[float]], int, Tally]:
    """Profile K per pivot, keep D_adv, then one group of G per D_adv pivot: (groups, acceptance, |D_adv|, profile)."""
    accept: dict[str, list[float]] = {}
    d_adv = []
    profile = Tally()  # every profiled pivot is a group of K: its cost is PivotRL's offline pass
    for t in trajs:
        for p in ro.by_traj[t]:
            t1 = time.perf_counter()
            rewards, tokens = ro.group(p, k, seed=1)
            profile.add(rewards, k, tokens, time.perf_counter() - t1)
            accept.setdefault(t, []).append(sum(rewards) / len(rewards))
            if 0 < sum(rewards) < len(rewards):
                d_adv.append(p)
    tally = Tally()
    for p in d_adv:
        t1 = time.perf_counter()
        rewards, tokens = ro.group(p, g, seed=2)
        tally.add(rewards, g, tokens, time.perf_counter() - t1)
    return tally, accept, len(d_adv), profile


def end_to_end(ro: Rollouts, trajs: list[str], g: int) -> Tally:
    """G episodes from each task's first pivot."""
    tally = Tally()
    for t in trajs:
        t1 = time.perf_counter()
        eps = [ro.episode(ro.by_traj[t][0].id, seed=3000 + j) for j in range(g)]
        turns, tokens = sum(e.turns for e in eps), sum(e.generated_tokens for e in eps)
        tally.add([e.reward for e in eps], turns, tokens, time.perf_counter() - t1)
    return tally


def outcomes_from_pivots(ro: Rollouts, trajs: list[str], n: int) -> dict[str, float]:
    """Per pivot, the mean outcome of `n` episodes started there."""
    return {p.id: sum(ro.episode(p.id, seed=5 + j).reward for j in range(n)) / n for t in trajs for p in ro.by_traj[t]}


def why_nan(name: str, values: list[float]) -> str | None:
    """The reason a correlation with this side is undefined, None when it varies."""
    if len(values) < 2:
        return f"{name}: fewer than 2 points"
    if max(values) == min(values):
        return f"{name} is constant ({values[0]:g} everywhere)"
    return None


def terminal_policy(folder: str, domain: Domain) -> tuple[str, tuple[int, int, float]]:
    """The tiny test policy fine-tuned on the bundled terminal expert turns that fit the turn budget (built once)."""
    from pivot_core import render_completion
    from pivot_demo.tiny_model import build_test_policy
    from pivot_envs._env import bundled_paths
    from trainers.sft import SFTConfig, train_sft

    tiny = build_test_policy(os.environ.get("PIVOT_TINY_POLICY_DIR", "runs/bench-tiny-policy"))
    cuts = (tiny.max_history_messages, tiny.max_prompt_tokens, 1.0)
    out = Path(folder)
    if (out / "config.json").is_file():
        return str(out), cuts
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny.path)
    episodes = gym.make(domain.episode_env, dataset=str(bundled_paths([TERMINAL_TASKS])[0])).unwrapped
    fits = [
        p
        for p in episodes.pivots
        if len(tok(render_completion(p.expert, "terminal"))["input_ids"]) < domain.max_new_tokens
    ]
    episodes.close()
    config = SFTConfig(
        steps=300,
        batch_size=8,
        lr=3e-3,
        max_history_messages=cuts[0],
        max_prompt_tokens=cuts[1],
        max_completion_tokens=domain.max_new_tokens,
    )
    train_sft(tiny.path, fits, out, config)
    return str(out), cuts


def writes(ro: Rollouts, trajectory: str) -> bool:
    """True when the task's gold actions change the database."""
    tools = ro.episodes.world.tools
    actions = ro.by_traj[trajectory][0].context["task"].get("actions") or ()
    return any(a.get("name") in tools and not tools[a["name"]].read_only for a in actions)


def main() -> None:
    """Run both ways and print the results (and write `--json`)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--domain", choices=sorted(DOMAINS), default="tool-use", help="airline or terminal tasks")
    ap.add_argument("--model", default=None, help="policy folder (default: a tiny policy, built once; see above)")
    ap.add_argument("--data", default=None, help="trajectories or pivots (default: the domain's bundled ones)")
    ap.add_argument("--group", type=int, default=4, help="G: completions or episodes per group")
    ap.add_argument("--k", type=int, default=4, help="K: samples per pivot when profiling for D_adv")
    ap.add_argument("--max-turns", type=int, default=None, help="turn budget of an episode (default: the domain's)")
    ap.add_argument("--temperature", type=float, default=None, help="sampling temperature (default: the policy's)")
    ap.add_argument("--trajectories", type=int, default=None, help="use the first N trajectories")
    ap.add_argument("--with-writes", action="store_true", help="airline: only tasks whose gold actions write")
    ap.add_argument("--pivots-per-trajectory", type=int, default=None, help="profile the first N pivots of each")
    ap.add_argument("--outcome-episodes", type=int, default=1, help="episodes per pivot for the correlation")
    ap.add_argument("--json", default=None, help="write the results here")
    args = ap.parse_args()

    from pivot_demo.tiny_model import build_test_policy
    from pivot_envs._env import bundled_paths

    domain = DOMAINS[args.domain]
    data = args.data
    if args.domain == "terminal" and data is None:
        data = str(bundled_paths([TERMINAL_TASKS])[0])
    if args.model is not None:
        model_dir, cuts = args.model, (4, 256, 1.0)
    elif args.domain == "terminal":
        model_dir, cuts = terminal_policy(
            os.environ.get("PIVOT_TERMINAL_POLICY_DIR", "runs/bench-terminal-policy"), domain
        )
    else:
        tiny = build_test_policy(os.environ.get("PIVOT_TINY_POLICY_DIR", "runs/bench-tiny-policy"))
        model_dir, cuts = str(tiny.path), (tiny.max_history_messages, tiny.max_prompt_tokens, tiny.temperature)
    if args.temperature is not None:
        cuts = (cuts[0], cuts[1], args.temperature)
    ro = Rollouts(model_dir, cuts, domain, data, args.max_turns or domain.default_turns)
    # A task whose gold actions write nothing is solved by any run that ends without writing (tau-bench's
    # rule): a passive policy scores 1 there, so --with-writes keeps the tasks that need an action.
    trajs = [t for t in ro.by_traj if not args.with_writes or writes(ro, t)][: args.trajectories]
    for t in trajs:
        ro.by_traj[t] = ro.by_traj[t][: args.pivots_per_trajectory]
    piv, accept, d_adv, profile = pivotrl(ro, trajs, args.k, args.group)
    e2e = end_to_end(ro, trajs, args.group)
    # correlation: pivot-level acceptance vs the episode outcome from the same pivots
    outcome = outcomes_from_pivots(ro, trajs, args.outcome_episodes)
    xs = [sum(accept[t]) / len(accept[t]) for t in trajs]
    ys = [sum(outcome[p.id] for p in ro.by_traj[t]) / len(ro.by_traj[t]) for t in trajs]
    px = [a for t in trajs for a in accept[t]]
    py = [outcome[p.id] for t in trajs for p in ro.by_traj[t]]
    a, b = piv.per_signal_group(), e2e.per_signal_group()
    ratios = {k: (b[k] / a[k] if a[k] not in (0, math.inf) and b[k] != math.inf else math.nan) for k in a}
    # per group of any outcome: what one group costs each way (PivotRL's groups: the profiled pivots' K)
    pa, pb = profile.to_json()["per_group"], e2e.to_json()["per_group"]
    per_group = {k: (pb[k] / pa[k] if pa[k] else math.nan) for k in pa}
    notes = []
    if not piv.signal_groups:
        notes.append(
            f"no PivotRL group mixed outcomes: D_adv is empty ({profile.groups} profiled pivots, each all-0 or all-1)"
            if not d_adv
            else f"none of the {piv.groups} groups drawn at the {d_adv} D_adv pivots mixed outcomes"
        )
    if not e2e.signal_groups:
        notes.append(f"no end-to-end group of {e2e.groups} mixed outcomes (episode rewards: {sorted(e2e.seen)})")
    if any(math.isnan(v) for v in ratios.values()):
        notes.append("ratio per non-zero-variance group is NaN: it needs such groups on both sides")
    for name, (x, y) in {"over trajectories": (xs, ys), "over pivots": (px, py)}.items():
        reasons = [r for r in (why_nan("pivot acceptance", x), why_nan("episode outcome", y)) if r]
        if reasons:
            notes.append(f"correlation {name} is NaN: {'; '.join(reasons)}")
    result = {
        "domain": args.domain,
        "model": model_dir,
        "temperature": cuts[2],
        "max_turns": ro.cfg.episode.max_turns,
        "trajectories": len(trajs),
        "pivots": sum(len(ro.by_traj[t]) for t in trajs),
        "d_adv": d_adv,
        "pivot_profile": profile.to_json(),
        "pivotrl": piv.to_json(),
        "end_to_end": e2e.to_json(),
        "ratio_e2e_over_pivotrl_per_nonzero_variance_group": ratios,
        "ratio_e2e_over_pivot_per_group": per_group,
        "pearson_pivot_acceptance_vs_episode_outcome": pearson(xs, ys),
        "pearson_per_pivot": pearson(px, py),
        "mean_pivot_acceptance": sum(xs) / len(xs),
        "mean_episode_outcome": sum(ys) / len(ys),
        "acceptance_and_outcome_per_pivot": {
            p.id: [a, outcome[p.id]] for t in trajs for p, a in zip(ro.by_traj[t], accept[t], strict=True)
        },
        "notes": notes,
    }
    print(json.dumps(result, indent=2, default=str))
    ro.episodes.close()
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    main()
