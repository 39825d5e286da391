"""Build-time registry access: the machine's own apt sources, pip configuration and CA bundle, read at run time.

Build steps (`RUN apt-get ...`, `RUN pip install ...`) and the replay of an expert's set-up may reach the
package registries this machine is configured for, and nothing else of the machine: the container that runs
them uses the host network and gets three files bind-mounted over placeholders of the image, so nothing of
them is written into the repository, a layer or the image metadata (`docker commit` does not record mounts):

- `/etc/apt/sources.list`: the machine's Debian sources (`/etc/apt/sources.list(.d)`) for the image's suite;
- `/etc/pip.conf`: the index URLs of the machine's pip configuration (`pip config list`, `PIP_INDEX_URL`,
  `PIP_EXTRA_INDEX_URL`), network ones only (a `file://` index is a folder of this machine);
- `/etc/ssl/certs/ca-certificates.crt`: the machine's CA bundle (pip's `cert`, `PIP_CERT`, or the system one).

Containers that run candidates never get any of it: they keep `--network none`. An episode opened with
`network="registries"` gets the same files through a proxy that reaches these registries only
(`proxied_access`, `registry_endpoints`; `docker/registries.py`).
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from pivot_sandbox.errors import SandboxError

SOURCES_TARGET = "/etc/apt/sources.list"
PIP_TARGET = "/etc/pip.conf"
CA_TARGET = "/etc/ssl/certs/ca-certificates.crt"
APT_PROXY_TARGET = "/etc/apt/apt.conf.d/99pivot-registries"  # apt's proxy, for an episode with registry access
# Files every image built here carries (empty) so that the mounts above cover a file and leave no mount point.
PLACEHOLDERS = (SOURCES_TARGET, PIP_TARGET)
_SYSTEM_CA = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt")


@dataclass(frozen=True)
class AptSource:
    """One deb822 stanza of the machine's apt configuration.

    Attributes:
        uri: the mirror URI.
        suites: suite names as the machine writes them (e.g. "bookworm", "bookworm-updates").
        components: archive components.
        security: True for the security archive.
    """

    uri: str
    suites: tuple[str, ...]
    components: tuple[str, ...]
    security: bool


@dataclass(frozen=True)
class BuildAccess:
    """What a build container gets: host network and `mounts` (host file, container path), all read-only."""

    mounts: tuple[tuple[str, str], ...]
    hosts: frozenset[str]

    def docker_mounts(self) -> list[object]:
        """The mounts as docker SDK `Mount` objects."""
        from docker.types import Mount

        return [Mount(target, source, type="bind", read_only=True) for source, target in self.mounts]


def machine_codename() -> str:
    """The Debian codename of this machine (`/etc/os-release`), the suite its apt sources name."""
    text = Path("/etc/os-release").read_text() if Path("/etc/os-release").is_file() else ""
    m = re.search(r"^VERSION_CODENAME=\"?([a-z]+)", text, re.M)
    return m.group(1) if m else ""


def apt_sources() -> list[AptSource]:
    """The machine's Debian sources, from deb822 `.sources` files and one-line `sources.list` files."""
    folder = Path("/etc/apt/sources.list.d")
    files = sorted(folder.glob("*.sources")) + sorted(folder.glob("*.list")) + [Path("/etc/apt/sources.list")]
    out: list[AptSource] = []
    for path in files:
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        if path.suffix == ".sources":
            for stanza in re.split(r"\n\s*\n", text):
                uris = re.search(r"^URIs:\s*(.+)$", stanza, re.M)
                suites = re.search(r"^Suites:\s*(.+)$", stanza, re.M)
                comps = re.search(r"^Components:\s*(.+)$", stanza, re.M)
                types = re.search(r"^Types:\s*(.+)$", stanza, re.M)
                enabled = re.search(r"^Enabled:\s*no", stanza, re.M | re.I)
                if not (uris and suites) or enabled or (types and "deb" not in types.group(1).split()):
                    continue
                for uri in uris.group(1).split():
                    out.append(_source(uri, suites.group(1).split(), comps.group(1).split() if comps else ["main"]))
            continue
        for line in text.splitlines():
            m = re.match(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)\s*(.*)$", line.strip())
            if m:
                out.append(_source(m.group(1), [m.group(2)], m.group(3).split() or ["main"]))
    return [s for s in out if "debian" in urlparse(s.uri).path or "debian" in urlparse(s.uri).netloc]


def _source(uri: str, suites: list[str], components: list[str]) -> AptSource:
    security = "security" in uri or any(s.endswith("-security") or "/updates" in s for s in suites)
    return AptSource(uri.rstrip("/"), tuple(suites), tuple(components), security)


def archive_mirror() -> str:
    """The main (non-security) Debian mirror of this machine, for debootstrap."""
    for source in apt_sources():
        if not source.security:
            return source.uri
    raise SandboxError("no Debian apt source in /etc/apt/sources.list(.d): cannot tell which mirror to use")


