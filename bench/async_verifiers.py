"""Async vs sync verifiers that call an HTTP service: scoring one GRPO group through the chain.

A local HTTP "verification service" (stdlib ThreadingHTTPServer, a fixed per-request latency,
answers accept/reject) stands in for a remote checker such as a company's API validator or a
reward-model server. The same check is written twice:

- sync: `verify` with `httpx.Client` (the chain calls it once per completion, one after another);
- async: `async def verify` with one `httpx.AsyncClient` (the host awaits the group's coroutines
  concurrently on its event loop, each with its own timeout).

Each row scores groups of G completions at one real bundled pivot with `env.score` and reports
wall seconds per group for both and the ratio sync/async. Both answer the same verdicts (checked).

    python bench/async_verifiers.py [--latency-ms 50] [--groups 8,32] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def start_service(latency_s: float) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802  (http.server's naming)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            time.sleep(latency_s)  # the service's own work
            out = json.dumps({"accepted": body["candidate"].strip() == body["expert"].strip()}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args: object) -> None:
            pass

    class Server(ThreadingHTTPServer):
        request_queue_size = 256  # the default backlog (5) stalls a group's concurrent connects
        daemon_threads = True

    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def verifiers(url: str) -> tuple[type, type]:
    import httpx

    from verifiers_plugins import Verdict

    def payload(pivot, action) -> dict:
        return {"expert": pivot.expert.text, "candidate": action.text}

    class SyncHttp:
        timeout = 10.0

        def __init__(self) -> None:
            self.client = httpx.Client(timeout=10.0)

        def verify(self, pivot, action):
            ok = self.client.post(url, json=payload(pivot, action)).json()["accepted"]
            return Verdict(float(ok), ok, "service")

    class AsyncHttp:
        timeout = 10.0

        def __init__(self) -> None:
            self.client: httpx.AsyncClient | None = None

        async def verify(self, pivot, action):
            if self.client is None:  # created on the host's loop, reused by every later call
                self.client = httpx.AsyncClient(timeout=10.0, limits=httpx.Limits(max_connections=64))
            ok = (await self.client.post(url, json=payload(pivot, action))).json()["accepted"]
            return Verdict(float(ok), ok, "service")

    return SyncHttp, AsyncHttp


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency-ms", type=float, default=50.0)
    ap.add_argument("--groups", default="8,32")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    import gymnasium as gym

    import pivot_envs  # noqa: F401
    from pivot_envs import render_completion
    from verifiers_plugins import get_host, hookimpl

    server = start_service(args.latency_ms / 1000)
    sync_cls, async_cls = verifiers(f"http://127.0.0.1:{server.server_address[1]}/verify")

    class Plugin:
        @hookimpl
        def register_verifiers(self, register):
            register("http_sync", sync_cls)
            register("http_async", async_cls)

    get_host().register_plugin(Plugin(), name="bench-http")
    envs = {kind: gym.make("pivot/terminal-v0", verifiers=[f"http_{kind}"]).unwrapped for kind in ("sync", "async")}
    pivot = envs["sync"].pivots[0]
    expert = render_completion(pivot.expert, pivot.domain)

    print(f"service latency {args.latency_ms:g} ms per request; pivot {pivot.id}; best of {args.repeats}")
    print(f"{'group size':>10} | {'sync s/group':>12} | {'async s/group':>13} | {'sync/async':>10}")
    for g in (int(x) for x in args.groups.split(",")):
        group = [expert if i % 2 == 0 else f"echo wrong {i}" for i in range(g)]
        times, rewards = {}, {}
        for kind, env in envs.items():
            env.score(pivot, group[:2])  # warm: connections, the host's loop
            best = float("inf")
            for _ in range(args.repeats):
                t = time.perf_counter()
                results = env.score(pivot, group)
                best = min(best, time.perf_counter() - t)
            times[kind], rewards[kind] = best, [r.reward for r in results]
        assert rewards["sync"] == rewards["async"], "the two ways must give the same verdicts"
        print(f"{g:>10} | {times['sync']:>12.3f} | {times['async']:>13.3f} | {times['sync'] / times['async']:>9.1f}x")
    server.shutdown()


if __name__ == "__main__":
    main()
