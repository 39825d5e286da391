"""Stage settings: the prompt cuts and completion budget a model was trained with, kept in its folder.

Every stage that writes a model (`pivot model pretrain`, `pivot sft`, GRPO's `final/`) writes them
beside the weights; every stage that samples a model (`pivot profile`, `pivot train`, `pivot eval`,
the demo) reads them, so a policy is always sampled from the prompts it learnt on and given the
completion budget its targets need. No torch import here.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

# The file name predates the completion budget and the temperature; it is kept so that folders
# written by earlier versions still load.
SETTINGS_FILE = "pivot_prompt_cuts.json"


@dataclass(frozen=True)
class StageSettings:
    """How a model is prompted and sampled.

    Attributes:
        max_history_messages: history messages kept after a leading system message (None: all).
        max_prompt_tokens: prompt tokens kept, the last ones (None: all).
        max_new_tokens: the completion budget (the longest trained target fits in it).
        temperature: the sampling temperature of training rollouts (evaluation defaults to it).
    """

    max_history_messages: int | None = 4
    max_prompt_tokens: int | None = 256
    max_new_tokens: int = 128
    temperature: float = 1.0

    def __post_init__(self) -> None:
        for name in ("max_history_messages", "max_prompt_tokens"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"StageSettings.{name}: expected >= 0 or None, got {value}")
        if self.max_new_tokens < 1:
            raise ValueError(f"StageSettings.max_new_tokens: expected >= 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise ValueError(f"StageSettings.temperature: expected >= 0, got {self.temperature}")

    def save(self, folder: str | Path) -> Path:
        """Write the settings into a model folder; returns the file."""
        path = Path(folder) / SETTINGS_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(self), indent=2) + "\n")
        return path

    @classmethod
    def load(cls, folder: str | Path) -> StageSettings | None:
        """The settings saved in a model folder, or None when it has none (a stock HF folder).

        Raises:
            ValueError: the file exists but is not a settings object (named with its path).
        """
        path = Path(folder) / SETTINGS_FILE
        if not path.is_file():
            return None
        try:
            raw = json.loads(path.read_text())
        except ValueError as e:
            raise ValueError(f"{path}: not JSON ({e})") from e
        if not isinstance(raw, dict):
            raise ValueError(f"{path}: expected a JSON object, got {type(raw).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ValueError(f"{path}: unknown settings {unknown} (known: {sorted(known)})")
        try:
            return cls(**raw)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{path}: {e}") from e

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


def settings_of(folder: str | Path | None, default: StageSettings | None = None) -> StageSettings:
    """The folder's settings, else `default`, else the dataclass defaults (None folder: no lookup)."""
    found = StageSettings.load(folder) if folder is not None and Path(folder).is_dir() else None
    return found or default or StageSettings()