def sources_for(suite: str) -> str:
    """One-line apt sources for `suite`, built from the machine's mirrors (its suites renamed to `suite`)."""
    machine = machine_codename()
    lines: list[str] = []
    for source in apt_sources():
        comps = " ".join(source.components)
        for name in source.suites:
            renamed = name.replace(machine, suite, 1) if machine and name.startswith(machine) else name
            if not renamed.startswith(suite):
                continue  # a suite of another release (backports of the machine's own, ...)
            line = f"deb {source.uri} {renamed} {comps}"
            if line not in lines:
                lines.append(line)
    if not lines:
        raise SandboxError(f"no apt source this machine uses can serve {suite!r} (read /etc/apt/sources.list(.d))")
    return "\n".join(lines) + "\n"


def _pip_config() -> dict[str, str]:
    """`pip config list` of the machine as {key: value}, plus the PIP_* environment variables."""
    values: dict[str, str] = {}
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60
        )
        for line in proc.stdout.splitlines():
            key, _, value = line.partition("=")
            values[key.split(".", 1)[-1].strip()] = value.strip().strip("'\"")
    except (OSError, subprocess.TimeoutExpired):
        pass
    for env, key in (("PIP_INDEX_URL", "index-url"), ("PIP_EXTRA_INDEX_URL", "extra-index-url"), ("PIP_CERT", "cert")):
        if os.environ.get(env):
            values[key] = os.environ[env]
    return values


def pip_indexes() -> tuple[str | None, list[str]]:
    """(index-url or None for pip's default, extra network index URLs) of the machine's pip configuration."""
    config = _pip_config()
    index = config.get("index-url") or None
    extras = [u for u in config.get("extra-index-url", "").split() if urlparse(u).scheme in ("http", "https")]
    if index and urlparse(index).scheme not in ("http", "https"):
        index = None
    return index, extras


def ca_bundle() -> str:
    """The CA bundle this machine trusts (pip's `cert`, else the system bundle)."""
    cert = _pip_config().get("cert")
    for cand in ([cert] if cert else []) + list(_SYSTEM_CA):
        if cand and Path(cand).is_file():
            return cand
    raise SandboxError("no CA bundle on this machine (pip `cert`, /etc/ssl/certs/ca-certificates.crt)")


def registry_hosts() -> frozenset[str]:
    """Host names of the registries a build step may reach: the apt mirrors and the pip indexes (pip's default)."""
    hosts = {urlparse(s.uri).hostname or "" for s in apt_sources()}
    index, extras = pip_indexes()
    for url in ([index] if index else []) + extras:
        hosts.add(urlparse(url).hostname or "")
    if index is None:
        from pip._internal.models.index import PyPI  # pip's own default index and its file host

        hosts.update({PyPI.netloc, PyPI.file_storage_domain})
    return frozenset(h for h in hosts if h)


def registry_endpoints() -> frozenset[tuple[str, int]]:
    """(host, port) pairs a registry proxy lets through: each of `registry_hosts` on 80, 443 and its URLs' own ports."""
    ports = {80, 443}
    index, extras = pip_indexes()
    for url in [s.uri for s in apt_sources()] + ([index] if index else []) + extras:
        try:
            port = urlparse(url).port
        except ValueError:
            continue
        if port:
            ports.add(port)
    return frozenset((host.lower(), port) for host in registry_hosts() for port in ports)


def _pip_lines(proxy: str | None = None) -> list[str]:
    """The `/etc/pip.conf` a container with registry access gets: the machine's indexes, its CA bundle, a proxy."""
    index, extras = pip_indexes()
    pip_lines = ["[global]", f"cert = {CA_TARGET}"]
    if index:
        pip_lines.append(f"index-url = {index}")
    if extras:
        pip_lines.append("extra-index-url = " + " ".join(extras))
    if proxy:
        pip_lines.append(f"proxy = {proxy}")
    return pip_lines


@functools.cache
def build_access(suite: str) -> BuildAccess:
    """Write this build's three files into a private temporary folder and describe their mounts."""
    folder = Path(tempfile.mkdtemp(prefix="pivot-build-access-"))
    (folder / "sources.list").write_text(sources_for(suite))
    (folder / "pip.conf").write_text("\n".join(_pip_lines()) + "\n")
    mounts = (
        (str(folder / "sources.list"), SOURCES_TARGET),
        (str(folder / "pip.conf"), PIP_TARGET),
        (ca_bundle(), CA_TARGET),
    )
    return BuildAccess(mounts, registry_hosts())


@functools.cache
def proxied_access(suite: str, proxy: str) -> BuildAccess:
    """`build_access`'s files for a container whose only way out is the registry proxy at `proxy` (http://ip:port).

    pip and apt are told to use the proxy (pip's `proxy`, apt's `Acquire::http(s)::Proxy` in
    `APT_PROXY_TARGET`); the container itself has no other route (`docker/registries.py`).
    """
    access = build_access(suite)
    folder = Path(tempfile.mkdtemp(prefix="pivot-registry-access-"))
    (folder / "pip.conf").write_text("\n".join(_pip_lines(proxy)) + "\n")
    (folder / "apt-proxy.conf").write_text(f'Acquire::http::Proxy "{proxy}/";\nAcquire::https::Proxy "{proxy}/";\n')
    mounts = tuple((str(folder / "pip.conf"), t) if t == PIP_TARGET else (h, t) for h, t in access.mounts)
    return BuildAccess((*mounts, (str(folder / "apt-proxy.conf"), APT_PROXY_TARGET)), access.hosts)
