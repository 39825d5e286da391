"""Which shell commands need the network: no container that runs a candidate has one."""

from __future__ import annotations

import re
from collections.abc import Sequence

NETWORK = re.compile(
    r"\b(pip3?\s+install|uv\s+(add|init|run|pip)|apt(-get)?\s+(install|update)|curl|wget|git\s+(clone|fetch|pull|push)"
    r"|npm|cargo\s+(install|build)|conda|huggingface|from_pretrained|urlretrieve|load_dataset|ssh|scp|docker)\b"
)


def needs_network(commands: Sequence[str]) -> bool:
    """True when an action's effect depends on the network (a package install, a download)."""
    return any(NETWORK.search(c) for c in commands)
