"""The four browse tools as OpenAI function schemas."""

from __future__ import annotations

from typing import Any

DEFAULT_K = 5
MAX_K = 20


def _tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


BROWSE_TOOLS: tuple[dict[str, Any], ...] = (
    _tool(
        "search",
        "Search the document collection. Returns ranked results: title, doc id and a snippet.",
        {
            "query": {"type": "string", "description": "Free-text query."},
            "k": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_K,
                "description": f"Number of results (default {DEFAULT_K}).",
            },
        },
        ["query"],
    ),
    _tool(
        "open",
        "Open a document by its exact title or doc id. Returns its text, or similar titles when "
        "nothing has that title.",
        {"title": {"type": "string", "description": "Exact document title, or a doc id from search results."}},
        ["title"],
    ),
    _tool(
        "find",
        "Find a keyword in the open document. Returns the next sentence containing it, as (Result i / n) sentence.",
        {"keyword": {"type": "string", "description": "Word or phrase to look for."}},
        ["keyword"],
    ),
    _tool(
        "answer",
        "Give the final answer and end the episode.",
        {"answer": {"type": "string", "description": "The answer, as short as possible."}},
        ["answer"],
    ),
)
TOOL_NAMES = tuple(t["function"]["name"] for t in BROWSE_TOOLS)
