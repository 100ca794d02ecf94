"""A headless Chromium driven over the DevTools protocol, for the page's browser test and benchmark.

Chromium comes from the system packages (``apt-get install chromium``; ``.ci/run`` installs it) and the
protocol client is ``websocket-client`` (the ``[dev]`` extra). Nothing is downloaded at run time.
``offline=True`` cuts the browser off every host but the loopback one (``--host-resolver-rules``), and
:meth:`Browser.requests` lists every URL the page asked for, so tests can show a page needs no network.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
START_TIMEOUT_S = 30.0


class BrowserError(RuntimeError):
    """The browser could not start, or a page script failed."""


def find_chromium() -> str | None:
    """Path of a Chromium executable (``$JETPREDICT_CHROMIUM`` first), or None."""
    override = os.environ.get("JETPREDICT_CHROMIUM")
    if override:
        return override if shutil.which(override) or Path(override).exists() else None
    return next((path for name in CHROMIUM_NAMES if (path := shutil.which(name))), None)


class Browser:
    """One headless Chromium with one page; use as a context manager."""

    def __init__(self, width: int = 1280, height: int = 1000, offline: bool = False) -> None:
        self.width, self.height, self.offline = width, height, offline
        self.process: subprocess.Popen | None = None
        self._profile = tempfile.TemporaryDirectory(prefix="jetpredict-chromium-", ignore_cleanup_errors=True)
        self._ws: Any = None
        self._next_id = 0
        self._requests: list[str] = []
        self._posts: list[tuple[str, str | None]] = []
        self._console: list[str] = []

    # -- lifecycle ------------------------------------------------------------------------------------
    def start(self) -> Browser:
        import websocket  # websocket-client

        exe = find_chromium()
        if exe is None:
            raise BrowserError("no Chromium found: apt-get install chromium (or set JETPREDICT_CHROMIUM)")
        argv = [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--remote-debugging-port=0", f"--user-data-dir={self._profile.name}",
                f"--window-size={self.width},{self.height}", "about:blank"]
        if self.offline:
            argv.insert(1, "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost")
        self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        port = self._devtools_port()
        targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10).read())
        page = next(t for t in targets if t.get("type") == "page")
        # Every POST body comes with its request event (twice: as text and as base64 entries), 27 MB over the
        # switching test; websocket-client checks each text frame's UTF-8 byte by byte in Python (that test's
        # file took 53 CPU-s with the check, 40 without; ad hoc, 2026-12-06) before its strict
        # bytes.decode("utf-8"), which refuses bad UTF-8 as well, in C.
        self._ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=60, suppress_origin=True,
                                               skip_utf8_validation=True)
        self.call("Page.enable")
        self.call("Runtime.enable")
        # POST bodies up to 8 MB travel with the request events (a built-in workload's rows are ~100 kB)
        self.call("Network.enable", maxPostDataSize=8 << 20)
        self.call("Log.enable")  # CSP violations and failed loads are reported here
        self.call("Emulation.setDeviceMetricsOverride", width=self.width, height=self.height,
                  deviceScaleFactor=1, mobile=False)
        return self

    def _devtools_port(self) -> int:
        assert self.process is not None and self.process.stderr is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        seen = []
        while time.monotonic() < deadline:
            line = self.process.stderr.readline()
            if not line:
                if self.process.poll() is not None:
                    break
                continue
            seen.append(line)
            match = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
            if match:
                return int(match.group(1))
        raise BrowserError("Chromium did not start: " + "".join(seen[-5:]).strip())

    def close(self) -> None:
        """Ask Chromium to quit (it stops its helper processes), then make sure, then remove the profile."""
        if self._ws is not None:
            with contextlib.suppress(Exception):  # already gone: nothing to ask
                self._ws.send(json.dumps({"id": self._next_id + 1, "method": "Browser.close", "params": {}}))
            with contextlib.suppress(OSError):
                self._ws.close()
            self._ws = None
        if self.process is not None:
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.terminate()
                try:
                    self.process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
            self.process = None
        self._profile.cleanup()  # ignore_cleanup_errors: a helper may still flush a cache file

    def __enter__(self) -> Browser:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- protocol -------------------------------------------------------------------------------------
    def call(self, method: str, **params: Any) -> dict:
        """Send one DevTools command and return its result (events met meanwhile are recorded)."""
        self._next_id += 1
        msg_id = self._next_id
        self._ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            message = json.loads(self._ws.recv())
            if message.get("id") == msg_id:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error'].get('message')}")
                return message.get("result", {})
            self._event(message)

    def _event(self, message: dict) -> None:
        method = message.get("method")
        params = message.get("params", {})
        if method == "Network.requestWillBeSent":
            request = params["request"]
            self._requests.append(request["url"])
            if request.get("method") == "POST":
                self._posts.append((request["url"], request.get("postData")))
        elif method == "Runtime.exceptionThrown":
            self._console.append("exception: " + params["exceptionDetails"].get("text", ""))
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            self._console.append(f"{params['entry'].get('source')}: {params['entry'].get('text')}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning"):
            self._console.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params["args"]))

    def evaluate(self, expression: str, await_promise: bool = True) -> Any:
        """The JSON value of a page expression (a Promise is awaited)."""
        result = self.call("Runtime.evaluate", expression=expression, awaitPromise=await_promise,
                           returnByValue=True)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise BrowserError(f"page script failed: {text}")
        return result.get("result", {}).get("value")

    def navigate(self, url: str, timeout_s: float = 30.0) -> None:
        """Open ``url`` and wait until the document has loaded."""
        self.call("Page.navigate", url=url)
        self.wait_for(f"location.href === {json.dumps(url)} && document.readyState === 'complete'", timeout_s)

    def wait_for(self, condition: str, timeout_s: float = 30.0, poll_s: float = 0.05) -> Any:
        """Poll a page expression until it is truthy; its value, or BrowserError with the page's errors."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            # A DOM node cannot travel by value: it counts as true.
            value = self.evaluate(f"(() => {{ try {{ const v = ({condition}); return v && v.nodeType ? true : v; }} "
                                  "catch (e) { return null; } })()")
            if value:
                return value
            time.sleep(poll_s)
        raise BrowserError(f"timed out after {timeout_s:g} s waiting for {condition}; page errors: "
                           f"{self._console[-5:]}")

    def screenshot(self, path: str | Path, full_page: bool = True) -> Path:
        """Write a PNG of the page (the whole document with ``full_page``)."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            params["clip"] = {"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1}
            params["captureBeyondViewport"] = True
        data = self.call("Page.captureScreenshot", **params)["data"]
        path = Path(path)
        path.write_bytes(base64.b64decode(data))
        return path

    @contextlib.contextmanager
    def scripts_on_new_documents(self, *sources: str) -> Iterator[None]:
        """Run ``sources`` in order at the start of every document loaded in the block, and in none after it."""
        hooks: list[str] = []
        try:
            for source in sources:
                hooks.append(self.call("Page.addScriptToEvaluateOnNewDocument", source=source)["identifier"])
            yield
        finally:
            for hook in hooks:
                self.call("Page.removeScriptToEvaluateOnNewDocument", identifier=hook)

    def set_files(self, selector: str, paths: list[str | Path]) -> None:
        """Choose ``paths`` in the page's ``<input type=file>`` at ``selector`` (as a user picking files)."""
        root = self.call("DOM.getDocument", depth=0)["root"]["nodeId"]
        node = self.call("DOM.querySelector", nodeId=root, selector=selector)["nodeId"]
        if not node:
            raise BrowserError(f"no element matches {selector!r}")
        self.call("DOM.setFileInputFiles", nodeId=node, files=[str(Path(p).resolve()) for p in paths])

    def requests(self) -> list[str]:
        """Every URL the page has requested so far."""
        return list(self._requests)

    def posts(self) -> list[tuple[str, str | None]]:
        """(URL, body) of every POST the page has sent so far (body None if Chromium did not keep it)."""
        return list(self._posts)

    def errors(self) -> list[str]:
        """Uncaught exceptions and console errors/warnings seen so far."""
        return list(self._console)
