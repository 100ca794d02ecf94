"""Failures in a real headless Chromium: the service down and back (the next choice loads again), a proxy's
502, a service that never answers, refused uploads, a start whose limits failed; the old answer dimmed and not
copyable meanwhile."""

from __future__ import annotations

import os
import re
import socket
import time
from pathlib import Path

import requests
from page_browser_support import (
    BROWSER_TESTS,
    READY,
    choose,
    errors_since,
    ready_for,
)

from tools.testing import LiveServer

pytestmark = BROWSER_TESTS


def _hold_port(port: int, timeout_s: float = 15.0) -> socket.socket:
    """Bind ``port`` without listening (a connection is refused, as with no service there), so that no other
    process's ``free_port()`` (another xdist worker's) is handed the page's origin while the service is
    down. SO_REUSEADDR, as the service binds (``serve``'s port check and gunicorn or Flask's server): the
    restarted service binds and listens beside it; a plain bind, as ``free_port()``'s, is refused. Retried
    while the stopped service's processes let go of the port."""
    deadline = time.monotonic() + timeout_s
    while True:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return s
        except OSError as exc:
            s.close()
            if time.monotonic() > deadline:
                raise RuntimeError(f"port {port}, the page's origin, stayed in use for {timeout_s:g} s after the "
                                   f"service was stopped ({exc}): the test cannot bring the service back where "
                                   "the page looks for it") from exc
            time.sleep(0.2)


def _listeners(port: int) -> set[int] | None:
    """The processes listening on 127.0.0.1:``port`` (Linux /proc), or None where that cannot be read."""
    try:
        lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return None
    inodes = {f"socket:[{f[9]}]" for f in (line.split() for line in lines)
              if f[1] == f"0100007F:{port:04X}" and f[3] == "0A"}  # 0A: LISTEN
    pids = set()
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            if any(os.readlink(fd) in inodes for fd in fd_dir.iterdir()):
                pids.add(int(fd_dir.parent.name))
        except OSError:  # gone meanwhile, or another user's
            continue
    return pids


