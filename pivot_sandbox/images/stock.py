"""Offline base images: a static busybox image (1 s, for fast tests) and a Debian bookworm minbase.

No registry is reachable, so both are built from local files: busybox from the machine's static
binary, Debian with debootstrap from the apt mirror the machine itself is configured with (read
at run time, never stored) and `docker import`. Both are cached by tag.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from pivot_sandbox.contract.spec import LABEL
from pivot_sandbox.errors import SandboxError
from pivot_sandbox.images.access import PLACEHOLDERS, archive_mirror

if TYPE_CHECKING:  # imported where a client is made: importing this module needs no SDK
    import docker

BUSYBOX_TAG = "pivot-gym/busybox:1"
DEBIAN_TAG = "pivot-gym/debian:bookworm"
DEBIAN_PACKAGES = ("python3", "bash", "coreutils", "git", "procps", "ca-certificates")
_PASSWD = "root:x:0:0:root:/root:/bin/sh\nagent:x:1000:1000:agent:/home/agent:/bin/sh\n"
_GROUP = "root:x:0:\nagent:x:1000:\n"
_CHANGES = [f"LABEL {LABEL}=base", "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]


def image_exists(client: docker.DockerClient, tag: str) -> bool:
    """True when the engine has an image with that tag."""
    import docker.errors

    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


_CLIENTS: dict[str | None, docker.DockerClient] = {}  # base_url -> a docker client for `image_id`


def image_id(tag: str, base_url: str | None = None) -> str | None:
    """The id the Docker engine reports for the image `tag` (`sha256:...`).

    None when the engine has no such image or cannot be reached: a caller that keys results by
    the image (the reward cache) must then not cache, since it cannot tell which image ran.
    Asked of the engine each time (a few milliseconds): a rebuilt tag has a new id at once.
    """
    import docker
    import docker.errors

    try:
        client = _CLIENTS.get(base_url)
        if client is None:
            client = docker.DockerClient(base_url=base_url, timeout=10) if base_url else docker.from_env(timeout=10)
            _CLIENTS[base_url] = client
        return str(client.images.get(tag).id)
    except docker.errors.ImageNotFound:
        return None
    except (docker.errors.DockerException, OSError):  # the engine is down or gone: connect afresh next time
        _CLIENTS.pop(base_url, None)
        return None


def _busybox_binary() -> Path:
    for cand in ("/bin/busybox", "/usr/bin/busybox"):
        path = Path(cand)
        if path.is_file():
            return path.resolve()
    raise SandboxError("busybox not found: install the busybox-static package (apt-get install busybox-static)")


def _busybox_tar() -> bytes:
    binary = _busybox_binary()
    applets = subprocess.run([str(binary), "--list"], capture_output=True, text=True, check=True).stdout.split()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for d, mode in (("bin", 0o755), ("etc", 0o755), ("tmp", 0o1777), ("root", 0o700), ("home", 0o755)):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, mode
            tar.addfile(info)
        home = tarfile.TarInfo("home/agent")
        home.type, home.mode, home.uid, home.gid = tarfile.DIRTYPE, 0o755, 1000, 1000
        tar.addfile(home)
        tar.add(str(binary), arcname="bin/busybox")
        for name in applets:
            if name != "busybox":
                link = tarfile.TarInfo(f"bin/{name}")
                link.type, link.linkname = tarfile.SYMTYPE, "busybox"
                tar.addfile(link)
        usr = tarfile.TarInfo("usr")
        usr.type, usr.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(usr)
        for link_name in ("usr/bin", "usr/sbin", "sbin"):
            link = tarfile.TarInfo(link_name)
            link.type, link.linkname = tarfile.SYMTYPE, "/bin"
            tar.addfile(link)
        for name, text in (("etc/passwd", _PASSWD), ("etc/group", _GROUP)):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def build_busybox_image(client: docker.DockerClient, tag: str = BUSYBOX_TAG, force: bool = False) -> str:
    """Build (or reuse, by tag) the busybox image; returns the tag."""
    if not force and image_exists(client, tag):
        return tag
    repo, _, version = tag.partition(":")
    client.api.import_image_from_data(_busybox_tar(), repository=repo, tag=version or "latest", changes=_CHANGES)
    return tag


def apt_mirror(suite: str = "bookworm") -> str:
    """The Debian mirror this machine's apt uses (any suite: debootstrap asks it for `suite`)."""
    del suite  # one mirror serves every suite; kept for callers that name the suite
    return archive_mirror()


