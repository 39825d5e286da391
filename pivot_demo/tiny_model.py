r"""`pivot model tiny`: a tiny real causal LM for CPU, built in-process with no download.

The tokenizer is a byte-level BPE trained with `tokenizers` on the bundled pivots, wrapped as a
transformers fast tokenizer with a ChatML chat template. Tool calls render in the Hermes/Qwen form
`<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`, byte-identical to
`pivot_core._render.render_completion`, so completions parse with the env's `hermes` parser.
Assistant turns sit in `{% generation %}` blocks, which gives `return_assistant_tokens_mask`.

The model is a random-init Qwen3-style decoder (about 1M parameters, fp32): figures in
../shared/design/ENVIRONMENT.md show that this size learns valid tool-call JSON on 2 cores.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Tools are listed by name and parameter names only: full JSON schemas (12 KB for tau-bench
# airline) would fill a tiny model's whole context. A real policy's template renders them in full.
NL = "{{ '\\n' }}"  # transformers renders with trim_blocks: a literal newline after a tag would vanish
CHAT_TEMPLATE = (
    "{%- if messages and messages[0].role == 'system' %}{%- set sys = messages[0].content %}"
    "{%- set rest = messages[1:] %}{%- else %}{%- set sys = '' %}{%- set rest = messages %}{%- endif %}"
    "{%- if sys or tools %}<|im_start|>system" + NL + "{{ sys }}"
    "{%- if tools %}{% if sys %}" + NL + NL + "{% endif %}# Tools"
    "{%- for t in tools %}{%- set f = t.function if t.function is defined else t %}" + NL + "{{ f.name }}("
    "{%- if f.parameters is defined and f.parameters.properties is defined %}"
    "{{ f.parameters.properties.keys() | join(', ') }}{%- endif %})"
    "{%- endfor %}{%- endif %}<|im_end|>" + NL + "{%- endif %}"
    "{%- for m in rest %}"
    "{%- if m.role == 'assistant' %}<|im_start|>assistant" + NL + "{% generation %}"
    "{%- if m.tool_calls %}"
    "{%- if m.content and m.content | trim %}{{ m.content | trim }}" + NL + "{% endif %}"
    "{%- for tc in m.tool_calls %}{%- set f = tc.function if tc.function is defined else tc %}"
    "{%- if not loop.first %}"
    + NL
    + "{% endif %}<tool_call>"
    + NL
    + "{{ {'name': f.name, 'arguments': f.arguments} | tojson }}"
    + NL
    + "</tool_call>{%- endfor %}"
    "{%- else %}{{ m.content }}{%- endif %}<|im_end|>{% endgeneration %}"
    + NL
    + "{%- elif m.role == 'tool' %}<|im_start|>user"
    + NL
    + "<tool_response>"
    + NL
    + "{{ m.content }}"
    + NL
    + "</tool_response><|im_end|>"
    + NL
    + "{%- else %}<|im_start|>{{ m.role }}"
    + NL
    + "{{ m.content }}<|im_end|>"
    + NL
    + "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant" + NL + "{% endif %}"
)
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
# Plain added tokens (not special): decoding keeps them, so the Hermes parser sees the tags.
TAG_TOKENS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")


@dataclass(frozen=True)
class TinyModelConfig:
    """Shape of the tiny model and its tokenizer.

    Attributes:
        vocab_size: BPE vocabulary size (small keeps CPU steps fast).
        hidden_size: model width.
        num_layers: decoder layers.
        num_heads: attention heads.
        num_kv_heads: key/value heads (grouped-query attention).
        intermediate_size: MLP width.
        max_positions: longest sequence the model accepts.
        seed: seeds the random initialisation.
        split_spaces: make every space its own pre-token, so that a word never carries a leading
            space: an id then has the same tokens in a user's sentence and in a JSON string,
            which is what lets a small model learn to copy it from one to the other.
    """

    vocab_size: int = 1024
    hidden_size: int = 128
    num_layers: int = 4
    num_heads: int = 4
    num_kv_heads: int = 2
    intermediate_size: int = 384
    max_positions: int = 2048
    seed: int = 0
    split_spaces: bool = False

    def __post_init__(self) -> None:
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size {self.hidden_size} must be divisible by num_heads {self.num_heads}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads {self.num_heads} must be divisible by num_kv_heads {self.num_kv_heads}")
        if self.vocab_size < 300:
            raise ValueError(f"vocab_size: expected >= 300 (256 bytes + specials), got {self.vocab_size}")


def corpus_texts(pivots: Iterable[Any], tokenizer: Any) -> list[str]:
    """Rendered chats of the pivots (history + expert), the text the tokenizer is trained on."""
    from trainers.backends import as_chat, expert_message, template_messages

    texts = []
    for p in pivots:
        chat = as_chat(p)
        msgs = template_messages([*chat["messages"], expert_message(p)])
        texts.append(tokenizer.apply_chat_template(msgs, tools=chat["tools"] or None, tokenize=False))
    return texts


def build_tokenizer(
    texts: Sequence[str], vocab_size: int, split_spaces: bool = False, words: Sequence[str] = ()
) -> Any:
    """Train a byte-level BPE on `texts` and wrap it as a transformers fast tokenizer (see `TinyModelConfig`).

    `words` become whole tokens (matched only as whole words): see `build_tiny_model`.
    """
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    # Each newline is its own pre-token: otherwise "assistant\n" + a reply starting with "\n\n"
    # merges into one token across the prompt/completion boundary, and the prompt a policy is
    # sampled from would not tokenize as a prefix of the example it was trained on.
    splits = [pre_tokenizers.Split(Regex("\n"), behavior="isolated")]
    if split_spaces:
        splits.append(pre_tokenizers.Split(Regex(" "), behavior="isolated"))
    bpe.pre_tokenizer = pre_tokenizers.Sequence([*splits, pre_tokenizers.ByteLevel(add_prefix_space=False)])
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(texts, trainer=trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>", chat_template=CHAT_TEMPLATE
    )
    tok.add_tokens(list(TAG_TOKENS))
    tok.add_tokens([AddedToken(w, single_word=True, normalized=False) for w in dict.fromkeys(words)])
    return tok


def _bootstrap_tokenizer() -> Any:
    """An untrained wrapper, only to render the training corpus with the same template."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE()), chat_template=CHAT_TEMPLATE)


