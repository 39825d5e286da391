"""`pivot data fetch`: the shipped manifest matches the shared data, and fetching checks every byte."""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources

import pytest
from typer.testing import CliRunner

from pivot_cli import build_app
from pivot_cli._fetch import UPSTREAM, load_manifest

runner = CliRunner()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_the_manifest_names_pinned_public_files_or_bundled_ones():
    manifest = load_manifest()
    assert len(manifest["files"]) > 800 and manifest["derived"]
    for entry in manifest["files"]:
        assert not entry["path"].startswith("/") and ".." not in entry["path"].split("/")
        if "bundled" in entry:
            data = (resources.files("pivot_core") / "data" / entry["bundled"]).read_bytes()
            assert sha(data) == entry["sha256"], entry["path"]
        else:
            # raw.githubusercontent.com/<owner>/<repo>/<40-hex commit>/<path>: a pinned commit, never a branch
            assert re.match(rf"{re.escape(UPSTREAM)}/[\w.-]+/[\w.-]+/[0-9a-f]{{40}}/\S+$", entry["url"]), entry


def test_the_manifest_checksums_match_the_shared_data(shared_data):
    manifest = load_manifest()
    for entry in manifest["files"] + manifest["derived"]:
        data = (shared_data / entry["path"]).read_bytes()
        assert (sha(data), len(data)) == (entry["sha256"], entry["size"]), entry["path"]


@pytest.fixture
def server(tmp_path):
    """A local HTTP server over `tmp_path / "www"`, standing in for raw.githubusercontent.com."""
    www = tmp_path / "www"
    www.mkdir()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(SimpleHTTPRequestHandler, directory=str(www)))
    httpd.RequestHandlerClass.log_message = lambda *a: None
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield www, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_fetch_lays_files_out_and_refuses_a_wrong_checksum(tmp_path, server):
    www, base = server
    good, bad = b'{"row": 1}\n', b'{"row": "tampered"}\n'
    upstream = "owner/repo/" + "a" * 40
    (www / upstream / "data").mkdir(parents=True)
    (www / upstream / "data" / "rows.jsonl").write_bytes(good)
    (www / upstream / "data" / "other.jsonl").write_bytes(bad)
    manifest = tmp_path / "manifest.json"
    manifest.write_text(
        json.dumps(
            {
                "files": [
                    {"path": "nemo/rows.jsonl", "url": f"{UPSTREAM}/{upstream}/data/rows.jsonl", "sha256": sha(good)},
                    {"path": "nemo/other.jsonl", "url": f"{UPSTREAM}/{upstream}/data/other.jsonl", "sha256": sha(good)},
                ],
                "derived": [{"path": "tool_use/converted.jsonl", "sha256": "0" * 64}],
            }
        )
    )
    out = tmp_path / "data"
    args = ["data", "fetch", "--to", str(out), "--manifest", str(manifest), "--mirror", base, "--json"]
    result = runner.invoke(build_app(), args)
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert (out / "nemo" / "rows.jsonl").read_bytes() == good and report["fetched"] == 1
    assert not (out / "nemo" / "other.jsonl").exists()  # the tampered file is refused, not written
    assert report["failed"][0]["path"] == "nemo/other.jsonl" and "checksum mismatch" in report["failed"][0]["reason"]
    assert report["not_fetchable"] == ["tool_use/converted.jsonl"]
    assert [p.name for p in (out / "nemo").iterdir()] == ["rows.jsonl"]  # no temporary file left behind
    # a second run keeps what is already right
    again = json.loads(runner.invoke(build_app(), args).stdout)
    assert again["already_present"] == 1 and again["fetched"] == 0


def test_fetch_of_a_file_the_package_ships_needs_no_network(tmp_path):
    result = runner.invoke(
        build_app(), ["data", "fetch", "--to", str(tmp_path), "--only", "tool_use/tau_bench_airline_tools.json"]
    )
    assert result.exit_code == 0, result.output
    shipped = (resources.files("pivot_core") / "data" / "tau_bench_airline_tools.json").read_bytes()
    assert (tmp_path / "tool_use" / "tau_bench_airline_tools.json").read_bytes() == shipped


def test_without_network_fetch_fails_at_once_with_the_reason(tmp_path):
    with socket.socket() as s:  # a port nothing listens on: the connection is refused at once
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = ["data", "fetch", "--to", str(tmp_path / "d"), "--only", "nemo_gym_pivot_rows/*"]
    result = runner.invoke(build_app(), [*args, "--mirror", f"http://127.0.0.1:{port}"])
    said = " ".join(result.output.split())  # rich wraps the message at the terminal's width
    assert result.exit_code == 2
    assert "cannot reach 127.0.0.1" in said and "needs network access" in said
    assert not (tmp_path / "d").exists()  # nothing written
