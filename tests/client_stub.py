"""A loopback HTTP stub for ``jetpredict.client`` tests: a server in a thread that answers from a script (or
forwards to a live service) and records the requests; the ``stub`` fixture in ``conftest.py`` makes and
closes them."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from werkzeug.http import HTTP_STATUS_CODES


class Stub:
    """A loopback HTTP server that answers from a script, or forwards to ``upstream``; it records requests.

    ``script``: ``(status, headers, body)`` answers in turn (the last one repeats); ``"drop"`` reads the
    request, forwards it to ``upstream`` when set, and closes the connection without an answer; ``"sleep"``
    answers nothing for ``sleep_s``.
    """

    def __init__(self, script: list, upstream: str | None = None, sleep_s: float = 0.0) -> None:
        self.script, self.upstream, self.sleep_s = list(script), upstream, sleep_s
        self.requests: list[dict] = []
        self.times: list[float] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                stub.requests.append({"method": self.command, "path": self.path, "headers": dict(self.headers),
                                      "body": json.loads(body) if body else None})
                stub.times.append(time.monotonic())
                step = stub.script[min(len(stub.requests), len(stub.script)) - 1]
                if step == "sleep":
                    time.sleep(stub.sleep_s)
                    return
                if step in ("drop", "forward"):
                    answer = stub.forward(self.command, self.path, dict(self.headers), body or None)
                    if step == "drop":
                        self.close_connection = True
                        return
                    step = answer
                status, headers, payload = step
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                for k, v in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = _any

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def forward(self, method: str, path: str, headers: dict, body: bytes | None) -> tuple:
        keep = {k: v for k, v in headers.items() if k.lower() not in ("host", "content-length", "connection")}
        request = urllib.request.Request(self.upstream + path, data=body, method=method, headers=keep)
        try:
            with urllib.request.urlopen(request, timeout=30) as r:
                return r.status, {}, r.read()
        except urllib.error.HTTPError as err:
            return err.code, {}, err.read()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def error_body(status: int, message: str, errors: dict | None = None) -> dict:
    """The service's JSON error body for ``status`` (its ``status`` the reason phrase: "Too Many Requests" for
    429), as ``api.errors`` writes it: from werkzeug's table, as the service names statuses (Python's own
    http.HTTPStatus says "Unprocessable Content" for 422 from 3.13)."""
    return {"code": status, "status": HTTP_STATUS_CODES[status], "message": message,
            "errors": errors or {}}