def build_tiny_model(
    out: str | Path,
    pivots: Sequence[Any] | None = None,
    config: TinyModelConfig | None = None,
    words: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Any]:
    """Write a tokenizer + random-init Qwen3-style causal LM to `out` (loadable with from_pretrained).

    Args:
        out: output folder.
        pivots: the tokenizer's training corpus; the bundled pivots of every domain when None.
        config: model shape.
        words: whole-word tokens by kind, e.g. a tool world's entity ids (`world_words`). A BPE
            splits an id like `NQNU5R` into pieces, and copying a run of pieces from the
            conversation into a call needs induction circuits that a model of this size does not
            form in a CPU budget. As one token each, an id is copied by a single attention step,
            and with tied embeddings that works even for an id the model never saw in training.
            For attention to find "the user id" among thousands of ids it rarely sees, each
            kind's embeddings start from a shared direction plus their own random part.

    Returns:
        A summary: path, parameter count, vocabulary size.
    """
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = config or TinyModelConfig()
    pivots = list(pivots) if pivots is not None else bundled_pivots()
    words = dict(words or {})
    texts = corpus_texts(pivots, _bootstrap_tokenizer())
    tok = build_tokenizer(texts, config.vocab_size, config.split_spaces, [w for ws in words.values() for w in ws])
    torch.manual_seed(config.seed)
    model_config = Qwen3Config(
        vocab_size=len(tok),
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_layers,
        num_attention_heads=config.num_heads,
        num_key_value_heads=config.num_kv_heads,
        head_dim=config.hidden_size // config.num_heads,
        max_position_embeddings=config.max_positions,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tok.pad_token_id,
    )
    model = Qwen3ForCausalLM(model_config).to(torch.float32)
    _kind_embeddings(model, tok, words)
    model.generation_config.eos_token_id = model_config.eos_token_id
    model.generation_config.pad_token_id = model_config.pad_token_id
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    params = sum(p.numel() for p in model.parameters())
    summary = {"path": str(out), "parameters": params, "vocab_size": len(tok), "corpus_pivots": len(pivots)}
    (out / "pivot_tiny.json").write_text(json.dumps({**summary, "config": config.__dict__}, indent=2))
    return summary


