"""A real OpenAI-compatible server for a local model folder: `transformers serve`, as a child process.

The judge tests and `bench/real_model.py` ask a real model through HTTP exactly as `llm_judge`
asks a hosted one. transformers ships the server (its `serving` extra); this only starts it on a
free loopback port, waits until it lists the model, and stops the process it started.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from trainers.errors import BackendError


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve_model(folder: str | Path, startup_timeout: float = 180.0, log: str | Path | None = None) -> Iterator[str]:
    """Run `transformers serve FOLDER` on 127.0.0.1 and yield its API root (`http://127.0.0.1:P/v1`).

    The served model's name is the folder path as given (`str(folder)`); pass it as the request's
    `model`. The process is terminated (then killed) on exit.

    Raises:
        BackendError: the server exited or did not list the model within `startup_timeout` seconds
            (the end of its log in the message).
    """
    import httpx

    port = _free_port()
    cmd = [sys.executable, "-m", "transformers.cli.transformers", "serve", str(folder)]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--device", "cpu", "--log-level", "warning"]
    log_path = Path(log) if log is not None else None
    sink = log_path.open("w") if log_path is not None else subprocess.DEVNULL
    proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT if log_path else subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + startup_timeout
        while True:
            if proc.poll() is not None:
                tail = log_path.read_text()[-800:] if log_path else (proc.stderr.read() if proc.stderr else "")[-800:]
                raise BackendError(f"`transformers serve` exited with {proc.returncode}: {tail}")
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise BackendError(f"`transformers serve {folder}` did not answer within {startup_timeout:.0f} s")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if log_path is not None:
            sink.close()
