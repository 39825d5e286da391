"""What an uncut tau-bench prompt costs the demo's policy on this machine, against the demo's cut.

`bench/copy_ceiling.py` shows that a perfect copier gets at most 0.40 of the held-out airline calls
at the demo's prompt cut (4 messages, 256 tokens) and 0.93 with the whole prompt. This times the
two kinds of work every stage is made of, on the demo's model shape (`PRETRAIN_MODEL`, its
position table widened to hold a whole prompt) and real held-out pivots, under both cuts:

- a training step (`train_sft`'s: forward, backward, clip, AdamW) on a batch of `--batch` pivots,
  whole under the demo's cut and in micro-batches of `--micro` uncut (a whole batch of 16 uncut
  prompts did not fit this machine's 24 GiB: the attention of 5,000-token rows);
- sampling (`TransformersBackend.generate`): `--prompts` prompts x `--n` completions of the demo's
  96-token budget at T=0.7. The model is freshly initialised, so it rarely stops early: both cuts
  generate their whole budget and the comparison is like for like.

It prints seconds per unit under each cut and the ratio, then what the ratios make of the stages of
a measured demo run (`--stages results.json`: its `stages`; default: the whole `--data synthetic`
run in docs/training.md). The projection multiplies each stage by the ratio of the work it is
made of (pretrain, sft: training steps; profile, eval: sampling; arms: the mean of the two);
the copy drills keep their short prompts, so `--drill-share` of pretraining is left as it was.

    python bench/prompt_length_cost.py [--data FILE] [--batch 16] [--prompts 4] [--n 4] [--repeats 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# The whole `pivot demo pivotrl --data synthetic` run of docs/training.md (2026-12-01, one thread).
MEASURED_STAGES = {"pretrain": 1613.1, "sft": 278.2, "profile": 185.1, "arms": 880.5, "eval": 301.0}
WORK = {"pretrain": "train", "sft": "train", "profile": "sample", "eval": "sample", "arms": "both"}
CUTS = {"demo (4 messages : 256 tokens)": (4, 256), "uncut": (None, None)}


def timed(fn, repeats: int) -> float:
    """Median wall seconds of `repeats` calls after one warm-up call."""
    fn()
    runs = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=None, help="airline pivots (default: the demo's)")
    parser.add_argument("--batch", type=int, default=16, help="pivots per training step (pretraining's)")
    parser.add_argument("--micro", type=int, default=2, help="pivots per forward pass, uncut")
    parser.add_argument("--prompts", type=int, default=4, help="prompts per sampling call")
    parser.add_argument("--n", type=int, default=4, help="completions per prompt")
    parser.add_argument("--budget", type=int, default=96, help="completion budget in tokens (the demo's)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the demo uses 1 on a busy machine)")
    parser.add_argument("--stages", type=Path, default=None, help="a demo's --json output to project")
    # the synthetic run's pretraining is copy drills only (`DemoConfig.on_synthetic`: no conversation steps)
    parser.add_argument("--drill-share", type=float, default=1.0, help="share of pretraining spent on drills")
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pivot_cli._common import print_table
    from pivot_core import load_pivots, split_pivots
    from pivot_demo import default_data
    from pivot_demo.pretrain import PRETRAIN_MODEL
    from pivot_demo.synthetic import world_words
    from pivot_demo.tiny_model import build_tiny_model
    from trainers.backends._base import SamplingParams
    from trainers.backends._transformers import TransformersBackend, TransformersConfig
    from trainers.sft import SFTConfig, _collate, build_example
    from verifiers_plugins import get_host

    torch.set_num_threads(opts.threads)
    data = opts.data or default_data()
    split = split_pivots(list(load_pivots(data)), heldout=0.2, by="auto", seed=0)
    calls = [p for p in split.heldout if p.expert.tool_calls]
    world = get_host().get("tool_worlds", "tau-airline")()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        build_tiny_model(
            folder,
            pivots=list(split.train),
            config=replace(PRETRAIN_MODEL, max_positions=8192),
            words=world_words(world),
        )
        tokenizer = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        params = SamplingParams(max_new_tokens=opts.budget, temperature=0.7, seed=0)
        # evenly spaced held-out calls, the same ones under both cuts
        chosen = calls[:: max(1, len(calls) // opts.batch)][: opts.batch]
        for name, (history, tokens) in CUTS.items():
            sft = SFTConfig(max_history_messages=history, max_prompt_tokens=tokens, max_completion_tokens=opts.budget)
            examples = [build_example(tokenizer, p, sft) for p in chosen]
            micro = len(examples) if tokens is not None else opts.micro
            chunks = [_collate(examples[i : i + micro], pad) for i in range(0, len(examples), micro)]

            def train_step(chunks=chunks) -> None:
                model.train()
                opt.zero_grad(set_to_none=True)
                for chunk in chunks:  # accumulated: the same tokens through forward and backward as one batch
                    (model(**chunk).loss / len(chunks)).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()

            backend = TransformersBackend(
                TransformersConfig(
                    folder, max_history_messages=history, max_prompt_tokens=tokens, batch_size=opts.prompts
                ),
                model=model,
                tokenizer=tokenizer,
            )
            prompts = chosen[: opts.prompts]
            lengths = [len(backend.encode(p)) for p in chosen]
            rows.append(
                {
                    "cut": name,
                    "micro_batch": micro,
                    "prompt_tokens_median": statistics.median(lengths),
                    "prompt_tokens_max": max(lengths),
                    "train_step_s": timed(train_step, opts.repeats),
                    "sample_s": timed(lambda b=backend, p=prompts: b.generate(p, opts.n, params), opts.repeats),
                }
            )
    base, uncut = rows
    ratio = {
        "train": uncut["train_step_s"] / base["train_step_s"],
        "sample": uncut["sample_s"] / base["sample_s"],
    }
    ratio["both"] = (ratio["train"] + ratio["sample"]) / 2
    measured = json.loads(opts.stages.read_text())["stages"] if opts.stages else MEASURED_STAGES
    projected = {}
    for stage, seconds in measured.items():
        if stage not in WORK:
            continue
        scaled = seconds * ratio[WORK[stage]]
        if stage == "pretrain":  # drills keep their 64-token prompts
            scaled = seconds * (opts.drill_share + (1 - opts.drill_share) * ratio["train"])
        projected[stage] = {"measured_s": seconds, "projected_s": round(scaled, 1)}
    total = (sum(v["measured_s"] for v in projected.values()), sum(v["projected_s"] for v in projected.values()))
    result = {
        "data": str(data),
        "threads": opts.threads,
        "rows": rows,
        "ratio": ratio,
        "stages": projected,
        "total": total,
    }
    if opts.json:
        print(json.dumps(result, indent=2))
        return
    print_table(
        f"{data.name}: {len(chosen)} held-out tool calls, PRETRAIN_MODEL shape, {opts.threads} torch thread(s)",
        ["cut", "prompt tokens (median / max)", "micro-batch", "train step (s)", "sample (s)"],
        [
            *(
                [r["cut"], f"{r['prompt_tokens_median']:.0f} / {r['prompt_tokens_max']}", r["micro_batch"]]
                + [f"{r['train_step_s']:.2f}", f"{r['sample_s']:.2f}"]
                for r in rows
            ),
            ["uncut / demo", "", "", f"{ratio['train']:.1f}x", f"{ratio['sample']:.1f}x"],
        ],
    )
    print_table(
        f"stages projected uncut ({total[1] / 3600:.1f} h against the 1 h budget)",
        ["stage", "measured (s)", "projected uncut (s)"],
        [[stage, f"{v['measured_s']:.0f}", f"{v['projected_s']:.0f}"] for stage, v in projected.items()]
        + [["total", f"{total[0]:.0f}", f"{total[1]:.0f}"]],
    )


if __name__ == "__main__":
    main()
