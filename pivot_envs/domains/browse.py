"""Web browsing / multi-hop QA: search, open, find and answer tool calls over a local corpus."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from pivot_envs._env import PivotEnv
from verifiers_plugins import VerifierChain

# Verifiers that read the corpus: the env's `corpus=` is passed to them.
CORPUS_VERIFIERS = ("retrieval_match",)


class BrowseEnv(PivotEnv):
    """`pivot/browse-v0`: HotpotQA browsing pivots scored on a local SQLite FTS5 corpus.

    Extra keyword argument:
        corpus: the corpus JSONL the candidates' search/open/find calls run on; each pivot's
            `context["corpus"]` (the bundled corpus for the bundled pivots) when None.
    """

    domain: ClassVar[str] = "browse"
    default_verifiers: ClassVar[tuple[str, ...]] = (
        "turn_kind",
        "json_schema",
        "browse_tool",
        "retrieval_match",
        "answer_match",
    )
    bundled_files: ClassVar[tuple[str, ...]] = ("browse_oracle.jsonl", "browse_react.jsonl")

    def build_chain(
        self, verifiers: Sequence[str] | None, config: Mapping[str, Mapping[str, Any]] | None
    ) -> VerifierChain:
        """The chain, with `corpus=` given to the verifiers that read the corpus."""
        merged = {name: dict(cfg) for name, cfg in (config or {}).items()}
        corpus = self.domain_options.get("corpus")
        if corpus is not None:
            for name in CORPUS_VERIFIERS:
                merged.setdefault(name, {}).setdefault("corpus", str(corpus))
        return super().build_chain(verifiers, merged)

    def load_options(self) -> dict[str, Any]:
        """Pass `corpus=` to the readers too, so ReAct files are replayed on the env's corpus."""
        options = super().load_options()
        if self.domain_options.get("corpus") is not None:
            options["corpus"] = str(self.domain_options["corpus"])
        return options
