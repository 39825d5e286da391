"""GRPO step on a ~50M-parameter tiny model: time split generation / verification / update.

On a GPU machine (the intended run):   python bench/gpu_check.py
On CPU (to check the script itself):   python bench/gpu_check.py --cpu --size 1m --steps 1

Compares ways of running the same step in one run and prints a table with the ratio to the first
row: fp32 full fine-tuning, bf16 autocast (GPU only), and LoRA r=16. The model is built in-process
from the bundled pivots (no download), so the GPU machine needs no network.
"""

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

import pivot_envs  # noqa: F401
from trainers.demo.tiny_model import TinyModelConfig, build_tiny_model
from trainers.grpo import GRPOConfig, GRPOTrainer

SIZES = {
    # ~50M parameters: 10 layers x (attention 1.6M + MLP 3.4M) + embeddings
    "50m": TinyModelConfig(hidden_size=640, num_layers=10, num_heads=10, num_kv_heads=5, intermediate_size=1792),
    "1m": TinyModelConfig(),
}


def run(model_dir: Path, device: str, steps: int, **overrides) -> dict:
    cfg = GRPOConfig.from_flat(
        dict(
            model=str(model_dir),
            device=device,
            steps=steps,
            output_dir=tempfile.mkdtemp(),
            pivots_per_step=4,
            group_size=8,
            max_new_tokens=64,
            max_prompt_tokens=512,
            **overrides,
        )
    )
    trainer = GRPOTrainer(cfg)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    rows = []
    for _ in range(steps):
        t = time.perf_counter()
        m = trainer.step()
        m["perf/step_s"] = time.perf_counter() - t
        rows.append(m)
    last = rows[-1]  # the first step includes warm-up (kernels, allocator)
    return {
        "gen_s": last["perf/time_generate"],
        "verify_s": last["perf/time_verify"],
        "update_s": last["perf/time_update"],
        "step_s": last["perf/step_s"],
        "tokens_per_s": last["perf/tokens_per_s"],
        "loss_finite": all(r["loss/total"] == r["loss/total"] for r in rows),
        "peak_gib": torch.cuda.max_memory_allocated() / 2**30 if device.startswith("cuda") else float("nan"),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpu", action="store_true", help="run on CPU (bf16 row skipped)")
    ap.add_argument("--size", choices=sorted(SIZES), default="50m")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--model-dir", type=Path, help="reuse a built model folder")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args()
    device = "cpu" if args.cpu else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: pass --cpu to check the script on CPU")
    model_dir = args.model_dir or Path(tempfile.mkdtemp()) / "tiny"
    if not (model_dir / "config.json").exists():
        info = build_tiny_model(model_dir, config=SIZES[args.size])
        print(f"built {model_dir}: {info['parameters'] / 1e6:.1f}M parameters")
    modes = {"fp32 full": {}, "fp32 LoRA r=16": {"lora_rank": 16}}
    if device == "cuda":
        modes = {"fp32 full": {}, "bf16 full": {"bf16": True}, "bf16 LoRA r=16": {"bf16": True, "lora_rank": 16}}
    results = {name: run(model_dir, device, args.steps, **kw) for name, kw in modes.items()}
    base = next(iter(results.values()))["step_s"]
    print(f"device={device} size={args.size} P=4 G=8 max_new_tokens=64 (last of {args.steps} steps)")
    print(
        f"{'mode':<18}{'gen s':>8}{'verify s':>10}{'update s':>10}{'step s':>8}{'tok/s':>8}{'peak GiB':>10}{'ratio':>7}"
    )
    for name, r in results.items():
        print(
            f"{name:<18}{r['gen_s']:>8.2f}{r['verify_s']:>10.3f}{r['update_s']:>10.2f}{r['step_s']:>8.2f}"
            f"{r['tokens_per_s']:>8.0f}{r['peak_gib']:>10.2f}{r['step_s'] / base:>7.2f}"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