def _kind_embeddings(model: Any, tokenizer: Any, words: Mapping[str, Sequence[str]]) -> None:
    """Start each kind's word embeddings at (shared direction + own random part) / sqrt(2): same scale."""
    import torch

    table = model.get_input_embeddings().weight
    std = model.config.initializer_range
    with torch.no_grad():
        for ws in words.values():
            ids = tokenizer.convert_tokens_to_ids(list(dict.fromkeys(ws)))
            shared = torch.randn(table.shape[1]) * std
            table[ids] = (shared + torch.randn(len(ids), table.shape[1]) * std) / 2**0.5


def bundled_pivots() -> list[Any]:
    """Every bundled pivot of every registered domain env (the default tokenizer corpus)."""
    import gymnasium as gym

    import pivot_envs  # noqa: F401  (registers the envs)

    out: list[Any] = []
    for env_id in ("pivot/tool-use-v0", "pivot/terminal-v0", "pivot/swe-v0", "pivot/browse-v0"):
        try:
            env = gym.make(env_id).unwrapped
        except Exception:  # a domain whose optional pieces are absent adds nothing to the corpus
            continue
        out.extend(env.pivots)
    return out


@dataclass(frozen=True)
class TinyPolicy:
    """A built-and-fine-tuned tiny policy plus the prompt cuts it was trained with.

    Attributes:
        path: the model folder.
        max_history_messages: history messages it reads (sample with the same value).
        max_prompt_tokens: prompt tokens it reads (sample with the same value).
        max_new_tokens: the completion budget it was trained with.
        temperature: the sampling temperature at which K=4 samples give all-0, all-1 and mixed
            pivots (measured over seeds: about 9 / 5-9 / 7-11 of the 25 tool-use pivots).
    """

    path: Path
    max_history_messages: int
    max_prompt_tokens: int
    max_new_tokens: int
    temperature: float

    def backend_config(self, **overrides: Any) -> Any:
        """A `TransformersConfig` that prompts this policy as it was trained."""
        from trainers.backends import TransformersConfig

        fields = {
            "model": str(self.path),
            "max_history_messages": self.max_history_messages,
            "max_prompt_tokens": self.max_prompt_tokens,
            **overrides,
        }
        return TransformersConfig(**fields)


# Sized for tests on 2 shared CPU cores: ~170k parameters, short prompts. The SFT steps and the
# policy's temperature are chosen so that K=4 samples give all-0, all-1 and mixed tool-use pivots:
# fewer steps leave almost every pivot all-0, more (or a lower temperature) leave few mixed ones.
TEST_MODEL = TinyModelConfig(
    vocab_size=1024, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=192, max_positions=512
)
TEST_SFT_STEPS = 250


def build_test_policy(folder: str | Path, steps: int = TEST_SFT_STEPS) -> TinyPolicy:
    """Build a tiny model and fine-tune it briefly on the bundled tool-use pivots.

    Reused when `folder` already holds a finished build (the `pivot_tiny_sft.json` marker).
    """
    import gymnasium as gym

    import pivot_envs  # noqa: F401  (registers the envs)
    from trainers.sft import SFTConfig, train_sft

    folder = Path(folder)
    policy = TinyPolicy(
        folder / "sft", max_history_messages=2, max_prompt_tokens=96, max_new_tokens=64, temperature=0.85
    )
    marker = folder / "pivot_tiny_sft.json"
    if marker.exists():
        return policy
    build_tiny_model(folder / "base", config=TEST_MODEL)
    pivots = gym.make("pivot/tool-use-v0").unwrapped.pivots
    config = SFTConfig(
        steps=steps,
        batch_size=8,
        lr=4e-3,
        max_history_messages=policy.max_history_messages,
        max_prompt_tokens=policy.max_prompt_tokens,
        max_completion_tokens=policy.max_new_tokens,
    )
    summary = train_sft(folder / "base", pivots, policy.path, config)
    marker.write_text(json.dumps(summary, indent=2))
    return policy
