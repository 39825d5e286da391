"""Fetches from a host outside the registries whose file or program a registry also serves.

Terminal-Bench tasks fetch a few things from outside the package registries that the registries serve
as well: uv's installer script (uv is a wheel on PyPI), torch's CPU wheels from download.pytorch.org
(the same torch release is on PyPI) and pip's installer `get-pip.py` (the interpreter's own `ensurepip`
installs the same program from the wheel it carries). Such a fetch is replaced by the registry's
package; anything else from outside stays a skip with the host named. One table, used by build
steps (RUN lines and the scripts copied from the task folder, `_tasks.task_image`) and by the replay
of an oracle solution (`_synthesize.synthesize_task`); the trajectory and the image show the
replacement, not the original.

Public API:
    registry_equivalent(text) -> str       (every line of `text`, each fetch of the table replaced)
    EQUIVALENTS                            ((pattern, replacement, what differs), ...)
"""

from __future__ import annotations

import re

# uv's installer puts `uv` in ~/.local/bin and writes ~/.local/bin/env; pip's user install does the
# same. uv trusts its own roots by default; the CA bundle a build or replay gets (the machine's,
# mounted) is the system one, hence `native-tls`.
_UV = (
    "python3 -m pip install --quiet --user --break-system-packages uv"
    ' && printf \'export PATH="$HOME/.local/bin:$PATH"\\n\' > "$HOME/.local/bin/env"'
    ' && mkdir -p "$HOME/.config/uv" && printf \'native-tls = true\\n\' > "$HOME/.config/uv/uv.toml"'
)

# get-pip.py installs pip into the interpreter that runs it; `ensurepip` does the same from the pip wheel
# the interpreter ships (Debian: /usr/share/python-wheels), with no download at all.
_GET_PIP = (
    'printf \'import subprocess, sys\\nsys.exit(subprocess.call([sys.executable, "-m", "ensurepip", '
    '"--upgrade", "--default-pip"]))\\n\' > {out}'
)

EQUIVALENTS: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (
        re.compile(r"^[ \t]*curl -LsSf https://astral\.sh/uv/install\.sh \| (?:ba)?sh[ \t]*$", re.M),
        _UV,
        "uv from PyPI instead of astral.sh's installer (same program, installed by pip into ~/.local/bin)",
    ),
    (
        # `pip install torch==X --index-url https://download.pytorch.org/whl/cpu`: the same release from
        # PyPI, whose Linux wheel is the CUDA build (it runs on CPU the same; it is larger and pulls the
        # nvidia runtime wheels)
        re.compile(
            r"[ \t]+--(?:extra-)?index-url(?:=|[ \t]+)https://download\.pytorch\.org/whl/cpu/?(?=[ \t;&|)]|$)", re.M
        ),
        "",
        "torch from PyPI instead of download.pytorch.org's CPU index (the same release; PyPI's is the CUDA build)",
    ),
    (
        # python -c "...urlretrieve('https://bootstrap.pypa.io/get-pip.py', 'get-pip.py')" (broken-python),
        # curl -o NAME URL, wget -O NAME URL: the file written is a get-pip.py that runs ensurepip
        re.compile(
            r"""^[ \t]*(?:python3?[ \t]+-c[ \t]+(?P<q>["'])[^\n]*?urlretrieve\(\s*["']https://bootstrap\.pypa\.io/"""
            r"""get-pip\.py["']\s*,\s*["'](?P<out>[\w./-]+)["']\s*\)[^\n]*?(?P=q)"""
            r"""|(?:curl[ \t]+(?:-[a-zA-Z]+[ \t]+)*-o|wget[ \t]+(?:-[a-zA-Z]+[ \t]+)*-O)[ \t]+"""
            r"""(?P<out2>[\w./-]+)[ \t]+https://bootstrap\.pypa\.io/get-pip\.py)[ \t]*$""",
            re.M,
        ),
        _GET_PIP,
        "pip from the interpreter's own wheel (`ensurepip`) instead of bootstrap.pypa.io's get-pip.py (same program;"
        " the version the interpreter ships, not the newest)",
    ),
)


def registry_equivalent(text: str) -> str:
    """`text` (a command or a script) with every fetch of `EQUIVALENTS` replaced by its registry's package."""
    for pattern, replacement, _note in EQUIVALENTS:
        text = pattern.sub(lambda m, r=replacement: _expand(m, r), text)
    return text


def _expand(match: re.Match[str], replacement: str) -> str:
    """`replacement` with `{out}` set to the file the fetch wrote; its backslashes stay as written."""
    out = match.groupdict().get("out") or match.groupdict().get("out2") or ""
    return replacement.replace("{out}", out)