def _group(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _stop(live: LiveServer) -> socket.socket:
    """Stop the service and hold its port (``_hold_port``): the socket to hand to ``_restart``."""
    live.stop()
    return _hold_port(live.port)


def _restart(live: LiveServer, held: socket.socket) -> LiveServer:
    """The service again, on the same data and port (the page's own origin), held since ``_stop`` and let go
    once the new service listens on it."""
    again = LiveServer(live.data_dir, api_keys=live.api_keys, workers=1)
    again.port, again.url = live.port, live.url
    try:
        again.start()
    except RuntimeError as exc:
        again.stop()
        raise RuntimeError(f"the service did not come back on port {live.port} (the page's origin): {exc}; "
                           f"listening there: {_listeners(live.port)}") from exc
    finally:
        held.close()
    # ours that answers, not another test's service on that port
    owners = _listeners(live.port)
    if owners is not None and not any(_group(pid) == again.process.pid for pid in owners):
        again.stop()
        raise RuntimeError(f"port {live.port} (the page's origin) is served by other processes {sorted(owners)}, "
                           f"not by the service restarted; its log: {again.log_path}")
    return again


def test_a_failed_device_load_is_loaded_again_by_the_next_choice(tmp_path, browser):
    """With the service down, a device switch fails, saying the service cannot be reached at its URL; the
    workload list then still holds the old device's workloads. Once the service is back, picking a
    workload, changing the coverage or the objective loads the device's list and its answer."""
    live = LiveServer(tmp_path / "own-server", workers=1).start()
    held = None
    try:
        browser.navigate(live.url + "/?device=orin-nano")
        ready_for(browser, "orin-nano", 120)
        coverages = browser.evaluate("Array.from(document.getElementById('confidence').options).map((o) => o.value)")
        actions = [("workload", None), ("confidence", coverages[0]), ("objective", "min-time")]
        for (control, value), target in zip(actions, ("nano", "orin-nano", "nano"), strict=True):
            held = _stop(live)
            choose(browser, "device", target)
            status = browser.wait_for("document.body.dataset.state === 'error' && "
                                      "document.getElementById('status').textContent", 30)
            assert browser.evaluate("document.getElementById('workload').disabled") is False
            live = _restart(live, held)
            if value is None:  # a workload of the list on screen (the other device's)
                value = browser.evaluate("document.getElementById('workload').value")
            choose(browser, control, value)
            key = ready_for(browser, target, 120)
            builtins = requests.get(f"{live.url}/v1/reference-workloads", params={"device": target},
                                    timeout=30).json()["workloads"]
            assert key["workload"] in {f"builtin:{w['source']}:{w['workload']}" for w in builtins}
            assert key[control] == (float(value) if control == "confidence" else value)
            assert browser.evaluate("document.getElementById('workload-note').textContent") == ""
            # what the failure said: where the service was looked for, not the browser's bare words
            assert f"the service cannot be reached at {live.url}" in status and "Failed to fetch" not in status
    finally:
        if held is not None:
            held.close()
        live.stop()


#: Evaluated before page.js: ``window.__fault = {path, kind}`` makes requests to paths starting with
#: ``path`` answer a proxy's HTML 502 (kind "502") or never answer (kind "hang", until aborted).
FAULT_HOOK = r"""(() => {
  const real = window.fetch.bind(window);
  window.__fault = null;
  window.fetch = (url, options) => {
    const fault = window.__fault;
    if (!fault || !String(url).startsWith(fault.path)) return real(url, options);
    if (fault.kind === "502") {
      return Promise.resolve(new Response("<html><body><h1>502 Bad Gateway</h1></body></html>",
        { status: 502, headers: { "Content-Type": "text/html" } }));
    }
    return new Promise((resolve, reject) => {
      const signal = options && options.signal;
      if (signal) signal.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError")),
                                         { once: true });
    });
  };
})();"""


def test_errors_say_what_happened_in_words(server, browser, tmp_path):
    """A proxy's 502 is named in words; a service that never answers is given up on after the request
    limit, saying so; the service's message is not repeated by its field list; the search box holds no
    more than the API takes."""
    errors = len(browser.errors())
    with browser.scripts_on_new_documents(FAULT_HOOK):
        browser.navigate(server.url + "/?device=orin-nano")
        ready_for(browser, "orin-nano", 120)
        browser.evaluate("window.__fault = { path: '/v1/workloads', kind: '502' }")
        choose(browser, "device", "nano")
        status = browser.wait_for("document.body.dataset.state === 'error' && "
                                  "document.getElementById('status').textContent", 30)
        assert "502 Bad Gateway" in status and "/v1/workloads" in status, status

        # a limit short enough for a test, long enough for the requests before the one held
        browser.evaluate("window.__fault = { path: '/v1/predictions', kind: 'hang' }; "
                         "jetpredictPage.state.requestTimeoutMs = 5000")
        choose(browser, "objective", "min-time")  # loads nano again (its last load failed)
        status = browser.wait_for("document.body.dataset.state === 'error' && "
                                  "document.getElementById('status').textContent", 30)
        assert "did not answer POST /v1/predictions within 5 s" in status, status
        browser.evaluate("window.__fault = null; jetpredictPage.state.requestTimeoutMs = 60000")
        choose(browser, "objective", "min-energy")
        ready_for(browser, "nano", 120)

        # the search box: as long as the API allows; a longer text (set by a script) is refused once, clearly
        spec = requests.get(f"{server.url}/openapi.json", timeout=30).json()
        search = next(p for p in spec["paths"]["/v1/workloads"]["get"]["parameters"] if p["name"] == "search")
        assert browser.evaluate("document.getElementById('workload-search').maxLength") == \
            search["schema"]["maxLength"] == 200
        choose(browser, "workload-search", "x" * 201, event="input")
        note = browser.wait_for("document.getElementById('workload-note').textContent.startsWith('search failed') "
                                "&& document.getElementById('workload-note').textContent", 30)
        assert note.count("Length must be between 0 and 200") == 1, note
        choose(browser, "workload-search", "", event="input")
        browser.wait_for("!document.getElementById('workload-note').textContent.startsWith('search failed')", 30)

        csv = tmp_path / "one.csv"
        csv.write_text("workload,mode\nmine,1c-100-100-100\n")
        browser.set_files("#csv-file", [csv])
        choose(browser, "api-key", "wrong-key", event="input")
        browser.evaluate("document.getElementById('upload-button').click()")
        refused = browser.wait_for("document.getElementById('upload-status').className === 'error' && "
                                   "document.getElementById('upload-status').textContent", 60)
        assert refused.count("is not one of the service's keys") == 1, refused
    # the refusals the test provoked, as the browser logs them
    left = [e for e in errors_since(browser, errors) if not re.search(r"status of (403|422)", e)]
    assert not left, left


def test_a_start_that_failed_takes_the_links_coverage_and_epochs_at_the_next_load(server, browser):
    """The service's document (/openapi.json, the coverages and the epochs' range) fails at the page's start:
    the link's coverage and epochs wait for the first load that reads it, and are chosen then."""
    errors = len(browser.errors())
    with browser.scripts_on_new_documents(FAULT_HOOK, "window.__fault = { path: '/openapi.json', kind: '502' };"):
        browser.navigate(server.url + "/?device=nano&confidence=0.95&epochs=20")
        status = browser.wait_for("document.body.dataset.state === 'error' && "
                                  "document.getElementById('status').textContent", 30)
        assert "/openapi.json" in status, status
        browser.evaluate("window.__fault = null")
        # A user chooses among the devices listed: the list, asked beside the document, may come after the
        # document's failure is shown (CI once chose before it came, and the list then put back the link's).
        browser.wait_for("document.querySelector('#device option[value=\"orin-nano\"]')", 30)
        choose(browser, "device", "orin-nano")  # the objectives, read from the document too, are not listed yet
        key = ready_for(browser, "orin-nano", 120)
        assert (key["confidence"], key["epochs"]) == (0.95, 20), key
        assert browser.evaluate("document.getElementById('confidence').value") == "0.95"
    left = [e for e in errors_since(browser, errors) if "status of 502" not in e]
    assert not left, left


CHOICE_STATE = """[document.body.dataset.state, document.getElementById('copy').disabled,
  document.getElementById('choice').classList.contains('stale'),
  document.getElementById('stale-badge').hidden, document.getElementById('stale-badge').textContent,
  document.getElementById('command').textContent]"""


def test_copy_is_offered_only_for_a_current_answer_with_a_best_mode(server, browser):
    """After a bad epochs value or a failed recommendation the old answer stays dimmed: Copy is disabled
    (it would copy the command of an answer to other controls) and the badge does not say an update is on
    its way; after a failed device load there is nothing to copy; a new answer is copyable again."""
    errors = len(browser.errors())
    with browser.scripts_on_new_documents(FAULT_HOOK):
        browser.navigate(server.url + "/?device=nano&workload=builtin:simulated:resnet18-cifar10")
        ready_for(browser, "nano", 120)
        state, disabled, stale, hidden, _, command = browser.evaluate(CHOICE_STATE)
        assert (state, disabled, stale, hidden) == ("ready", False, False, True)
        assert command.startswith("sudo jetpredict apply --mode ")

        choose(browser, "epochs", "0", event="input")
        state, disabled, stale, hidden, badge, _ = browser.evaluate(CHOICE_STATE)
        assert state == "error" and stale and disabled, (state, stale, disabled)
        assert hidden or badge != "updating…", badge
        choose(browser, "epochs", "", event="input")
        browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).epochs === null", 60)
        assert browser.evaluate(CHOICE_STATE)[1:4] == [False, False, True]

        browser.evaluate("window.__fault = { path: '/v1/recommendations', kind: '502' }")
        choose(browser, "objective", "min-time")
        browser.wait_for("document.body.dataset.state === 'error'", 30)
        state, disabled, stale, hidden, badge, _ = browser.evaluate(CHOICE_STATE)
        assert stale and disabled and (hidden or badge != "updating…"), (stale, disabled, hidden, badge)

        browser.evaluate("window.__fault = { path: '/v1/predictions', kind: '502' }")
        choose(browser, "device", "orin-nano")
        browser.wait_for("document.body.dataset.state === 'error'", 60)
        state, disabled, stale, hidden, badge, command = browser.evaluate(CHOICE_STATE)
        assert disabled and command == "–", (disabled, command)
        assert hidden or badge != "updating…", badge

        browser.evaluate("window.__fault = null")
        choose(browser, "objective", "min-energy")  # loads Orin Nano again
        ready_for(browser, "orin-nano", 120)
        assert browser.evaluate(CHOICE_STATE)[1:4] == [False, False, True]
    left = [e for e in errors_since(browser, errors) if not re.search(r"status of 502", e)]
    assert not left, left
