"""Web browsing / multi-hop QA: search, open, find and answer tool calls over a local corpus."""

from __future__ import annotations

from typing import ClassVar

from pivot_envs._env import PivotEnv


class BrowseEnv(PivotEnv):
    """`pivot/browse-v0`: ReAct HotpotQA trajectories converted to search/open/find/answer calls."""

    domain: ClassVar[str] = "browse"
    default_verifiers: ClassVar[tuple[str, ...]] = ("turn_kind", "json_schema", "tool_args")
    bundled_files: ClassVar[tuple[str, ...]] = ("browse_react.jsonl",)
