"""Fetches from a host outside the registries whose file or program a registry also serves.

Terminal-Bench tasks fetch a few things from outside the package registries that the registries serve
as well: uv's installer script (uv is a wheel on PyPI) and torch's CPU wheels from download.pytorch.org
(the same torch release is on PyPI). Such a fetch is replaced by the registry's package; anything else
from outside stays a skip with the host named. One table, used by build steps (RUN lines and the scripts
copied from the task folder, `_tasks.task_image`) and by the replay of an oracle solution
(`_synthesize.synthesize_task`); the trajectory and the image show the replacement, not the original.

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
)


def registry_equivalent(text: str) -> str:
    """`text` (a command or a script) with every fetch of `EQUIVALENTS` replaced by its registry's package."""
    for pattern, replacement, _note in EQUIVALENTS:
        text = pattern.sub(lambda _m, r=replacement: r, text)  # a function: the replacement's backslashes stay
    return text
