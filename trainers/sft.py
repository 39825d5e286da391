"""Same-data SFT: fine-tune a causal LM on the expert actions of pivots (the paper's SFT baseline).

Each pivot becomes one example: its (truncated) history and expert turn rendered with the model's
own chat template. The loss covers only the expert turn, found through the template's assistant
mask (`{% generation %}` blocks): the last run of masked tokens. Earlier assistant turns in the
history are context, not targets (they are pivots of their own). The loop is a plain AdamW loop,
short enough to read top to bottom; prompts are cut exactly as the generation backends cut them,
so the model is trained on the prompts it is later sampled from.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pivot_core import Pivot
from trainers.backends._chat import render_example
from trainers.settings import SETTINGS_FILE, StageSettings

PROMPT_CUTS_FILE = SETTINGS_FILE  # the old name, kept for callers


def prompt_cuts(model_dir: str | Path) -> dict[str, Any]:
    """The stage settings a model was trained with as a dict (`{}` when the folder has none)."""
    settings = StageSettings.load(model_dir)
    return settings.to_json() if settings is not None else {}


@dataclass(frozen=True)
class SFTConfig:
    """Supervised fine-tuning on expert actions.

    Attributes:
        steps: optimizer steps.
        batch_size: examples per step.
        lr: peak learning rate (linear warm-up, cosine decay to 10 %).
        warmup_steps: steps of linear warm-up.
        weight_decay: AdamW weight decay.
        max_history_messages: history messages kept before the expert turn (None keeps all);
            use the same value when sampling.
        max_prompt_tokens: prompt tokens kept (the last ones); use the same value when sampling.
        max_completion_tokens: expert-turn tokens trained on (the first ones).
        temperature: the sampling temperature recorded with the model (its stage settings).
        seed: seeds the batch order and dropout-free init of the optimizer state.
        log_every: steps between loss reports.
    """

    # -- optimisation
    steps: int = 200
    batch_size: int = 8
    lr: float = 3e-3
    warmup_steps: int = 10
    weight_decay: float = 0.0
    # -- data
    max_history_messages: int | None = 4
    max_prompt_tokens: int | None = 256
    max_completion_tokens: int = 128
    temperature: float = 1.0
    # -- bookkeeping
    seed: int = 0
    log_every: int = 10

    def __post_init__(self) -> None:
        if self.steps < 0 or self.batch_size < 1:
            raise ValueError(f"SFTConfig: expected steps >= 0 and batch_size >= 1, got {self.steps}, {self.batch_size}")
        if self.lr <= 0:
            raise ValueError(f"SFTConfig.lr: expected > 0, got {self.lr}")
        if self.max_completion_tokens < 1:
            raise ValueError(f"SFTConfig.max_completion_tokens: expected >= 1, got {self.max_completion_tokens}")

    @classmethod
    def from_settings(cls, settings: StageSettings, **fields: Any) -> SFTConfig:
        """A run on the prompt cuts and completion budget of `settings`; the other fields from `fields`."""
        return cls(
            max_history_messages=settings.max_history_messages,
            max_prompt_tokens=settings.max_prompt_tokens,
            max_completion_tokens=settings.max_new_tokens,
            temperature=settings.temperature,
            **fields,
        )

    def settings(self) -> StageSettings:
        """The stage settings this run trains with (saved beside the weights)."""
        return StageSettings(
            self.max_history_messages, self.max_prompt_tokens, self.max_completion_tokens, self.temperature
        )


@dataclass(frozen=True)
class Example:
    """One tokenized training example: ids, labels (-100 outside the expert turn), and whether the turn was cut."""

    input_ids: tuple[int, ...]
    labels: tuple[int, ...]
    cut: bool = field(default=False, compare=False)


def expert_span(mask: Sequence[int]) -> tuple[int, int]:
    """`(start, end)` of the last run of 1s in an assistant mask: the expert turn."""
    end = len(mask)
    while end > 0 and not mask[end - 1]:
        end -= 1
    start = end
    while start > 0 and mask[start - 1]:
        start -= 1
    if start == end:
        raise ValueError("the chat template marked no assistant tokens: it needs {% generation %} blocks")
    return start, end


def build_example(tokenizer: Any, pivot: Pivot, config: SFTConfig) -> Example:
    """Tokenize one pivot and label only its expert turn (its first `max_completion_tokens` tokens)."""
    enc = render_example(tokenizer, pivot, config.max_history_messages)
    start, full_end = expert_span(enc["assistant_masks"])
    end = min(full_end, start + config.max_completion_tokens)
    prompt = enc["input_ids"][:start]
    if config.max_prompt_tokens is not None:
        prompt = prompt[-config.max_prompt_tokens :]
    target = enc["input_ids"][start:end]
    return Example(tuple(prompt + target), tuple([-100] * len(prompt) + target), cut=end < full_end)


def _lr_at(step: int, config: SFTConfig) -> float:
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    return config.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def _collate(batch: Sequence[Example], pad_id: int) -> dict[str, Any]:
    import torch

    width = max(len(e.input_ids) for e in batch)
    ids = [list(e.input_ids) + [pad_id] * (width - len(e.input_ids)) for e in batch]
    labels = [list(e.labels) + [-100] * (width - len(e.labels)) for e in batch]
    mask = [[1] * len(e.input_ids) + [0] * (width - len(e.input_ids)) for e in batch]
    return {"input_ids": torch.tensor(ids), "labels": torch.tensor(labels), "attention_mask": torch.tensor(mask)}


def train_sft(
    model_dir: str | Path,
    pivots: Sequence[Pivot],
    out: str | Path,
    config: SFTConfig | None = None,
    log: Callable[[int, dict[str, float]], None] | None = None,
) -> dict[str, Any]:
    """Fine-tune the model in `model_dir` on the pivots' expert turns and save it to `out`.

    Args:
        model_dir: a causal LM folder whose tokenizer has a chat template with generation blocks.
        pivots: training pivots (their expert turns are the targets).
        out: where the fine-tuned model and tokenizer are written.
        config: hyperparameters.
        log: called as `log(step, {"loss/train": ..., "perf/lr": ...})` every `log_every` steps.

    Returns:
        A summary: steps, examples, first and last logged loss, seconds, output path.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    config = config or SFTConfig()
    if not pivots:
        raise ValueError("train_sft: expected at least one pivot, got none")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    examples = [build_example(tokenizer, p, config) for p in pivots]
    # a target cut by the budget can never be sampled whole: say how many there are
    cut = sum(e.cut for e in examples)
    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    losses: list[float] = []
    started = time.perf_counter()
    order: list[int] = []
    for step in range(config.steps):
        # ---- batch: walk a shuffled epoch, reshuffle when it runs out
        while len(order) < config.batch_size:  # a batch larger than the data spans several epochs
            order += rng.sample(range(len(examples)), len(examples))
        batch, order = [examples[i] for i in order[: config.batch_size]], order[config.batch_size :]
        # ---- loss on expert-turn tokens, optimizer step
        for group in opt.param_groups:
            group["lr"] = _lr_at(step, config)
        loss = model(**_collate(batch, pad_id)).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(float(loss.detach()))
        if log and (step + 1) % config.log_every == 0:
            recent = losses[-config.log_every :]
            log(step + 1, {"loss/train": sum(recent) / len(recent), "perf/lr": _lr_at(step, config)})
    summary = _save(model, tokenizer, Path(out), config, len(examples), losses, time.perf_counter() - started)
    return {**summary, "targets_cut": int(cut)}


def _save(
    model: Any, tokenizer: Any, out: Path, config: SFTConfig, examples: int, losses: list[float], seconds: float
) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    settings = config.settings()
    settings.save(out)
    return {
        "output": str(out),
        "steps": config.steps,
        "examples": examples,
        "first_loss": losses[0] if losses else None,
        "last_loss": sum(losses[-5:]) / len(losses[-5:]) if losses else None,
        "seconds": round(seconds, 2),
        "config": asdict(config),
    }
