"""Is a GRPO step on these pivots anything but a noisy, reweighted SFT step? Measured on a policy.

For one pivot with reward r(y) in {0, 1}, acceptance p = E[r] and group-normalised advantages,
the expected GRPO policy gradient is E[A(y) grad log pi(y)] = grad p / std(r), and
grad p = sum over accepted y of pi(y) grad log pi(y). When the verifier accepts one completion
only (the expert's action: the acceptable set A = {y*}), grad p = p grad log pi(y*), so

    E[GRPO gradient] = sqrt(p / (1 - p)) * grad log pi(y*)

which is the SFT gradient on the same pivot times a per-pivot weight: GRPO can then differ from
same-data SFT only by how it weighs pivots and by its sampling noise, never by where it moves
the policy. PivotRL's functional reward differs from SFT (and from a strict reward) only through
pivots whose acceptable set holds more than the expert's action.

This samples G completions per pivot from a model, scores them through the env's one scoring path
(the default, functional chain, and `exact_match`), and prints per pivot: acceptance under each,
the distinct accepted completions (the acceptable set the policy reaches), and the cosine between
the GRPO gradient of the group (the trainer's own loss, beta 0) and the SFT gradient on the expert's
turn (the sft arm's own example and loss), for a group of 8 (what training uses) and of G.

    python bench/grpo_vs_sft_gradient.py --model runs/pivotrl-demo/sft --pivots runs/pivotrl-demo/d_adv.jsonl \
        [--n 12] [--group 64] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def flat_grad(model, loss):
    """The gradient of `loss` over the model's trainable parameters, as one vector."""
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    pairs = zip(grads, params, strict=True)
    return torch.cat([(g if g is not None else torch.zeros_like(p)).flatten() for g, p in pairs])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, type=Path, help="policy folder (its saved stage settings apply)")
    parser.add_argument("--pivots", required=True, type=Path, help="pivots (e.g. D_adv: mixed under the policy)")
    parser.add_argument("--n", type=int, default=12, help="pivots measured (the first with mixed rewards)")
    parser.add_argument("--turns", choices=("tool", "text", "all"), default="tool", help="which expert turns")
    parser.add_argument("--group", type=int, default=64, help="completions sampled per pivot")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    import gymnasium as gym
    import torch

    import pivot_envs  # noqa: F401
    from pivot_core import load_pivots
    from trainers._advantages import group_normalized
    from trainers._batch import completion_logprobs, pad_batch
    from trainers._losses import batch_denominator
    from trainers.grpo import GRPOConfig, GRPOTrainer
    from trainers.settings import settings_of
    from trainers.sft import SFTConfig, build_example

    torch.set_num_threads(1)
    s = settings_of(args.model)
    pivots = list(load_pivots(args.pivots))
    with tempfile.TemporaryDirectory() as out:
        cfg = GRPOConfig.from_flat(
            dict(
                model=str(args.model),
                pivots=str(args.pivots),
                output_dir=out,
                group_size=args.group,
                beta=0.0,
                steps=1,
                max_new_tokens=s.max_new_tokens,
                max_prompt_tokens=s.max_prompt_tokens,
                max_history_messages=s.max_history_messages,
                temperature=s.temperature,
                seed=args.seed,
            )
        )
        trainer = GRPOTrainer(cfg)
        strict = gym.make(cfg.env_id, pivots=pivots, verifiers=["exact_match"]).unwrapped
        pad = trainer.tokenizer.pad_token_id or 0
        policy = trainer.policy
        policy.eval()  # no dropout: the gradients compared are of one function

        def grpo_grad(prompt, completions, rewards):
            adv = group_normalized(torch.tensor([rewards], dtype=torch.float32)).flatten()
            t = pad_batch([prompt] * len(completions), completions, pad, "cpu")
            logp, _ = trainer.logprobs(policy, t)
            obj = cfg.objective
            terms = trainer.loss_fn(
                logp, logp.detach(), None, adv, t["completion_mask"], clip_low=obj.clip_eps, clip_high=obj.clip_eps,
                beta=0.0, denominator=batch_denominator(obj.loss, t["completion_mask"], cfg.completion_budget),
                max_tokens=cfg.completion_budget,
            )  # fmt: skip
            return flat_grad(policy, terms.loss)

        sft_cfg = SFTConfig.from_settings(s, steps=1)

        def sft_grad(pivot):
            # the sft arm's own example (prompt cut, expert target) and loss (token mean, raw logits)
            ex = build_example(trainer.tokenizer, pivot, sft_cfg)
            start = sum(1 for label in ex.labels if label == -100)
            t = pad_batch([list(ex.input_ids[:start])], [list(ex.input_ids[start:])], pad, "cpu")
            logp, _ = completion_logprobs(policy, t, 1.0)
            return flat_grad(policy, -(logp * t["completion_mask"]).sum() / t["completion_mask"].sum())

        rows = []
        chosen = [p for p in pivots if args.turns == "all" or (args.turns == "tool") == bool(p.expert.tool_calls)]
        for i, pivot in enumerate(chosen):
            if len(rows) >= args.n:
                break
            (group,) = trainer.generate([pivot], seed=args.seed * 1_000 + i)
            results = trainer.env.score(pivot, [g.text for g in group])
            rewards = [float(r.accepted and r.error is None) for r in results]
            if not 0 < sum(rewards) < len(rewards):
                continue  # equal rewards: no GRPO gradient to compare
            exact = [float(r.accepted) for r in strict.score(pivot, [g.text for g in group])]
            prompt = trainer.encode(pivot)
            comps = [list(g.token_ids) for g in group]
            accepted = [c for c, r in zip(comps, rewards, strict=True) if r]
            g_sft = sft_grad(pivot)
            cos = {}
            for size in sorted({8, args.group}):
                sub, sub_r = comps[:size], rewards[:size]
                if 0 < sum(sub_r) < len(sub_r):
                    g = -grpo_grad(prompt, sub, sub_r)  # the direction a descent step moves the weights
                    cos[size] = float(torch.nn.functional.cosine_similarity(g, -g_sft, dim=0))
            rows.append(
                {
                    "pivot": pivot.id,
                    "tool": pivot.expert.tool_calls[0].name if pivot.expert.tool_calls else "text",
                    "accept": sum(rewards) / len(rewards),
                    "accept_exact": sum(exact) / len(exact),
                    "distinct_accepted": len({g.text.strip() for g, r in zip(group, rewards, strict=True) if r}),
                    "distinct_accepted_tokens": len({tuple(c) for c in accepted}),
                    "cos": cos,
                }
            )
            print(f"  {len(rows)}/{args.n} {pivot.id}", file=sys.stderr)
    if args.json:
        print(json.dumps({"group": args.group, "rows": rows}, indent=1))
        return
    print(f"| pivot | tool | accept (functional) | accept (exact) | distinct accepted | cos G=8 | cos G={args.group} |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        c8, cg = r["cos"].get(8), r["cos"].get(args.group)
        print(
            f"| {r['pivot']} | {r['tool']} | {r['accept']:.2f} | {r['accept_exact']:.2f} | {r['distinct_accepted']} | "
            f"{'-' if c8 is None else f'{c8:.2f}'} | {'-' if cg is None else f'{cg:.2f}'} |"
        )
    for size in sorted({8, args.group}):
        vals = [r["cos"][size] for r in rows if size in r["cos"]]
        if vals:
            median = statistics.median(vals)
            print(f"median cosine(GRPO, SFT on the expert) at G={size}: {median:.2f} over {len(vals)} pivots")
    gap = sum(r["accept"] - r["accept_exact"] for r in rows) / max(1, len(rows))
    print(f"functional minus exact acceptance, mean over pivots: {gap:+.3f}")


if __name__ == "__main__":
    main()
