"""OpenHands' file editor (`str_replace_editor`) as shell commands that make the same file change.

A replay runs shell commands only, so an editor call in a history becomes one command that checks
what the editor checks and changes the file the way it would (OpenHands' `oh_aci` editor, the
one these runs used):

- `create`: refuses a relative path and an existing file; writes `file_text` as given (no newline
  added) and makes no folder (a missing parent is the editor's "[Errno 2] No such file or directory").
- `str_replace`: refuses a relative path, a missing file, `old_str == new_str`, and an `old_str`
  that occurs zero or several times; replaces the one occurrence (a missing `new_str` deletes it).
- `insert`: refuses a relative path, a missing file and a line number outside `0..lines`; puts
  `new_str` after line `insert_line`.
- `view` changes nothing (no command); `undo_edit` needs the editor's own history of the file,
  which a replay does not have (`EditorUnsupported`).

A refused call exits 1 and changes nothing, as the editor's error did. The script is carried as
base64 inside `python3 -c`, so no quoting of the file text can break out of it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

from pivot_core.errors import EditorUnsupported

EDITOR_TOOL = "str_replace_editor"
CHANGING = ("create", "str_replace", "insert")

# One script for the three sub-commands; `A` holds the call's arguments (JSON, so any text survives).
_SCRIPT = """import json, os, sys
A = json.loads({args!r})
p = A.get("path") or ""
c = A.get("command")
def fail(m):
    print("ERROR:\\n" + m); sys.exit(1)
if not p.startswith("/"):
    fail("Invalid `path` parameter: %s. The path should be an absolute path, starting with `/`." % p)
if c == "create":
    if os.path.exists(p):
        fail("Invalid `path` parameter: %s. File already exists at: %s. "
             "Cannot overwrite files using command `create`." % (p, p))
    try:
        open(p, "w", encoding="utf-8").write(A.get("file_text") or "")
    except OSError as e:
        fail("Ran into %s while trying to write to %s" % (e, p))
    sys.exit(0)
if not os.path.isfile(p):
    fail("Invalid `path` parameter: %s. The path %s does not exist." % (p, p))
t = open(p, encoding="utf-8").read()
if c == "str_replace":
    o, n = A.get("old_str") or "", A.get("new_str") or ""
    if o == n:
        fail("Invalid `new_str` parameter: %s. No replacement was performed. "
             "`new_str` and `old_str` must be different." % n)
    k = t.count(o) if o else 0
    if k != 1:
        how = "did not appear verbatim" if k == 0 else "occurs more than once"
        fail("No replacement was performed, old_str `%s` %s in %s." % (o, how, p))
    open(p, "w", encoding="utf-8").write(t.replace(o, n, 1))
elif c == "insert":
    lines = t.split("\\n")
    i = A.get("insert_line")
    if not isinstance(i, int) or i < 0 or i > len(lines):
        fail("Invalid `insert_line` parameter: %s." % i)
    lines[i:i] = (A.get("new_str") or "").split("\\n")
    open(p, "w", encoding="utf-8").write("\\n".join(lines))
else:
    fail("Unrecognized command %s." % c)
"""


def editor_command(arguments: Mapping[str, Any]) -> str | None:
    """The shell command that makes the file change of one editor call; None when it changes nothing.

    Raises:
        EditorUnsupported: `undo_edit` (the editor's history of the file is not in the replay) or an
            unknown sub-command.
    """
    command = arguments.get("command")
    if command == "view":
        return None
    if command not in CHANGING:
        raise EditorUnsupported(
            f"str_replace_editor {command!r}: the file change cannot be replayed as a shell command"
        )
    args = {
        k: arguments[k] for k in ("command", "path", "file_text", "old_str", "new_str", "insert_line") if k in arguments
    }
    script = _SCRIPT.format(args=json.dumps(args, ensure_ascii=False))
    payload = base64.b64encode(script.encode("utf-8")).decode("ascii")
    return f"python3 -c \"import base64;exec(base64.b64decode('{payload}'))\""


def editor_shell(arguments: Any) -> str | None:
    """`editor_command` for any decoded arguments; None for arguments it cannot read or cannot replay."""
    if not isinstance(arguments, Mapping):
        return None
    try:
        return editor_command(arguments)
    except EditorUnsupported:
        return None
