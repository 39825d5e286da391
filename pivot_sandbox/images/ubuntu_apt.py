"""Apt steps written for Ubuntu (or Debian bookworm), run on a Debian trixie stand-in (`images/bases.py`).

`ubuntu:24.04` is built here as Debian trixie (Ubuntu's archive is not reachable). Most package names
are the same; what differs in an `apt-get install` (or `apt install`, `aptitude install`) is rewritten
before the step runs, and each change is recorded (the image's `pivot-gym.apt` label, the build report):

- a version pin (`pkg=1.2-3ubuntu4`, `gfortran=4:13.2.0-7ubuntu1`) or a release (`pkg/noble-updates`)
  is Ubuntu's and no Debian mirror has it: dropped to the name (Debian's version is installed);
- a package Ubuntu names differently, or only Ubuntu has, with an equivalent in Debian: mapped
  (`UBUNTU_NAMES`);
- an Ubuntu-only package with no equivalent (`NO_EQUIVALENT`: PPAs' tools): `DockerfileError` naming
  the line and the package, before the build starts.

A name neither table knows is left as written: apt says so at the step if Debian lacks it.

`python:3.13-slim-bookworm` is built on trixie too (the Python 3.13 the tag names and TB2's tests ask
for is trixie's): its steps get the same rewrite with bookworm's names (`BOOKWORM_NAMES`: packages
trixie renamed or dropped, such as `libgl1-mesa-glx`) and bookworm's pins dropped.

Public API:
    on_debian(text, where, origin="Ubuntu") -> (text, notes)
    debian_apt_steps(instructions, swapped_stages) -> (instructions, notes)
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence

from pivot_sandbox.errors import DockerfileError
from pivot_sandbox.images.dockerfile import Instruction

# Ubuntu 24.04's name -> Debian trixie's (checked against trixie's archive).
UBUNTU_NAMES = {
    "python3.12": "python3",  # noble's default Python; trixie's is 3.13
    "python3.12-venv": "python3-venv",
    "python3.12-dev": "python3-dev",
    "python3.12-full": "python3-full",
    "libpython3.12-dev": "libpython3-dev",
    "netcat": "netcat-openbsd",  # Ubuntu's transitional package; in Debian a virtual one with two providers
    "libgl1-mesa-glx": "libgl1",
    "language-pack-en": "locales-all",
    "language-pack-en-base": "locales-all",
}
# Debian bookworm's name -> trixie's, for a bookworm-tagged base built on trixie (checked against trixie's archive).
BOOKWORM_NAMES = {
    "libgl1-mesa-glx": "libgl1",  # a transitional package bookworm still had
    "python3.11": "python3",  # bookworm's default Python; trixie's is 3.13
    "python3.11-venv": "python3-venv",
    "python3.11-dev": "python3-dev",
    "libpython3.11-dev": "libpython3-dev",
}
NAMES = {"Ubuntu": UBUNTU_NAMES, "Debian bookworm": BOOKWORM_NAMES}
# Ubuntu-only packages with nothing like them in Debian.
NO_EQUIVALENT = {
    "software-properties-common": "add-apt-repository adds Ubuntu PPAs, which a Debian system cannot use",
    "ubuntu-advantage-tools": "Ubuntu Pro's client",
}

_INSTALL = re.compile(r"\b(?:apt-get|apt|aptitude)(?:[ \t]+(?:-[otc][ \t]+\S+|-{1,2}[\w-]+(?:=\S+)?))*[ \t]+install\b")
_WORD = re.compile(r"([ \t]|\\\n)+([^\s;&|()<>]+)")
_PACKAGE = re.compile(r"^([a-z0-9][a-z0-9+.-]+)(:[a-z0-9]+)?(?:=(\S+)|/(\S+))?$")
_TAKES_VALUE = {"-o", "-t", "-c", "--option", "--target-release", "--default-release", "--config-file"}


def _rewrite_word(word: str, where: str, notes: list[str], origin: str) -> str:
    """One word of an install command: a package spec rewritten for trixie (recorded in `notes`)."""
    bare = word.strip("'\"")
    m = _PACKAGE.match(bare)
    if m is None:
        return word  # an option, a variable, a path to a .deb
    name, arch, pin, release = m.groups()
    if origin == "Ubuntu" and name in NO_EQUIVALENT:
        raise DockerfileError(
            f"{where}: apt package {name!r} is Ubuntu's and Debian has no equivalent ({NO_EQUIVALENT[name]})"
        )
    new = NAMES[origin].get(name, name)
    if new == name and pin is None and release is None:
        return word
    what = [f"{origin}'s {'version pin' if pin is not None else 'release'} dropped"] if (pin or release) else []
    what += [f"{'Debian' if origin == 'Ubuntu' else 'trixie'}'s name for {name}"] if new != name else []
    notes.append(f"{where}: {bare} -> {new}{arch or ''} ({', '.join(what)})")
    return new + (arch or "")


def on_debian(text: str, where: str, origin: str = "Ubuntu") -> tuple[str, list[str]]:
    """A shell text's apt installs, written for `origin` ("Ubuntu", "Debian bookworm"), rewritten for trixie.

    Returns (new text, one note per change).

    Raises:
        DockerfileError: a package only Ubuntu has, with no Debian equivalent (`NO_EQUIVALENT`).
    """
    notes: list[str] = []
    out, pos = [], 0
    for m in _INSTALL.finditer(text):
        if m.start() < pos:
            continue
        out.append(text[pos : m.end()])
        pos, skip = m.end(), False
        while (w := _WORD.match(text, pos)) is not None:
            word = w.group(2)
            new = word if skip or word.startswith("-") else _rewrite_word(word, where, notes, origin)
            skip = word in _TAKES_VALUE
            out.append(text[pos : w.start(2)] + new)
            pos = w.end()
    out.append(text[pos:])
    return "".join(out), notes


def debian_apt_steps(
    instructions: Sequence[Instruction], swapped_stages: Mapping[str, str]
) -> tuple[list[Instruction], list[str]]:
    """The RUN steps of the stages built on trixie for another release's base, rewritten by `on_debian`.

    `swapped_stages`: stage name -> the release its FROM names (`bases.swapped_release`). Returns (steps, notes).
    """
    out, notes = [], []
    for ins in instructions:
        if ins.keyword != "RUN" or ins.stage not in swapped_stages:
            out.append(ins)
            continue
        origin = swapped_stages[ins.stage]
        args, found = on_debian(ins.args, ins.where, origin)
        heredocs = []
        for body in ins.heredocs:
            body, more = on_debian(body, ins.where, origin)
            heredocs.append(body)
            found += more
        notes += found
        out.append(dataclasses.replace(ins, args=args, heredocs=tuple(heredocs)) if found else ins)
    return out, notes
