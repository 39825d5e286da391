import gymnasium as gym
import pytest

import pivot_envs  # noqa: F401
from pivot_core._render import render_completion
from pivot_demo.tiny_model import CHAT_TEMPLATE, build_tokenizer, bundled_pivots, corpus_texts
from trainers.backends import render_example, render_prompt, rendering_guard
from trainers.backends._base import as_chat, expert_message, template_messages
from trainers.sft import expert_span


@pytest.fixture(scope="module")
def tokenizer():
    from pivot_demo.tiny_model import _bootstrap_tokenizer

    pivots = bundled_pivots()
    return build_tokenizer(corpus_texts(pivots, _bootstrap_tokenizer()), 600)


def test_template_renders_expert_turn_exactly_as_the_env_completion(tokenizer):
    pivots = bundled_pivots()
    assert len(pivots) > 20
    for p in pivots:
        prompt = render_prompt(tokenizer, p)
        chat = as_chat(p)
        full = tokenizer.apply_chat_template(
            template_messages([*chat["messages"], expert_message(p)]), tools=chat["tools"] or None, tokenize=False
        )
        assert full.startswith(prompt), p.id
        assert full[len(prompt) :] == render_completion(p.expert, p.domain) + "<|im_end|>\n", p.id


def test_tool_calls_render_in_hermes_form_and_parse_back():
    env = gym.make("pivot/tool-use-v0").unwrapped
    p = next(p for p in env.pivots if p.expert.is_tool_call)
    completion = render_completion(p.expert, p.domain)
    assert completion.count("<tool_call>") == len(p.expert.tool_calls)
    assert [c.name for c in env.parse(completion).tool_calls] == [c.name for c in p.expert.tool_calls]
    env.reset(options={"pivot_id": p.id})
    assert env.step(completion)[1] == 1.0


def test_assistant_mask_marks_exactly_the_expert_turn_last(tokenizer):
    env = gym.make("pivot/tool-use-v0").unwrapped
    for p in env.pivots:
        enc = render_example(tokenizer, p, max_history_messages=4)
        start, end = expert_span(enc["assistant_masks"])
        text = tokenizer.decode(enc["input_ids"][start:end])
        assert text == render_completion(p.expert, p.domain) + "<|im_end|>", p.id
        # Only assistant turns are marked: no user/tool/system text leaks into the loss.
        marked = tokenizer.decode([t for t, m in zip(enc["input_ids"], enc["assistant_masks"], strict=True) if m])
        assert "<|im_start|>" not in marked and "<tool_response>" not in marked


def test_tag_tokens_survive_decoding(tokenizer):
    ids = tokenizer("<tool_call>\n{}\n</tool_call>", add_special_tokens=False)["input_ids"]
    assert tokenizer.convert_tokens_to_ids("<tool_call>") in ids
    assert "<tool_call>" in tokenizer.decode(ids, skip_special_tokens=True)


def test_rendering_guard_passes_chatml_and_reports_a_template_that_rewrites_history(tokenizer):
    pivots = bundled_pivots()
    assert rendering_guard(tokenizer, pivots) == []
    # A template that renders the last message differently from earlier ones (as reasoning
    # templates do) breaks the prefix property; the guard must say which pivots.
    bad = CHAT_TEMPLATE.replace("{{ m.content }}<|im_end|>", "{{ m.content }}{% if loop.last %}!{% endif %}<|im_end|>")
    assert bad != CHAT_TEMPLATE
    tokenizer.chat_template = bad
    try:
        issues = rendering_guard(tokenizer, pivots[:10])
    finally:
        tokenizer.chat_template = CHAT_TEMPLATE
    assert issues and all("not a prefix" in i.problem for i in issues)
    assert {i.pivot_id for i in issues} <= {p.id for p in pivots[:10]}


def test_rendering_guard_reports_a_template_that_drops_tools(tokenizer):
    # SmolLM2's stock template has no place for tools: the policy would never see what it may call
    pivots = [p for p in bundled_pivots() if p.tools][:5]
    tokenizer.chat_template = CHAT_TEMPLATE.replace("if sys or tools", "if sys").replace("if tools", "if false")
    try:
        issues = rendering_guard(tokenizer, pivots)
    finally:
        tokenizer.chat_template = CHAT_TEMPLATE
    assert [i.pivot_id for i in issues] == [p.id for p in pivots]
    assert all("drops `tools`" in i.problem for i in issues)


def test_pivot_model_guard_cli(tiny_policy):
    import json

    from typer.testing import CliRunner

    from pivot_cli import app

    res = CliRunner().invoke(app, ["model", "guard", "--model", str(tiny_policy.path), "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["pivots"] == 25 and report["issues"] == []
