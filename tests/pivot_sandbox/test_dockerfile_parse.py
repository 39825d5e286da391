"""The Dockerfile reader on dockerfile-parse: stages, here-documents, continuations, directives, errors, tasks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pivot_sandbox.images import build as _build
from pivot_sandbox.images import dockerfile as df

DATA = Path(df.__file__).resolve().parents[2] / "pivot_core" / "data"


def _shape(instructions):
    return " ".join(f"{i.keyword}:{i.line}" for i in instructions)


MULTI_STAGE = """\
# syntax=docker/dockerfile:1
ARG BASE=ubuntu:24.04
FROM --platform=linux/amd64 ${BASE} AS Build
RUN make
FROM ubuntu:24.04
COPY --from=build /out /app
COPY --from=ghcr.io/astral-sh/uv:0.8.14 /uv /bin/
FROM scratch AS final
COPY --from=1 /app /app
"""


def test_multi_stage_names_each_stage_and_keeps_copy_from():
    ins = df.parse(MULTI_STAGE, "Dockerfile")
    assert _shape(ins) == "ARG:2 FROM:3 RUN:4 FROM:5 COPY:6 COPY:7 FROM:8 COPY:9"
    # named stages lower-case (docker compares them so), the unnamed one by its number, global ARGs ""
    assert [i.stage for i in ins] == ["", "build", "build", "1", "1", "1", "final", "final"]
    assert ins[1].flags == {"platform": "linux/amd64"} and ins[1].args == "${BASE} AS Build"
    assert [i.flags.get("from") for i in ins if i.keyword == "COPY"] == ["build", "ghcr.io/astral-sh/uv:0.8.14", "1"]
    assert ins[4].args == "/out /app"


def test_the_builder_refuses_what_it_cannot_run_before_touching_docker():
    # every stage is built (final <- 1 <- build; uv's image served from PyPI); another image is refused
    foreign = MULTI_STAGE.replace("ghcr.io/astral-sh/uv:0.8.14", "docker.io/library/nginx:1.27")
    with pytest.raises(df.DockerfileError, match=r"Dockerfile:7: COPY --from=docker.io/library/nginx:1.27: the image"):
        # no client at all: the check comes before the build container
        _build.build(None, df.parse(foreign, "Dockerfile"), Path("."), "base", "tag", None)
    _build.check_supported(df.parse(MULTI_STAGE, "Dockerfile"))
    with pytest.raises(
        df.DockerfileError, match=r"t/Dockerfile:3: FROM build \(a stage of this Dockerfile as a base\)"
    ):
        _build.check_supported(df.parse("FROM a AS build\nRUN true\nFROM build\n", "t/Dockerfile"))
    _build.check_supported(df.parse("FROM a AS only\nRUN true\n"))  # one named stage is fine


HEREDOCS = """\
FROM a
RUN <<EOF
set -e
FROM looks like an instruction
# and this like a comment
echo ends with a backslash \\
EOF
RUN python3 - <<'PY' > /out <<-EOT2
print("hi")
PY
\tindented
\tEOT2
COPY <<EOT /app/notes.txt
line one
EOT
RUN cat <<<"a here-string, no here-document"
ENV AFTER=1
"""


def test_heredocs_are_cut_out_of_the_text_and_kept_on_their_instruction():
    ins = df.parse(HEREDOCS, "Dockerfile")
    assert _shape(ins) == "FROM:1 RUN:2 RUN:8 COPY:13 RUN:16 ENV:17"
    assert ins[1].args == "<<EOF" and ins[1].heredocs == (
        "set -e\nFROM looks like an instruction\n# and this like a comment\necho ends with a backslash \\\n",
    )
    assert ins[2].heredocs == ('print("hi")\n', "indented\n")  # <<- strips the leading tabs
    assert ins[3].heredocs == ("line one\n",) and ins[3].args == "<<EOT /app/notes.txt"
    assert ins[4].heredocs == () and ins[5].pairs() == {"AFTER": "1"}


def test_heredoc_without_end_names_the_instruction_line():
    with pytest.raises(df.DockerfileError, match=r"x/Dockerfile:3: here-document <<PY is never closed"):
        df.parse("FROM a\nRUN true\nRUN python3 <<PY\nprint(1)\n", "x/Dockerfile")


def test_continuations_join_stripped_lines_and_skip_comments():
    text = (
        "FROM a\r\n"
        "RUN apt-get update && \\\r\n"
        "    # a comment inside the continuation\r\n"
        "    apt-get install -y \\\r\n"
        "\tgit   curl\r\n"
        "COPY --chown=1000:1000 \\\n"
        "  --chmod=755 src/ /app/\n"
        "RUN echo last \\"  # the file ends inside a continuation
    )
    ins = df.parse(text, "Dockerfile")
    assert _shape(ins) == "FROM:1 RUN:2 COPY:6 RUN:8"
    assert ins[1].args == "apt-get update && apt-get install -y git   curl"
    assert ins[2].flags == {"chown": "1000:1000", "chmod": "755"} and ins[2].args == "src/ /app/"
    assert ins[3].args == "echo last"


def test_directives_syntax_is_a_comment_and_escape_changes_the_continuation():
    text = "# syntax=docker/dockerfile:1.7\n# escape=`\nFROM a\nRUN dir C:\\ `\n    /b\nWORKDIR C:\\app\\\nUSER me\n"
    ins = df.parse(text, "Dockerfile")
    assert _shape(ins) == "FROM:3 RUN:4 WORKDIR:6 USER:7"
    assert ins[1].args == "dir C:\\ /b" and ins[2].args == "C:\\app\\"
    # a directive after the first instruction is an ordinary comment
    late = df.parse("FROM a\n# escape=`\nRUN a \\\n  b\n", "Dockerfile")
    assert late[1].args == "a b"


@pytest.mark.parametrize(
    ("text", "fragment", "message"),
    [
        ("FROM a\nRUN a \\\n  b\nFORM c\n", False, r"D:4: unknown instruction 'FORM'"),
        ("FROM a\nENV A=1 \\\n  B\n", False, r"D:2: malformed ENV pair: .*can't find = in \"B\""),
        ('FROM a\nLABEL a="open\n', False, r"D:2: LABEL has an unclosed \" in"),
        ("# nothing\n", False, r"D:1: no FROM instruction"),
        ("ARG V=1\nRUN true\nFROM a\n", False, r"D:2: RUN before the first FROM \(only ARG may come before it\)"),
        ("FROM a AS x\nFROM b AS X\n", False, r"D:2: stage name 'X' is used twice"),
        ("RUN true\nFROM a\n", True, r"D:2: FROM in steps appended to another Dockerfile"),
    ],
)
def test_errors_name_file_and_line(text, fragment, message):
    with pytest.raises(df.DockerfileError, match=message):
        [ins.pairs() for ins in df.parse(text, "D", fragment=fragment) if ins.keyword in ("ENV", "LABEL", "ARG")]


def test_pairs_read_env_label_and_arg_as_docker_does():
    ins = df.parse(
        'ARG A B=2 "C=x y"\nFROM a\nENV PATH /opt/bin:$PATH\nENV K=1 Q="two words" E=\nLABEL "org.x"="v"\n', "D"
    )
    assert ins[0].pairs() == {"A": "", "B": "2", "C": "x y"}
    assert ins[2].pairs() == {"PATH": "/opt/bin:$PATH"}  # the legacy form; variables are left for substitute
    assert ins[3].pairs() == {"K": "1", "Q": "two words", "E": ""}
    assert ins[4].pairs() == {"org.x": "v"} == df._pairs(ins[4].args, ins[4].where, "LABEL")


# Each bundled Terminal-Bench task Dockerfile, as the hand-written parser read it before dockerfile-parse.
BUNDLED = {
    "hello-world": "FROM:2",
    "aimo-airline-departures": "FROM:3 RUN:5 WORKDIR:10",
    "blind-maze-explorer-5x5": "FROM:2 RUN:5 WORKDIR:9 COPY:12 COPY:13 COPY:14 RUN:15 COPY:18 RUN:19 COPY:22 RUN:25"
    " CMD:28",
}


def test_every_bundled_task_dockerfile_reads_as_before():
    found = {p.parent.name: p for p in DATA.rglob("Dockerfile")}
    assert set(found) == set(BUNDLED)
    read = {name: df.parse(path.read_text(), str(path)) for name, path in found.items()}
    assert {name: _shape(ins) for name, ins in read.items()} == BUNDLED
    assert read["aimo-airline-departures"][1].args == "apt-get update && apt-get install -y python3-pip vim nano"
    assert read["blind-maze-explorer-5x5"][1].args == "mkdir -p /protected && chmod 700 /protected"
    assert all(i.stage == "0" and not i.flags and not i.heredocs for ins in read.values() for i in ins)


def test_the_library_is_imported_only_when_a_dockerfile_is_read():
    # the minimal install imports images.build (pivot_sandbox._bounds) but has no sandbox extra
    code = (
        "import sys\n"
        "import pivot_sandbox.images.build\n"
        "assert 'dockerfile_parse' not in sys.modules\n"
        "sys.modules['dockerfile_parse'] = None\n"
        "from pivot_sandbox.images import dockerfile as df\n"
        "try:\n"
        "    df.parse('FROM a\\n')\n"
        "except ModuleNotFoundError as e:\n"
        "    print(e)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "pip install 'pivot-gym[sandbox]'" in proc.stdout
