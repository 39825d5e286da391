"""Whole-file documents (not JSONL): JSON lists, single JSON objects, SWE-agent `.traj` and YAML demos.

`document_records(path)` returns the records such a file holds: the items of a JSON list
(original tau-bench releases), the simulations of a tau2 `Results` object (each with its task
attached), or the one object of a single-trajectory file (mini-swe-agent `.traj.json`,
SWE-agent `.traj`, SWE-agent demonstration `.yaml`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pivot_core._files import read_bounded
from pivot_core._jsonl import check_text_file, decode_record
from pivot_core.convert import tau2
from pivot_core.errors import AliasBudgetExceeded, DataFileError

DOCUMENT_SUFFIXES = (".json", ".traj", ".yaml", ".yml")
# What YAML aliases may add: each alias counts the nodes and scalar characters it stands for. A
# 775-byte "billion laughs" file loads as a few shared objects and then expands past memory when
# anything walks it (`Pivot.content_hash`, JSON output); real SWE-agent demos use few aliases if any.
MAX_YAML_ALIAS_EXPANSION = 1_000_000


def load_yaml(text: str, budget: int = MAX_YAML_ALIAS_EXPANSION) -> Any:
    """`yaml.safe_load(text)`, refusing aliases that together stand for more than `budget` units.

    Use it for any YAML a user or a task folder supplies: `yaml.safe_load` is safe from code
    execution, not from an alias bomb.

    A unit is a node or a character of a scalar; a node's size is counted once per alias that
    names it, so repeated aliases of aliases (the exponential case) add up at once. An alias of a
    node still being built (a recursive structure) is refused: nothing downstream can walk it.
    """
    import yaml

    class BoundedLoader(yaml.SafeLoader):
        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self.sizes: dict[int, int] = {}
            self.spent = 0
            self.open_anchors: set[str] = set()  # anchors whose node is still being composed

        def size(self, node: Any) -> int:
            key = id(node)
            if key not in self.sizes:
                if isinstance(node, yaml.ScalarNode):
                    total = 1 + len(node.value)
                elif isinstance(node, yaml.SequenceNode):
                    total = 1 + sum(self.size(child) for child in node.value)
                else:
                    total = 1 + sum(self.size(k) + self.size(v) for k, v in node.value)
                self.sizes[key] = min(total, budget + 1)
            return self.sizes[key]

        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.peek_event()
            if isinstance(event, yaml.AliasEvent):
                node = self.anchors.get(event.anchor)
                if node is not None:
                    # an alias into a node still being composed makes a cycle: nothing downstream can walk it
                    self.spent += budget + 1 if event.anchor in self.open_anchors else self.size(node)
                    if self.spent > budget:
                        raise AliasBudgetExceeded(event.start_mark.line + 1, budget)
                return super().compose_node(parent, index)
            anchor = getattr(event, "anchor", None)
            if anchor is None:
                return super().compose_node(parent, index)
            self.open_anchors.add(anchor)
            try:
                return super().compose_node(parent, index)
            finally:
                self.open_anchors.discard(anchor)

    loader = BoundedLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def is_document(path: Path) -> bool:
    """True for files read whole rather than line by line."""
    return path.suffix.lower() in DOCUMENT_SUFFIXES


def read_document(path: Path) -> Any:
    """The JSON (or YAML) value of a whole file; unreadable content is a `DataFileError` naming the file and line.

    The file must be a regular file within `$PIVOT_MAX_DATA_BYTES`, and YAML aliases may stand for
    at most `MAX_YAML_ALIAS_EXPANSION` nodes and characters in all (see `load_yaml`).
    """
    raw = read_bounded(path)  # a regular file within `$PIVOT_MAX_DATA_BYTES`, else a DataFileError naming it
    check_text_file(path, raw[:8192])
    raw = raw.removeprefix(b"\xef\xbb\xbf")
    if path.suffix.lower() not in (".yaml", ".yml"):
        return decode_record(path, None, raw)
    import yaml  # only YAML demonstrations need it

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise DataFileError(str(path), line, "not UTF-8 text") from e
    try:
        return load_yaml(text)
    except AliasBudgetExceeded as e:
        raise DataFileError(str(path), e.line, str(e)) from e
    except RecursionError as e:
        raise DataFileError(str(path), None, "invalid YAML: nested too deeply") from e
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise DataFileError(str(path), mark.line + 1 if mark else None, f"invalid YAML: {e}") from e


def document_records(path: Path) -> list[dict[str, Any]]:
    """The records of a whole-file document (see the module docstring)."""
    data = read_document(path)
    if isinstance(data, list):
        bad = next((i for i, r in enumerate(data, start=1) if not isinstance(r, dict)), None)
        if bad is not None:
            got = type(data[bad - 1]).__name__
            raise DataFileError(str(path), None, f"item {bad}: expected a JSON object, got {got}")
        return data
    if isinstance(data, dict) and tau2.is_results(data):
        return tau2.results_records(data)
    if isinstance(data, dict):
        return [data]
    raise DataFileError(str(path), None, f"expected a JSON list or object, got {type(data).__name__}")
