"""Which shell commands need the network: no container that runs a candidate has one.

A `curl` or `wget` of the sandbox's own loopback (`curl http://localhost:3000/fib?n=10`, against a
server the history started, which every sandbox on the snapshot runs again: `replay/restore.py`) needs no
network. Only that case is let through, and only when every URL the command names is a loopback
one: a doubtful command (a remote or bare host, a proxy, a config file, a tool not understood)
needs the network, so no offline run of it stands in for the expert.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

NETWORK = re.compile(
    r"\b(pip3?\s+install|uv\s+(add|init|run|pip)|apt(-get)?\s+(install|update)|curl|wget|git\s+(clone|fetch|pull|push)"
    r"|npm|cargo\s+(install|build)|conda|huggingface|from_pretrained|urlretrieve|load_dataset|ssh|scp|docker)\b"
)
FETCHERS = frozenset({"curl", "wget"})
LOOPBACK_URL = re.compile(r"^(?:https?://)?(?:localhost|127(?:\.\d{1,3}){3}|\[::1\])(?::\d{1,5})?(?:[/?#].*)?$")
# options of curl and wget whose value is the next word and names no host
VALUE_OPTIONS = frozenset(
    "-o --output -O --output-document -d --data --data-raw --data-binary --data-urlencode --json -H --header -X "
    "--request -w --write-out -u --user -A --user-agent -e --referer -b --cookie -c --cookie-jar -F --form "
    "-m --max-time --connect-timeout --retry --retry-delay -T --timeout -t --tries --post-data -P "
    "--directory-prefix -a --append-output -U".split()
)
OPERATORS = frozenset({"|", "||", "&&", ";", "&", "(", ")", ";;", "|&"})


def needs_network(commands: Sequence[str]) -> bool:
    """True when an action's effect depends on the network (a package install, a download)."""
    return any(_needs_network(c) for c in commands)


def _needs_network(command: str) -> bool:
    found = {m.group(0) for m in NETWORK.finditer(command)}
    if not found:
        return False
    if not found <= FETCHERS:
        return True
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:  # unbalanced quotes: not understood
        return True
    fetches = [i for i, w in enumerate(words) if w.rsplit("/", 1)[-1] in FETCHERS]
    # every mention is a fetch this reads (not `echo curl`, not `curl` inside another word or a string)
    if len(fetches) != sum(len(re.findall(rf"\b{f}\b", command)) for f in FETCHERS):
        return True
    return not all(_loopback_only(words[i + 1 :]) for i in fetches)


def _loopback_only(args: Sequence[str]) -> bool:
    """True when the fetch's URLs (its words up to the next shell operator) are all loopback ones, and there is one."""
    urls, skip = [], False
    for word in args:
        if word in OPERATORS:
            break
        if skip:
            skip = False
        elif word in VALUE_OPTIONS:
            skip = True
        elif not word.startswith("-"):
            urls.append(word)
    return bool(urls) and all(LOOPBACK_URL.match(u) for u in urls)
