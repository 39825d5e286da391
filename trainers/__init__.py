"""Generation backends, offline profiling, the GRPO trainer, the SFT baseline and trainer adapters.

Heavy dependencies (torch, transformers, vllm, trl) are imported only inside `trainers.backends`
and `trainers.adapters` modules and the trainer modules that need them, never here.
"""

__all__: list[str] = []