def build_debian_image(
    client: docker.DockerClient,
    tag: str = DEBIAN_TAG,
    force: bool = False,
    suite: str = "bookworm",
    packages: tuple[str, ...] = DEBIAN_PACKAGES,
) -> str:
    """Debootstrap a minbase rootfs of `suite` with `packages` and `docker import` it (a minute or more).

    The mirror comes from the machine's apt sources at run time; debootstrap's `sources.list` naming it is
    emptied (build steps get the machine's sources mounted over it, `images/access.py`) and `/etc/pip.conf` is
    an empty placeholder for the same reason. The image is labelled with its suite.
    """
    if not force and image_exists(client, tag):
        return tag
    if shutil.which("debootstrap") is None:
        raise SandboxError("debootstrap not found: apt-get install debootstrap")
    if os.geteuid() != 0:
        raise SandboxError("debootstrap needs root: run `pivot sandbox build-image` as root")
    with tempfile.TemporaryDirectory(prefix="pivot-rootfs-") as tmp:
        root = Path(tmp) / "rootfs"
        cmd = ["debootstrap", "--variant=minbase", f"--include={','.join(packages)}", suite, str(root), apt_mirror()]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SandboxError(f"debootstrap {suite} failed ({proc.returncode}): {proc.stderr.strip()[-400:]}")
        for junk in ("usr/share/doc", "usr/share/man", "usr/share/info", "var/cache/apt", "var/lib/apt/lists"):
            shutil.rmtree(root / junk, ignore_errors=True)
        (root / "var/lib/apt/lists/partial").mkdir(parents=True, exist_ok=True)
        (root / "var/cache/apt/archives/partial").mkdir(parents=True, exist_ok=True)
        for placeholder in PLACEHOLDERS:
            (root / placeholder.lstrip("/")).write_text("")
        for extra in (root / "etc/apt/sources.list.d").glob("*"):
            extra.unlink()
        with open(root / "etc/passwd", "a") as f:
            f.write("agent:x:1000:1000:agent:/home/agent:/bin/bash\n")
        with open(root / "etc/group", "a") as f:
            f.write("agent:x:1000:\n")
        (root / "home/agent").mkdir(parents=True, exist_ok=True)
        os.chown(root / "home/agent", 1000, 1000)
        archive = Path(tmp) / "rootfs.tar"
        subprocess.run(["tar", "-C", str(root), "-cf", str(archive), "."], check=True)
        repo, _, version = tag.partition(":")
        changes = [*_CHANGES, f"LABEL {LABEL}.suite={suite}"]
        client.api.import_image_from_file(str(archive), repository=repo, tag=version or "latest", changes=changes)
    return tag


# Debian roots of the task base images (`_bases.BASES` maps the names Dockerfiles ask for onto them).
PYTHON_PACKAGES = ("python3", "python3-pip", "python3-venv", "python-is-python3", "bash", "coreutils", "procps")
ROOTS = {
    "pivot-gym/root:trixie": ("trixie", (*PYTHON_PACKAGES, "ca-certificates", "tmux", "asciinema")),
    "pivot-gym/root:bookworm": ("bookworm", (*PYTHON_PACKAGES, "ca-certificates")),
    "pivot-gym/root:bullseye": ("bullseye", (*PYTHON_PACKAGES, "ca-certificates")),
}


def build_root_image(client: docker.DockerClient, tag: str, force: bool = False) -> str:
    """Build (or reuse, by tag) one of the `ROOTS` by debootstrap."""
    if tag not in ROOTS:
        raise SandboxError(f"unknown root image {tag!r}: expected one of {sorted(ROOTS)}")
    suite, packages = ROOTS[tag]
    return build_debian_image(client, tag, force=force, suite=suite, packages=packages)


BUILDERS = {"busybox": build_busybox_image, "debian": build_debian_image}


def ensure_stock_image(client: docker.DockerClient, tag: str) -> None:
    """A backend's own resolver: the image is on the engine, or it is the stock busybox (built in a second)."""
    if image_exists(client, tag):
        return
    if tag == BUSYBOX_TAG:
        build_busybox_image(client, tag)
        return
    hint = "pivot sandbox build-image" + ("" if tag == DEBIAN_TAG else f" --tag {tag}")
    raise SandboxError(f"image {tag!r} is not on this machine (no registry is reachable): build it with `{hint}`")
