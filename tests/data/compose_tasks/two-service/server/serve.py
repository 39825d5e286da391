"""The task's server: GET /greeting answers $GREETING; GET /hits counts the requests it has had."""

import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HITS = [0]


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/hits":
            HITS[0] += 1
            body = f"{HITS[0]}\n"
        elif self.path == "/greeting":
            body = os.environ.get("GREETING", "") + "\n"
        else:
            self.send_error(404)
            return
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("0.0.0.0", 8000), Handler).serve_forever()
