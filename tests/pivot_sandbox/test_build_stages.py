"""Multi-stage plans, `COPY --from=` archives and Ubuntu apt steps on Debian, without a Docker engine.

The builds themselves (a builder stage, uv served from PyPI, an Ubuntu pin dropped) are in
test_harbor_tasks.py, on the CI task folders `staged-words` and `ubuntu-done-count`.
"""

from __future__ import annotations

import io
import shutil
import tarfile
from pathlib import Path

import pytest

from pivot_sandbox.errors import DockerfileError
from pivot_sandbox.images import dockerfile as df
from pivot_sandbox.images.bases import swapped_release
from pivot_sandbox.images.stages import needed, plan_stages, retarget, uv_version
from pivot_sandbox.images.ubuntu_apt import debian_apt_steps, on_debian
from pivot_sandbox.tasks.terminal_bench import load_task, task_image

TASKS = Path(__file__).resolve().parents[1] / "data" / "harbor_tasks"

TB2_SHAPED = """\
FROM ubuntu:24.04 as build
COPY --from=ghcr.io/astral-sh/uv:0.8.14 /uv /uvx /bin/
RUN uv run /root/randomize.py
FROM python:3.13-slim AS docs
RUN make docs
FROM ubuntu:24.04 AS target
COPY --from=ghcr.io/astral-sh/uv:0.8.14 /uv /uvx /bin/
COPY --from=build /app/documents /app/documents
"""


def test_only_the_stages_the_last_one_copies_from_are_planned():
    ins = df.parse(TB2_SHAPED, "Dockerfile")
    assert [(s.name, s.image) for s in plan_stages(ins)] == [("build", "ubuntu:24.04"), ("target", "ubuntu:24.04")]
    assert "make docs" not in [i.args for i in needed(ins)]
    # by number too, transitively: 2 copies from 1, which copies from 0
    chain = df.parse("FROM a\nRUN x\nFROM b\nCOPY --from=0 /x /x\nFROM c\nCOPY --from=1 /x /x\n")
    assert [s.index for s in plan_stages(chain)] == [0, 1, 2]
    assert uv_version("ghcr.io/astral-sh/uv:0.8.14") == "0.8.14" and uv_version("ghcr.io/astral-sh/uv") == ""
    assert uv_version("ghcr.io/astral-sh/uv:0.8.14-python3.12-bookworm") is None and uv_version("nginx:1") is None


def test_copy_from_an_image_no_registry_serves_is_refused_naming_image_and_line():
    text = TB2_SHAPED.replace(
        "/app/documents /app/documents",
        "/app/documents /app/documents\nCOPY --from=docker.io/library/nginx:1.27 /etc/nginx /etc/nginx",
    )
    with pytest.raises(DockerfileError, match=r"Dockerfile:9: COPY --from=docker.io/library/nginx:1.27: the image "):
        plan_stages(df.parse(text, "Dockerfile"))
    with pytest.raises(DockerfileError, match=r"t/Dockerfile:2: .*only /uv and /uvx are served .*'/bin/sh'"):
        plan_stages(df.parse("FROM a\nCOPY --from=ghcr.io/astral-sh/uv:0.8.14 /bin/sh /x\n", "t/Dockerfile"))
    with pytest.raises(DockerfileError, match=r"t/Dockerfile:3: FROM build \(a stage of this Dockerfile as a base\)"):
        plan_stages(df.parse("FROM a AS build\nRUN true\nFROM build\n", "t/Dockerfile"))


def test_a_task_copying_from_an_unreachable_image_is_skipped_before_any_build(tmp_path):
    folder = tmp_path / "staged-words"
    shutil.copytree(TASKS / "staged-words", folder)
    dockerfile = folder / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "COPY --from=alpine:3.20 /etc/alpine-release /app/\n")
    line = len(dockerfile.read_text().splitlines())
    report = task_image(None, load_task(folder))  # no Docker client: refused before a base is looked for
    assert report.status == "skipped"
    assert f"Dockerfile:{line}: COPY --from=alpine:3.20: the image 'alpine:3.20' cannot be fetched" in report.reason


