"""Rendering pivots with a policy's own chat template, and the rendering guard.

Only a tokenizer object is needed here (anything with `apply_chat_template`); no torch import.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pivot_core import Pivot
from trainers.backends._base import Prompt, as_chat, expert_message, template_messages, truncate_history


def render_prompt(tokenizer: Any, prompt: Prompt, max_history_messages: int | None = None) -> str:
    """The prompt text the policy sees: history (+ tools) rendered with `add_generation_prompt`."""
    chat = as_chat(prompt)
    messages = template_messages(truncate_history(chat["messages"], max_history_messages))
    return tokenizer.apply_chat_template(
        messages, tools=chat["tools"] or None, tokenize=False, add_generation_prompt=True
    )


def render_example(tokenizer: Any, pivot: Pivot, max_history_messages: int | None = None) -> dict[str, Any]:
    """History + expert turn tokenized, with a mask over the expert turn's tokens.

    The mask is the template's assistant-token mask (`{% generation %}` blocks) when the template
    has them. Stock templates (Qwen's, for one) have none: the expert turn is then the tokens of
    the full render after the tokens of the prompt render (`render_prompt`), up to and including
    the end-of-turn token, which is what a policy sampled from that prompt would have to produce.

    Returns:
        `{"input_ids": [...], "assistant_masks": [...]}`.

    Raises:
        ValueError: a template without generation blocks whose prompt does not tokenize as a
            prefix of the full conversation (the expert turn cannot be located).
    """
    chat = as_chat(pivot)
    history = truncate_history(chat["messages"], max_history_messages)
    tools = chat["tools"] or None
    messages = template_messages([*history, expert_message(pivot)])
    enc = tokenizer.apply_chat_template(
        messages, tools=tools, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    ids, mask = list(enc["input_ids"]), list(enc["assistant_masks"])
    if any(mask):
        return {"input_ids": ids, "assistant_masks": mask}
    prompt = tokenizer.apply_chat_template(
        template_messages(history), tools=tools, tokenize=False, add_generation_prompt=True
    )
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    if ids[: len(prompt_ids)] != prompt_ids:
        raise ValueError(
            f"pivot {pivot.id}: the template has no generation blocks and the prompt does not tokenize as a "
            "prefix of prompt + expert turn, so the expert turn's tokens cannot be located"
        )
    end = len(ids)
    eos = tokenizer.eos_token_id
    tail = ids[len(prompt_ids) :]
    if eos is not None and eos in tail:  # stop after the end of turn: what follows it is the next turn's framing
        end = len(prompt_ids) + tail.index(eos) + 1
    return {
        "input_ids": ids,
        "assistant_masks": [0] * len(prompt_ids) + [1] * (end - len(prompt_ids)) + [0] * (len(ids) - end),
    }


@dataclass(frozen=True)
class GuardIssue:
    """A pivot whose prompt is not a prefix of prompt + expert action under the template.

    Attributes:
        pivot_id: the pivot.
        problem: what differs ("prompt is not a prefix ..." with the first differing offset).
        prompt_tail: the last characters of the rendered prompt, for a quick look.
        full_at_offset: the rendered conversation around the first difference.
    """

    pivot_id: str
    problem: str
    prompt_tail: str = ""
    full_at_offset: str = ""

    def to_json(self) -> dict[str, str]:
        """JSON-ready dict."""
        return dict(self.__dict__)


def _first_difference(a: str, b: str) -> int:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def rendering_guard(
    tokenizer: Any, pivots: Iterable[Pivot], max_history_messages: int | None = None
) -> list[GuardIssue]:
    """Report pivots whose rendered history is not a prefix of the rendered history + expert turn.

    Templates that rewrite earlier turns once a later one exists (e.g. dropping reasoning from
    past assistant turns) make the profiled/trained prompt differ from the one at deployment,
    so the policy would be scored in a state it never sees. A template that cannot render the
    pivot at all is reported too, and so is one that renders a pivot with tools exactly as without
    them (SmolLM2's stock template, for one): the policy would be asked to call tools it was never
    shown.
    """
    issues = []
    for pivot in pivots:
        chat = as_chat(pivot)
        history = truncate_history(chat["messages"], max_history_messages)
        tools = chat["tools"] or None
        try:
            prompt = tokenizer.apply_chat_template(
                template_messages(history), tools=tools, tokenize=False, add_generation_prompt=True
            )
            full = tokenizer.apply_chat_template(
                template_messages([*history, expert_message(pivot)]), tools=tools, tokenize=False
            )
            bare = tokenizer.apply_chat_template(
                template_messages(history), tools=None, tokenize=False, add_generation_prompt=True
            )
        except Exception as e:  # a template error is exactly what the guard exists to report
            issues.append(GuardIssue(pivot.id, f"template failed: {type(e).__name__}: {e}"))
            continue
        if tools and bare == prompt:
            names = [t.get("function", t).get("name", "?") for t in tools]
            problem = f"template drops `tools`: {len(tools)} tools ({names[:3]}) not rendered"
            issues.append(GuardIssue(pivot.id, problem))
        if not full.startswith(prompt):
            at = _first_difference(prompt, full)
            issues.append(
                GuardIssue(
                    pivot.id,
                    f"prompt is not a prefix of prompt + expert action (first difference at char {at})",
                    prompt_tail=prompt[max(0, at - 80) : at + 80],
                    full_at_offset=full[max(0, at - 80) : at + 80],
                )
            )
    return issues


def tool_schemas(prompt: Prompt) -> list[Mapping[str, Any]]:
    """The tools of a prompt (OpenAI function schemas)."""
    return as_chat(prompt)["tools"]
