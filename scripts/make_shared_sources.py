"""Write `pivot_core/data/shared_sources.json`: where each file of the shared data comes from.

    python scripts/make_shared_sources.py --shared ../shared/data --mirror /work/.mirror

Each file under the shared data folder is looked up, by its git blob id, in the public repositories
its SOURCES.md names, at the commit it names. A file found byte for byte upstream becomes a
`files` entry (raw URL at that commit, sha256, size, target path): `pivot data fetch` downloads
it. A file not found upstream (converted by the data team's own scripts: JSONL conversions, samples
with held-out items removed) becomes a `derived` entry (sha256 and size only): fetch cannot rebuild
it and says so, unless the package ships the same bytes (then the entry names that `bundled` file).
`--mirror` holds bare clones named `owner+name/repo` (any folder of clones works).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "pivot_core" / "data" / "shared_sources.json"

# (repository, commit, folder) as the SOURCES.md files of the shared data list them
SOURCES: tuple[tuple[str, str, str], ...] = (
    ("NVIDIA-NeMo/Gym", "07d6b0d07b22fcf530b4c211dae2ee23100428e4", "resources_servers/"),
    ("sierra-research/tau-bench", "59a200c6d575d595120f1cb70fea53cef0632f6b", ""),
    ("rese1f/terminal-bench-datasets", "e42111f163ccf5e3f0f716416677f438caa81ae7", "datasets/terminal-bench-core/"),
    ("laude-institute/terminal-bench-leaderboard", "7929ab67bfa58cbb9249c4128971421a747cad09", "results/"),
    ("laude-institute/terminal-bench-leaderboard", "8e1925a397d7ed859c027cc19b3a3d90c16ef8df", "results/"),
    ("SWE-agent/SWE-agent", "3ea751c087f32b16e039a2233dd6eefecef325d5", ""),
    ("gruckion/mini-swe-agent", "d12a71affd95403b036b2bdbd827349b77bfffb9", "swebench_results/"),
)
# caches the project builds itself, and the data team's notes: not data to fetch
SKIP_SUFFIXES = (".fts5.sqlite", "SOURCES.md")


def blob_id(path: Path) -> str:
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def upstream_blobs(mirror: Path, repo: str, commit: str, folder: str) -> dict[str, list[str]]:
    """Blob id -> paths at `commit` under `folder` (NUL-delimited listing: paths may hold anything)."""
    git_dir = mirror / repo.replace("/", "+") / "repo"
    out = subprocess.run(
        ["git", "--git-dir", str(git_dir), "ls-tree", "-r", "-z", commit, "--", folder or "."],
        check=True,
        capture_output=True,
    ).stdout.decode()
    blobs: dict[str, list[str]] = {}
    for entry in filter(None, out.split("\0")):
        meta, path = entry.split("\t", 1)
        _, kind, blob = meta.split()
        if kind == "blob":
            blobs.setdefault(blob, []).append(path)
    return blobs


def pick(local: str, paths: list[str]) -> str:
    """The upstream path whose tail matches the local path best (same bytes can sit in several places)."""
    tail = local.split("/")[::-1]

    def score(path: str) -> tuple[int, int]:
        return sum(a == b for a, b in zip(path.split("/")[::-1], tail, strict=False)), -len(path)

    return max(paths, key=score)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--mirror", type=Path, default=Path("/work/.mirror"))
    args = parser.parse_args()
    bundled = {
        hashlib.sha256(p.read_bytes()).hexdigest(): p.name for p in (ROOT / "pivot_core" / "data").glob("*.json*")
    }
    index = [(repo, commit, upstream_blobs(args.mirror, repo, commit, folder)) for repo, commit, folder in SOURCES]
    files, derived = [], []
    for path in sorted(p for p in args.shared.rglob("*") if p.is_file()):
        rel = path.relative_to(args.shared).as_posix()
        if rel.endswith(SKIP_SUFFIXES):
            continue
        data = path.read_bytes()
        entry = {"path": rel, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
        bid = blob_id(path)
        found = next(((repo, commit, blobs[bid]) for repo, commit, blobs in index if bid in blobs), None)
        if found is None and entry["sha256"] in bundled:
            files.append({**entry, "bundled": bundled[entry["sha256"]]})
            continue
        if found is None:
            derived.append(entry)
            continue
        repo, commit, paths = found
        upstream = pick(rel, paths)
        url = f"https://raw.githubusercontent.com/{repo}/{commit}/{quote(upstream)}"
        files.append({**entry, "url": url})
    manifest = {
        "about": "Files of the shared data: `files` are public files fetched byte for byte (pivot data fetch); "
        "`derived` were converted from the sources in each folder's SOURCES.md and cannot be fetched.",
        "files": files,
        "derived": derived,
    }
    # one entry a line: reviewable diffs, a third of the size of an indented dump
    lines = [
        f"{json.dumps(k)}: [\n" + ",\n".join(json.dumps(e, sort_keys=True) for e in v) + "\n]"
        for k, v in manifest.items()
        if k != "about"
    ]
    OUT.write_text("{" + f'"about": {json.dumps(manifest["about"])},\n' + ",\n".join(lines) + "}\n")
    print(f"{len(files)} fetchable, {len(derived)} derived -> {OUT}")


if __name__ == "__main__":
    main()