def _tar(entries: dict[str, bytes | None]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in entries.items():
            info = tarfile.TarInfo(name)
            info.uid = info.gid = 1000
            if data is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size, info.mode = len(data), 0o755
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _names(archive) -> dict[str, tuple[int, int]]:
    with tarfile.open(fileobj=archive) as tar:
        return {m.name: (m.uid, m.mode) for m in tar}


def test_an_archive_from_another_stage_lands_where_copy_puts_it():
    folder = _tar({"documents": None, "documents/a.pdf": b"a", "documents/sub": None, "documents/sub/b.jpg": b"b"})
    # docker's get_archive streams the tar in chunks
    chunks = [folder[i : i + 100] for i in range(0, len(folder), 100)]
    assert _names(retarget(chunks, "/app/documents", as_dir=False)) == {
        "app/documents": (0, 0o755),
        "app/documents/a.pdf": (0, 0o755),
        "app/documents/sub": (0, 0o755),
        "app/documents/sub/b.jpg": (0, 0o755),
    }
    binary = _tar({"uv": b"\x7fELF"})
    assert list(_names(retarget([binary], "/bin", as_dir=True))) == ["bin/uv"]
    assert list(_names(retarget([binary], "/usr/local/bin/uv2", as_dir=False))) == ["usr/local/bin/uv2"]


def test_ubuntu_pins_are_dropped_and_names_mapped_on_debian():
    text = (
        "apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "
        "texlive-latex-base=2023.20240207-1 python3.12-venv jq 'wget=1.21.4-1ubuntu4.1' curl/noble-updates "
        "&& apt-get clean; echo done=1"
    )
    new, notes = on_debian(text, "Dockerfile:6")
    assert new == (
        "apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "
        "texlive-latex-base python3-venv jq wget curl && apt-get clean; echo done=1"
    )
    assert notes == [
        "Dockerfile:6: texlive-latex-base=2023.20240207-1 -> texlive-latex-base (Ubuntu's version pin dropped)",
        "Dockerfile:6: python3.12-venv -> python3-venv (Debian's name for python3.12-venv)",
        "Dockerfile:6: wget=1.21.4-1ubuntu4.1 -> wget (Ubuntu's version pin dropped)",
        "Dockerfile:6: curl/noble-updates -> curl (Ubuntu's release dropped)",
    ]
    assert on_debian("apt install -y $PKGS ./local.deb gcc", "x") == ("apt install -y $PKGS ./local.deb gcc", [])
    with pytest.raises(DockerfileError, match=r"Dockerfile:3: apt package 'software-properties-common' is Ubuntu's"):
        on_debian("apt-get install -y software-properties-common", "Dockerfile:3")


def test_only_the_stages_on_a_swapped_ubuntu_base_are_rewritten():
    ins = df.parse(
        "FROM ubuntu:24.04 AS a\nRUN apt-get install -y jq=1.7.1-3build1\nFROM debian:13\n"
        "RUN apt-get install -y jq=1.7.1-3\n",
        "Dockerfile",
    )
    out, notes = debian_apt_steps(ins, {"a": "Ubuntu"})
    assert [i.args for i in out if i.keyword == "RUN"] == ["apt-get install -y jq", "apt-get install -y jq=1.7.1-3"]
    assert notes == ["Dockerfile:2: jq=1.7.1-3build1 -> jq (Ubuntu's version pin dropped)"]


def test_a_bookworm_tag_built_on_trixie_gets_trixie_names_and_loses_bookworm_pins():
    # TB2's build-cython-ext: FROM python:3.13-slim-bookworm, `apt-get install ... libgl1-mesa-glx` (gone in trixie)
    assert swapped_release("python:3.13-slim-bookworm") == "Debian bookworm"
    assert swapped_release("ubuntu:24.04") == "Ubuntu"
    assert swapped_release("python:3.13-slim") == swapped_release("python:3.11-slim-bookworm") == ""
    assert swapped_release("debian:bookworm-slim") == swapped_release("no/such:image") == ""
    text = "apt-get install -y git libgl1-mesa-glx curl=7.88.1-10+deb12u12 software-properties-common"
    new, notes = on_debian(text, "Dockerfile:7", "Debian bookworm")
    assert new == "apt-get install -y git libgl1 curl software-properties-common"
    assert notes == [
        "Dockerfile:7: libgl1-mesa-glx -> libgl1 (trixie's name for libgl1-mesa-glx)",
        "Dockerfile:7: curl=7.88.1-10+deb12u12 -> curl (Debian bookworm's version pin dropped)",
    ]
    ins = df.parse("FROM python:3.13-slim-bookworm\nRUN apt-get install -y libgl1-mesa-glx\n", "Dockerfile")
    out, _ = debian_apt_steps(ins, {ins[0].stage or "0": "Debian bookworm"})
    assert [i.args for i in out if i.keyword == "RUN"] == ["apt-get install -y libgl1"]
