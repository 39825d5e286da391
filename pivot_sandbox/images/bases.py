"""Base images a Terminal-Bench Dockerfile names, mapped to locally built stand-ins (no registry is reachable).

Each stand-in derives from a root debootstrapped from the machine's own apt mirror (`_images.ROOTS`);
`ensure_base` builds the root and the base on first use and rebuilds a base made by an older recipe.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pivot_sandbox.contract.spec import LABEL
from pivot_sandbox.errors import TaskError
from pivot_sandbox.images import dockerfile as df
from pivot_sandbox.images.access import build_access
from pivot_sandbox.images.build import build
from pivot_sandbox.images.stock import ROOTS, build_root_image, image_exists

if TYPE_CHECKING:
    import docker


@dataclass(frozen=True)
class Base:
    """A locally built stand-in for a base image a Dockerfile names.

    Attributes:
        tag: the local image tag.
        root: the debootstrapped root it derives from (`_images.ROOTS`).
        workdir: the working directory the original image sets.
        managed: keep Debian's EXTERNALLY-MANAGED marker (Ubuntu keeps it; python.org images have none).
        note: how it differs from the original.
        packages: Debian packages installed on top of the root (a full `python:3.x` image's build tools).
        ubuntu: an Ubuntu image swapped for Debian: its apt steps are rewritten (`images/ubuntu_apt.py`).
    """

    tag: str
    root: str
    workdir: str
    managed: bool
    note: str
    packages: tuple[str, ...] = ()
    ubuntu: bool = False


# What a full (not -slim) python.org image has beyond its Python (buildpack-deps: compilers, VCS, -dev libraries).
FULL_PYTHON_PACKAGES = (
    *("build-essential", "pkg-config", "curl", "wget", "git", "gnupg", "openssh-client", "procps", "file"),
    *("unzip", "xz-utils", "bzip2", "libffi-dev", "libssl-dev", "zlib1g-dev", "libbz2-dev", "liblzma-dev"),
    *("libreadline-dev", "libsqlite3-dev", "python3-dev"),
)


# Matched on the image's path, never on a registry host name.
BASES: tuple[tuple[re.Pattern[str], Base], ...] = (
    (
        re.compile(r"(^|/)t-bench/python-3-13(:[\w.-]+)?$"),
        Base(
            "pivot-gym/base:t-bench-python-3-13",
            "pivot-gym/root:trixie",
            "/app",
            False,
            "Python 3.13 from Debian trixie's packages (in /usr/lib; pip installs to /usr/local), not python.org's",
        ),
    ),
    (
        re.compile(r"(^|/)t-bench/ubuntu-24-04(:[\w.-]+)?$"),
        Base(
            "pivot-gym/base:t-bench-ubuntu-24-04",
            "pivot-gym/root:trixie",
            "/app",
            True,
            "Debian trixie, not Ubuntu 24.04: same apt-get, Debian's packages (Python 3.13 not 3.12, glibc 2.41)",
            ubuntu=True,
        ),
    ),
    (
        # pins made for 3.8/3.9 (pandas 1.3, numpy 1.21) have wheels for 3.9, none for bookworm's 3.11
        re.compile(r"^python:3\.[89](\.\d+)?-slim(-bookworm|-bullseye)?$"),
        Base(
            "pivot-gym/base:python-3-slim-bullseye",
            "pivot-gym/root:bullseye",
            "/",
            False,
            "bullseye's Python 3.9 under the name asked for (the minor version differs unless 3.9 was asked; "
            "Debian bullseye, not bookworm)",
        ),
    ),
    (
        # the tests of Terminal-Bench 2.0 ask `uvx -p 3.13`: the interpreter the tag names, from trixie
        re.compile(r"^python:3\.13(\.\d+)?-slim(-bookworm|-trixie)?$"),
        Base(
            "pivot-gym/base:python-3-13-slim",
            "pivot-gym/root:trixie",
            "/",
            False,
            "Debian trixie's Python 3.13 (in /usr/lib; pip installs to /usr/local), not python.org's on bookworm: "
            "the version the tag names, Debian trixie's packages; its headers, as python.org's images have them",
            ("python3-dev",),
        ),
    ),
    (
        re.compile(r"^python:3\.\d+(\.\d+)?(-bookworm)?$"),
        Base(
            "pivot-gym/base:python-3-bookworm",
            "pivot-gym/root:bookworm",
            "/",
            False,
            "bookworm's Python 3.11 with build tools, compilers and -dev libraries (a subset of buildpack-deps; "
            "the minor version differs unless 3.11 was asked)",
            FULL_PYTHON_PACKAGES,
        ),
    ),
    (
        re.compile(r"^python:3\.\d+(\.\d+)?-slim(-bookworm)?$"),
        Base(
            "pivot-gym/base:python-3-slim-bookworm",
            "pivot-gym/root:bookworm",
            "/",
            False,
            "bookworm's Python 3.11 under the name asked for (the minor version differs unless 3.11 was asked)",
        ),
    ),
    (
        re.compile(r"^debian:bullseye(-slim)?$"),
        Base("pivot-gym/base:debian-bullseye", "pivot-gym/root:bullseye", "/", True, "Debian bullseye minbase"),
    ),
    (
        re.compile(r"^debian:(13(\.\d+)?|trixie)(-slim)?$"),
        Base(
            "pivot-gym/base:debian-trixie",
            "pivot-gym/root:trixie",
            "/",
            True,
            "Debian trixie minbase with python3 (3.13), pip, venv, tmux and ca-certificates preinstalled",
        ),
    ),
    (
        re.compile(r"^debian:(12(\.\d+)?|bookworm)(-slim)?$"),
        Base(
            "pivot-gym/base:debian-bookworm",
            "pivot-gym/root:bookworm",
            "/",
            True,
            "Debian bookworm minbase with python3 (3.11), pip, venv and ca-certificates preinstalled",
        ),
    ),
    (
        re.compile(r"^ubuntu:(20\.04|22\.04|24\.04|focal|jammy|noble|latest)$"),
        Base(
            "pivot-gym/base:ubuntu",
            "pivot-gym/root:trixie",
            "/",
            True,
            "Debian trixie, not Ubuntu: Debian's packages; Ubuntu's apt pins dropped and names mapped",
            ubuntu=True,
        ),
    ),
)


def map_base(name: str) -> Base | None:
    """The local stand-in for the image a FROM names, None when there is none."""
    for pattern, base in BASES:
        if pattern.search(name.strip()):
            return base
    return None


def swapped_release(name: str) -> str:
    """The release a FROM names when its stand-in is built on another one ("Ubuntu", "Debian bookworm"), else "".

    Its apt steps (and its oracle's) name that release's packages and pins: `images/ubuntu_apt.py` rewrites them.
    """
    base = map_base(name)
    if base is None:
        return ""
    if base.ubuntu:
        return "Ubuntu"
    return "Debian bookworm" if "bookworm" in name and base.root.endswith(":trixie") else ""


def ensure_base(client: docker.DockerClient, name: str) -> tuple[str, str]:
    """(local tag, note) of the base a FROM names, building its root and itself when missing."""
    base = map_base(name)
    if base is None:
        raise TaskError(f"base image {name!r} has no local equivalent (no registry is reachable)")
    steps = [] if base.managed else ["RUN rm -f /usr/lib/python3*/EXTERNALLY-MANAGED", PIP_OWNS_PYTHON_PACKAGES]
    if base.packages:  # before the pip-owned copies, so that python3-dev's own Python packages get one too
        steps.insert(
            0,
            "RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "
            + " ".join(base.packages)
            + " && rm -rf /var/lib/apt/lists/*",
        )
    text = "\n".join([f"FROM {base.root}", *steps, f"WORKDIR {base.workdir}"]) + "\n"
    # a base built by an older recipe is rebuilt (its id changes, so the task images on it rebuild once)
    recipe = hashlib.sha256(text.encode()).hexdigest()[:16]
    if image_exists(client, base.tag) and client.images.get(base.tag).labels.get(f"{LABEL}.recipe") == recipe:
        return base.tag, base.note
    build_root_image(client, base.root)
    suite = ROOTS[base.root][0]
    instructions = df.parse(text, f"<base {base.tag}>")
    access = None if base.managed and not base.packages else build_access(suite)
    labels = {f"{LABEL}.suite": suite, f"{LABEL}.recipe": recipe}
    build(client, instructions, Path("/nonexistent"), base.root, base.tag, access, labels=labels)
    return base.tag, base.note


# python.org images (python:3.x-slim, t-bench's python-3-13) have pip, and every Python package, owned by
# pip in /usr/local. Debian's Python sees the packages Debian installed (pip, setuptools, wheel, packaging,
# asciinema, ...) in /usr/lib/python3/dist-packages, and pip cannot upgrade those ("installed by debian":
# `pip install transformers torch` failed on setuptools). So the base gets a pip-owned copy of each, at
# the same version, in /usr/local (first on sys.path: an upgrade replaces that copy), and python.org's
# `site-packages` path as a link to Debian's `dist-packages` (a Dockerfile that edits
# /usr/local/lib/python3.X/site-packages edits what Python imports). A release PyPI does not have stays
# Debian's (the build log says which).
PIP_OWNS_PYTHON_PACKAGES = (
    "RUN set -e; d=$(python3 -c 'import sys; print(\"/usr/local/lib/python%d.%d\" % sys.version_info[:2])');"
    ' mkdir -p "$d/dist-packages"; [ -e "$d/site-packages" ] || ln -s dist-packages "$d/site-packages";'
    " python3 -m pip list --path /usr/lib/python3/dist-packages --format freeze 2>/dev/null > /tmp/debian.txt;"
    " python3 -m pip install -q --no-cache-dir --no-deps --ignore-installed -r /tmp/debian.txt"
    ' || while read -r req; do python3 -m pip install -q --no-cache-dir --no-deps --ignore-installed "$req"'
    ' || echo "pivot-gym: $req stays Debian\x27s"; done < /tmp/debian.txt; rm -f /tmp/debian.txt'
)
