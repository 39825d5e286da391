"""`pivot data fetch`: lay out the shared data's public files from the manifest shipped as package data.

The manifest (`pivot_core/data/shared_sources.json`, written by `scripts/make_shared_sources.py`)
lists each file of the shared data folder: `files` are public files at a pinned commit (a raw URL,
or a file the package ships), fetched byte for byte and checked against their sha256; `derived`
files were converted by the data team's scripts and cannot be fetched (they are listed, not made up).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from fnmatch import fnmatch
from importlib import resources
from pathlib import Path
from typing import Any

from pivot_cli.errors import FetchError

UPSTREAM = "https://raw.githubusercontent.com"
CONNECT_TIMEOUT_S = 5.0  # a machine without network answers "unreachable" at once, or within this
READ_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class FetchReport:
    """What `fetch_shared_data` did: relative paths by outcome, and the folder it wrote to."""

    root: Path
    fetched: tuple[str, ...]
    present: tuple[str, ...]
    failed: tuple[tuple[str, str], ...]
    derived: tuple[str, ...]

    def summary(self) -> dict[str, Any]:
        """JSON-ready counts and the failures with their reasons."""
        return {
            "root": str(self.root),
            "fetched": len(self.fetched),
            "already_present": len(self.present),
            "failed": [{"path": p, "reason": r} for p, r in self.failed],
            "not_fetchable": list(self.derived),
        }


def load_manifest(path: Path | None = None) -> dict[str, list[dict[str, Any]]]:
    """The manifest at `path`, else the one shipped in `pivot_core/data`."""
    source = path if path is not None else resources.files("pivot_core") / "data" / "shared_sources.json"
    return json.loads(source.read_text(encoding="utf-8"))


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _url(entry: dict[str, Any], mirror: str | None) -> str:
    url = entry["url"]
    return mirror.rstrip("/") + url[len(UPSTREAM) :] if mirror and url.startswith(UPSTREAM) else url


def _download(url: str, timeout: float) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as answer:  # noqa: S310 (https or a mirror the user names)
        return answer.read()


def check_reachable(url: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Raise `FetchError` at once when `url`'s host cannot be reached (one short request, no retry)."""
    try:
        request = urllib.request.Request(url, method="HEAD")
        with urllib.request.urlopen(request, timeout=timeout):  # noqa: S310
            return
    except urllib.error.HTTPError:
        return  # the host answered: per-file errors are reported per file
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise FetchError(
            f"cannot reach {url.split('/')[2]} ({reason}): `pivot data fetch` needs network access to "
            "GitHub; without it, copy a shared data folder by hand and set PIVOT_SHARED_DATA=DIR"
        ) from e


def _place(entry: dict[str, Any], root: Path, get: Callable[[dict[str, Any]], bytes]) -> str | None:
    """Write one entry under `root` if its bytes match the manifest; the reason it was refused, else None."""
    try:
        data = get(entry)
    except (urllib.error.URLError, OSError) as e:
        return f"download failed: {getattr(e, 'reason', e)}"
    got = hashlib.sha256(data).hexdigest()
    if got != entry["sha256"]:
        return f"checksum mismatch: expected sha256 {entry['sha256']}, got {got} ({len(data)} bytes); not written"
    target = root / entry["path"]
    target.parent.mkdir(parents=True, exist_ok=True)
    # written beside the target then renamed: an interrupted fetch never leaves a half file in place
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".fetch-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, target)
    return None


def fetch_shared_data(
    root: Path,
    manifest: dict[str, list[dict[str, Any]]] | None = None,
    only: Sequence[str] = (),
    mirror: str | None = None,
    workers: int = 8,
) -> FetchReport:
    """Download the manifest's files into `root`, checking each one's sha256; files already right are kept.

    Args:
        root: the folder to lay the files out in (relative paths as in the shared data folder).
        manifest: the manifest; the shipped one when None.
        only: glob patterns on the relative path; every file when empty.
        mirror: a base URL that replaces `https://raw.githubusercontent.com` (a local copy, a proxy).
        workers: parallel downloads.

    Raises:
        FetchError: the first URL's host cannot be reached; nothing was written.
    """
    manifest = manifest if manifest is not None else load_manifest()
    wanted = [e for e in manifest["files"] if not only or any(fnmatch(e["path"], p) for p in only)]
    present = [e["path"] for e in wanted if (root / e["path"]).is_file() and sha256_of(root / e["path"]) == e["sha256"]]
    todo = [e for e in wanted if e["path"] not in set(present)]
    remote = [e for e in todo if "url" in e]
    if remote:
        check_reachable(_url(remote[0], mirror))

    def get(entry: dict[str, Any]) -> bytes:
        if "bundled" in entry:
            return (resources.files("pivot_core") / "data" / entry["bundled"]).read_bytes()
        return _download(_url(entry, mirror), READ_TIMEOUT_S)

    root.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        reasons = list(pool.map(lambda e: _place(e, root, get), todo))
    failed = tuple((e["path"], r) for e, r in zip(todo, reasons, strict=True) if r is not None)
    fetched = tuple(e["path"] for e, r in zip(todo, reasons, strict=True) if r is None)
    derived = tuple(
        e["path"] for e in manifest.get("derived", []) if not only or any(fnmatch(e["path"], p) for p in only)
    )
    return FetchReport(root, fetched, tuple(present), failed, derived)
