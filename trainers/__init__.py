"""Generation backends, offline profiling, the GRPO trainer, the SFT baseline and trainer adapters.

Heavy dependencies (torch, transformers, vllm, trl) are imported only inside `trainers.backends`
and `trainers.adapters` modules and the trainer modules that need them, never here.

`render_prompt(tokenizer, prompt, max_history_messages)` is the prompt text every trainer here
samples from and trains on (the backends then keep the last `max_prompt_tokens` tokens of it);
adapters reuse it so that other trainers see the same prompts.
"""

from trainers._vllm_sync import ColocatedVLLM
from trainers.backends._chat import render_prompt
from trainers.errors import BackendError

__all__ = ["BackendError", "ColocatedVLLM", "render_prompt"]
