"""Which shell commands need the network: no container that runs a candidate has one.

A `curl` or `wget` of the sandbox's own loopback (`curl http://localhost:3000/fib?n=10`, against a
server the history started, which every sandbox on the snapshot runs again: `replay/restore.py`) needs no
network. Only that case is let through, and only when every URL the command names is a loopback
one: a doubtful command (a remote or bare host, a proxy, a config file, a tool not understood)
needs the network, so no offline run of it stands in for the expert. A compose task's own services
(`SandboxSpec.services`, started beside every container of the task: `http://server:8000`) are
local in the same way, given as `local_hosts`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection, Sequence

NETWORK = re.compile(
    r"\b(pip3?\s+install|uv\s+(add|init|run|pip)|apt(-get)?\s+(install|update)|curl|wget|git\s+(clone|fetch|pull|push)"
    r"|npm|cargo\s+(install|build)|conda|huggingface|from_pretrained|urlretrieve|load_dataset|ssh|scp|docker)\b"
)
FETCHERS = frozenset({"curl", "wget"})
# a URL of a bare host name (no dots): the only form a compose service is reached by
SERVICE_URL = re.compile(r"^(?:https?://)?([A-Za-z0-9][A-Za-z0-9_-]{0,62})(?::\d{1,5})?(?:[/?#].*)?$")
LOOPBACK_URL = re.compile(r"^(?:https?://)?(?:localhost|127(?:\.\d{1,3}){3}|\[::1\])(?::\d{1,5})?(?:[/?#].*)?$")
# options of curl and wget whose value is the next word and names no host
VALUE_OPTIONS = frozenset(
    "-o --output -O --output-document -d --data --data-raw --data-binary --data-urlencode --json -H --header -X "
    "--request -w --write-out -u --user -A --user-agent -e --referer -b --cookie -c --cookie-jar -F --form "
    "-m --max-time --connect-timeout --retry --retry-delay -T --timeout -t --tries --post-data -P "
    "--directory-prefix -a --append-output -U".split()
)
OPERATORS = frozenset({"|", "||", "&&", ";", "&", "(", ")", ";;", "|&"})


def needs_network(commands: Sequence[str], local_hosts: Collection[str] = ()) -> bool:
    """True when an action's effect depends on the network (a package install, a download).

    `local_hosts`: names served inside the sandbox (a compose task's services), fetched like the loopback.
    """
    return any(_needs_network(c, frozenset(h.lower() for h in local_hosts)) for c in commands)


def _needs_network(command: str, local_hosts: frozenset[str]) -> bool:
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
    return not all(_loopback_only(words[i + 1 :], local_hosts) for i in fetches)


def _loopback_only(args: Sequence[str], local_hosts: frozenset[str] = frozenset()) -> bool:
    """True when the fetch's URLs (its words up to the next shell operator) are all local ones, and there is one."""
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
    return bool(urls) and all(LOOPBACK_URL.match(u) or _host(u) in local_hosts for u in urls)


def _host(url: str) -> str:
    """The host a fetch's URL names (`server` of `http://server:8000/x` or `server:8000`), lower-case."""
    m = SERVICE_URL.match(url)
    return m.group(1).lower() if m else ""
