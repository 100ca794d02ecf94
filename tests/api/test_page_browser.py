"""The mode-chooser page and /docs in a real headless Chromium, against a real ``jetpredict serve``.

Chromium comes from the system packages (``.ci/run`` installs it); the test is skipped, with the reason,
only where no Chromium executable exists. The browser is cut off from every host but the loopback one.
"""

from __future__ import annotations

import json
import os
import random
import re
import socket
import time
from functools import cache
from pathlib import Path
from urllib.parse import quote

import pytest
import requests
from jetpredict.models.catalogue import device_ids, load_device

from tools.browser import Browser, find_chromium
from tools.testing import LiveServer

pytestmark = [pytest.mark.slow, pytest.mark.skipif(find_chromium() is None,
                                reason="no Chromium: apt-get install chromium (as .ci/run does)")]

WORKLOAD = "builtin:published:resnet18-cifar10"
READY = "document.body.dataset.state === 'ready'"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with LiveServer(tmp_path_factory.mktemp("page-server"), workers=1) as live:
        yield live


@pytest.fixture(scope="module")
def browser():
    with Browser(width=1280, height=1000, offline=True) as b:
        yield b


def _choose(browser: Browser, element_id: str, value: str, event: str = "change") -> None:
    browser.evaluate(f"(() => {{ const e = document.getElementById({json.dumps(element_id)}); "
                     f"e.value = {json.dumps(value)}; e.dispatchEvent(new Event({json.dumps(event)})); }})()")


def _off_host(server, browser: Browser) -> list[str]:
    """Requests to anything but this service (inline ``data:`` images are no request to a host)."""
    return [url for url in browser.requests() if not url.startswith((server.url + "/", "data:"))]


def test_page_picks_the_same_best_mode_as_the_api(server, browser, tmp_path):
    browser.navigate(server.url + "/")
    browser.wait_for(READY, 120)
    _choose(browser, "device", "agx-xavier")
    browser.wait_for(f"{READY} && document.getElementById('workload').options.length > 0", 60)
    _choose(browser, "workload", WORKLOAD)
    browser.wait_for(f"{READY} && document.body.dataset.modes === '29232'", 120)
    _choose(browser, "objective", "min-time")
    _choose(browser, "cap-kind", "max_power_w")
    _choose(browser, "cap", "15", event="input")
    expected_request = {"device": "agx-xavier", "workload": WORKLOAD, "confidence": 0.9, "objective": "min-time",
                        "constraints": {"max_power_w": 15}, "epochs": None}
    browser.wait_for(f"{READY} && document.body.dataset.request === {json.dumps(json.dumps(expected_request, separators=(',', ':')))}",
                     60)
    page_best = browser.evaluate("document.getElementById('best').dataset.mode")
    command = browser.evaluate("document.getElementById('command').textContent")
    provenance = browser.evaluate("document.getElementById('provenance').dataset.referenceSource")

    rows = requests.get(f"{server.url}/v1/reference-workloads/agx-xavier/resnet18-cifar10",
                        params={"source": "published"}, timeout=30).json()["rows"]
    api = requests.post(f"{server.url}/v1/recommendations", timeout=60, json={
        "device": "agx-xavier", "workload": {"rows": rows}, "objective": "min-time",
        "constraints": {"max_power_w": 15}}).json()
    assert api["best"] is not None and api["best"]["avg_power_w"] <= 15
    assert page_best == api["best"]["mode"]
    assert command == f"sudo jetpredict apply --mode {api['best']['mode']}"
    assert provenance == api["reference_source"] == "published"
    # the presets are listed and the one the service compares with is marked and named
    compared = api["preset_comparison"]["preset"]
    assert compared in {p.mode for p in load_device("agx-xavier").presets}
    assert browser.evaluate("Array.from(document.querySelectorAll('#presets tr.compared')).map((r) => r.dataset.mode)") \
        == [compared]
    assert f"Against {compared}," in browser.evaluate("document.getElementById('preset-compare').textContent")
    # every mode is on the chart, the front within the cap is drawn, the hover names a mode
    assert browser.evaluate("jetpredictPage.state.data.n") == 29232
    assert browser.evaluate("jetpredictPage.state.chart.data[0].length") == len(api["pareto"])
    assert browser.evaluate("document.getElementById('hm-legend').textContent").endswith("per epoch")
    # hovering the chosen mode's point names a mode with its intervals
    x, y = browser.evaluate("(() => { const u = jetpredictPage.state.chart, b = jetpredictPage.state.rec.best; "
                            "const r = u.over.getBoundingClientRect(); return [r.left + u.valToPos(b.epoch_time_s, 'x'), "
                            "r.top + u.valToPos(b.epoch_energy_j, 'y')]; })()")
    browser.call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
    tip = browser.wait_for("!document.getElementById('tooltip').hidden && "
                           "document.getElementById('tooltip').textContent", 10)
    assert re.search(r"time\s+[\d.]+ s\s+\[[\d.]+, [\d.]+\]", tip) and "energy" in tip and "power" in tip, tip
    assert not browser.errors(), browser.errors()
    assert _off_host(server, browser) == []

    shots = Path(os.environ.get("JETPREDICT_SCREENSHOT_DIR", tmp_path))
    shot = browser.screenshot(shots / "mode-chooser-test.png")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


def test_docs_render_offline_from_the_package(server, browser):
    browser.navigate(server.url + "/docs")
    title = browser.wait_for("document.querySelector('.swagger-ui .info .title') && "
                             "document.querySelector('.swagger-ui .info .title').textContent", 60)
    assert title.startswith("jetpredict")
    assert browser.wait_for("document.querySelectorAll('.opblock').length", 30) >= 8
    browser.evaluate("document.querySelector('.opblock-summary-control').click()")  # an operation opens
    browser.wait_for("document.querySelector('.opblock-body')", 30)
    blocked = [e for e in browser.errors() if "Content Security Policy" in e]
    assert not blocked, blocked  # the page's own CSP and the docs' allow what they load
    assert _off_host(server, browser) == []


def test_profile_csv_uploads_from_the_page_with_a_key(server, browser, tmp_path):
    rows = requests.get(f"{server.url}/v1/reference-workloads/agx-xavier/mobilenetv3-gld23k", timeout=30).json()["rows"]
    rows[0]["base_power_w"] = None  # an empty numeric cell: unknown (null), not text
    csv = tmp_path / "mine.csv"
    columns = list(rows[0])
    lines = [",".join(columns)] + [",".join(json.dumps(r[c]) if isinstance(r[c], str) else
                                            ("" if r[c] is None else str(r[c])) for c in columns)
                                   for r in rows[:4]]
    csv.write_text("\n".join(lines).replace("mobilenetv3-gld23k", "page-upload") + "\n")
    browser.navigate(server.url + "/")
    browser.wait_for(READY, 120)
    browser.set_files("#csv-file", [csv])
    _choose(browser, "api-key", "wrong-key", event="input")
    browser.evaluate("document.getElementById('upload-button').click()")
    refused = browser.wait_for("document.getElementById('upload-status').className === 'error' && "
                               "document.getElementById('upload-status').textContent", 60)
    assert "X-API-Key" in refused
    _choose(browser, "api-key", server.api_keys.split(",")[0], event="input")
    # one upload at a time: the button is disabled from the click until the answer is in
    assert browser.evaluate("(() => { const b = document.getElementById('upload-button'); b.click(); "
                            "return b.disabled; })()") is True
    browser.wait_for("document.getElementById('upload-status').textContent.startsWith('stored 4 rows of page-upload')",
                     60)
    assert browser.evaluate("document.getElementById('upload-button').disabled") is False
    browser.wait_for(f"{READY} && document.getElementById('workload').value === 'stored:page-upload'", 120)
    assert browser.evaluate("document.getElementById('best').dataset.mode")
    stored = requests.get(f"{server.url}/v1/workloads/page-upload", timeout=30).json()
    assert stored["rows_stored"] == 4
    # The page posted numbers as JSON numbers (the API refuses numeric text) and text columns as text.
    first = next(r for r in stored["rows"] if r["mode"] == rows[0]["mode"])
    assert type(first["cpu_cores"]) is int and type(first["epoch_time_s"]) is float
    assert first.get("base_power_w") is None and first["mode"] == rows[0]["mode"]
    # the search box lists the stored workloads whose id matches; the chosen one stays chosen
    _choose(browser, "workload-search", "PAGE-UP", event="input")
    browser.wait_for("document.getElementById('workload-note').textContent.includes('match')", 30)
    assert browser.evaluate("document.getElementById('workload-note').textContent") == \
        '1 stored workload matches "PAGE-UP"'
    assert browser.evaluate("Array.from(document.querySelectorAll('optgroup[data-kind=stored] option'))"
                            ".map((o) => o.value)") == ["stored:page-upload"]
    _choose(browser, "workload-search", "no-such-net", event="input")
    browser.wait_for("document.getElementById('workload-note').textContent.includes('no-such-net')", 30)
    assert browser.evaluate("document.getElementById('workload').value") == "stored:page-upload"
    assert browser.evaluate("document.body.dataset.state") == "ready"
    _choose(browser, "workload-search", "", event="input")


# -- the answer on screen is always the chosen board's ------------------------------------------------------
#: Records, on every change of the page (and every 20 ms), each mode label shown with the device chosen at
#: that moment, and any answer on screen that was asked for another device. Labels are read from every
#: ``data-mode`` attribute and from the rendered text of the chosen-mode box, the tooltip and the status line.
WATCH = r"""(() => {
  const LABEL = /(?<![\w.])\d+c-\d+(?:\.\d+)?-\d+(?:\.\d+)?-\d+(?:\.\d+)?(?![\d.])/g;
  const seen = new Map();
  window.__seen = seen;
  const add = (device, label, where) => {
    const key = `${device}|${label}|${where}`;
    if (!seen.has(key)) seen.set(key, { device, label, where, state: document.body.dataset.state });
  };
  const record = () => {
    const device = document.getElementById("device").value;
    for (const el of document.querySelectorAll("[data-mode]")) {
      if (el.dataset.mode && !el.hidden) add(device, el.dataset.mode, `data-mode ${el.id || el.tagName}`);
    }
    for (const id of ["choice", "tooltip", "status"]) {
      const el = document.getElementById(id);
      if (el.hidden) continue;
      // innerText: the text as rendered, one line per block (textContent glues cells together)
      for (const label of el.innerText.match(LABEL) || []) add(device, label, `text of #${id}`);
    }
    const shown = { page: document.body.dataset.device, chart: document.getElementById("pareto").dataset.device,
      heatmap: document.getElementById("heatmap").dataset.device };
    for (const [where, d] of Object.entries(shown)) if (d && d !== device) add(device, `answer for ${d}`, where);
    if (document.body.dataset.state === "ready") {
      const request = JSON.parse(document.body.dataset.request || "{}");
      if (request.device !== device) add(device, `ready with an answer for ${request.device}`, "state");
    }
  };
  new MutationObserver(record).observe(document.body,
    { subtree: true, childList: true, characterData: true, attributes: true });
  for (const id of ["device", "cap-kind"]) document.getElementById(id).addEventListener("change", record);
  document.getElementById("cap").addEventListener("input", record);
  setInterval(record, 20);
  return true;
})()"""


@cache
def _labels(device: str) -> frozenset[str]:
    """Every mode label of ``device`` in the catalogue: its custom modes and its nvpmodel presets."""
    dev = load_device(device)
    return frozenset(dev.modes().labels()) | {p.mode for p in dev.presets}


#: The cap the page asks with: the number box beside the slider holds it exactly.
CAP_VALUE = "+document.getElementById('cap-number').value"


def _move_cap(browser: Browser, fraction: float) -> None:
    """Move the cap slider to ``fraction`` of its range, as a user dragging it (even while it is disabled)."""
    browser.evaluate(f"(() => {{ const s = document.getElementById('cap'); "
                     f"s.value = String(+s.min + {fraction} * (+s.max - +s.min)); "
                     "s.dispatchEvent(new Event('input')); })()")


def _ready_for(browser: Browser, device: str, timeout_s: float = 90) -> dict:
    """Wait until the page shows a current answer for ``device``; the key of that answer."""
    text = browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).device === {json.dumps(device)} "
                            f"&& document.getElementById('device').value === {json.dumps(device)} "
                            "&& document.body.dataset.request", timeout_s)
    return json.loads(text)


def _errors_since(browser: Browser, start: int) -> list[str]:
    """Page errors after the first ``start``, less the busy answers the page waits out and asks again
    (503/429 with Retry-After from the service's admission control; Chromium logs each one)."""
    return [e for e in browser.errors()[start:] if not re.search(r"status of (503|429)", e)]


def _violations(browser: Browser) -> list[dict]:
    seen = browser.evaluate("Array.from(window.__seen.values())")
    return [s for s in seen if s["label"] not in _labels(s["device"])]


def _sent_for_other_device(browser: Browser) -> list[str]:
    """POSTs whose inline rows are of another device than the one asked for (the old board sent along)."""
    bad = []
    for url, body in browser.posts():
        if not url.endswith(("/v1/predictions", "/v1/recommendations")):
            continue
        assert body is not None, f"Chromium kept no body of {url}"
        request = json.loads(body)
        rows = request["workload"].get("rows") or []
        if any(r["device"] != request["device"] for r in rows):
            bad.append(f"{url}: device {request['device']} with rows of {rows[0]['device']}")
    return bad


def _dropped(browser: Browser) -> int:
    return int(browser.evaluate("document.body.dataset.dropped || '0'"))


def _cap_key(browser: Browser, device: str, kind: str) -> float:
    """The cap of the answer on screen for ``device`` (waited for)."""
    return _ready_for(browser, device)["constraints"][kind]


def _stale_answers_are_dropped(browser: Browser, device: str, kind: str, other: str) -> None:
    """Stale answers made on purpose, whatever the service's speed: recommendations held back (HOLD_HOOK) and
    delivered after the page moved on, as if each arrived just before its abort. An answer to an older cap
    that comes after the newer one is shown, and one for the device left, are dropped: not shown, counted."""
    browser.evaluate(HOLD_HOOK)
    browser.evaluate("window.__keepAborted = true; window.__holdRecs = true")
    _move_cap(browser, 0.35)
    older = browser.evaluate(CAP_VALUE)
    browser.wait_for("window.__held.length === 1", 30)  # asked after the debounce, and held
    _move_cap(browser, 0.85)
    newer = browser.evaluate(CAP_VALUE)
    assert older != newer
    browser.wait_for("window.__held.length === 2", 30)
    browser.evaluate("window.__holdRecs = false")
    browser.evaluate("window.__deliver(1)")  # the newer answer first ...
    browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).constraints.{kind} === {newer}", 60)
    before = _dropped(browser)
    browser.evaluate("window.__deliver(0)")  # ... then the older one, stale on arrival
    browser.wait_for(f"+(document.body.dataset.dropped || 0) > {before} || "
                     f"JSON.parse(document.body.dataset.request).constraints.{kind} === {older}", 60)
    assert _cap_key(browser, device, kind) == pytest.approx(newer)  # still the newer answer on screen
    assert _dropped(browser) > before

    # an answer asked for the device left, arriving once the next device is shown
    browser.evaluate("window.__holdRecs = true")
    _move_cap(browser, 0.6)
    browser.wait_for("window.__held.length === 3", 30)
    browser.evaluate("window.__holdRecs = false")
    _choose(browser, "device", other)
    _ready_for(browser, other)
    before = _dropped(browser)
    browser.evaluate("window.__deliver(2)")
    browser.wait_for(f"+(document.body.dataset.dropped || 0) > {before} || "
                     f"document.body.dataset.device === {json.dumps(device)}", 60)
    assert browser.evaluate("document.body.dataset.device") == other
    assert _dropped(browser) > before
    browser.evaluate("window.__keepAborted = false")


def test_rapid_switching_never_shows_another_boards_modes(server, browser):
    """Six devices x both cap kinds, switched faster than the service answers, the cap moved meanwhile:
    every mode label ever on screen belongs to the device chosen at that moment, no answer for another
    device is shown as current, and no request pairs one device with another's rows."""
    devices = device_ids()
    assert len(devices) == 6
    rng = random.Random(20)
    errors = len(browser.errors())
    browser.navigate(server.url + "/?device=agx-xavier")
    _ready_for(browser, "agx-xavier", 120)
    assert browser.evaluate(WATCH)
    current = "agx-xavier"
    for kind in ("max_power_w", "max_epoch_time_s"):
        _choose(browser, "cap-kind", kind)
        order = [d for d in devices if d != current] + [current]
        for target in order:
            # a detour through the slowest board (AGX Xavier: 29,232 modes), abandoned mid-load
            detour = "agx-xavier" if target != "agx-xavier" else "xavier-nx"
            _choose(browser, "device", detour)
            time.sleep(rng.choice((0.0, 0.05, 0.2, 0.5)))
            _move_cap(browser, rng.random())
            # right after the switch (same task): loading, the device-bound controls disabled, nothing shown
            after = browser.evaluate(
                f"(() => {{ const e = document.getElementById('device'); e.value = {json.dumps(target)}; "
                "e.dispatchEvent(new Event('change')); const d = (id) => document.getElementById(id).disabled; "
                "return [document.body.dataset.state, d('cap'), d('workload'), d('confidence'), "
                "document.getElementById('best').dataset.mode, document.getElementById('progress').hidden]; })()")
            assert after == ["loading", True, True, True, "", False], after
            _move_cap(browser, rng.random())  # disabled while loading: must not send the old device
            key = _ready_for(browser, target)
            assert key["constraints"].keys() == {kind}
            # once ready, a cap move is answered for this device alone
            _move_cap(browser, rng.uniform(0.3, 1.0))
            cap = browser.evaluate(CAP_VALUE)
            key = _ready_for(browser, target)
            assert key["constraints"][kind] == pytest.approx(cap)
            best = browser.evaluate("document.getElementById('best').dataset.mode")
            if best:
                assert best in _labels(target)
                assert browser.evaluate("document.getElementById('command').textContent") == \
                    f"sudo jetpredict apply --mode {best}"
            presets = browser.evaluate("Array.from(document.querySelectorAll('#presets tbody tr'))"
                                       ".map((r) => r.dataset.mode)")
            assert presets == [p.mode for p in load_device(target).presets]
            current = target
    _stale_answers_are_dropped(browser, current, kind, other=next(d for d in devices if d != current))
    violations = _violations(browser)
    assert not violations, violations[:20]
    assert browser.evaluate("window.__seen.size") > 12  # the watch saw the answers
    assert _sent_for_other_device(browser) == []
    assert not _errors_since(browser, errors), _errors_since(browser, errors)


#: Evaluated in the page: counts the page's POSTs as it makes them (``window.__postsMade``), and notes each
#: timer as it fires or is cleared (``window.__timersDone``), so that a test can wait until the page's
#: recommendation debounce (``jetpredictPage.state.recTimer``) is over, not for a time that a loaded machine
#: may overrun.
SETTLE_HOOK = r"""(() => {
  if (window.__timersDone) return true;
  const done = new Set(), setTimer = window.setTimeout.bind(window), clearTimer = window.clearTimeout.bind(window);
  const fetchReal = window.fetch.bind(window);
  window.__timersDone = done;
  window.__postsMade = 0;
  window.setTimeout = (fn, ms, ...args) => {
    const id = setTimer(() => { try { fn(...args); } finally { done.add(id); } }, ms);
    return id;
  };
  window.clearTimeout = (id) => { done.add(id); clearTimer(id); };
  window.fetch = (url, options) => {
    if (options && options.method === "POST") window.__postsMade++;
    return fetchReal(url, options);
  };
  return true;
})()"""


def _watch_posts(browser: Browser) -> tuple[int, int]:
    """Start counting the page's POSTs (SETTLE_HOOK); the counts so far: the page's own and Chromium's."""
    assert browser.evaluate(SETTLE_HOOK)
    # the page is ready, so the debounce timer it holds now has fired: only a later one is waited for
    browser.evaluate("window.__timerBefore = jetpredictPage.state.recTimer")
    return browser.evaluate("window.__postsMade"), len(browser.posts())


def _posts_after_debounce(browser: Browser) -> tuple[int, int]:
    """Once the page's recommendation debounce has fired or been cleared (whatever it then sent is sent): the
    counts of ``_watch_posts``."""
    browser.wait_for("(() => { const t = jetpredictPage.state.recTimer; "
                     "return t === 0 || t === window.__timerBefore || window.__timersDone.has(t); })()", 30)
    return browser.evaluate("window.__postsMade"), len(browser.posts())


def test_presets_extrapolation_coverage_and_epochs(server, browser):
    """Presets and extrapolated modes are marked; the coverage selector and the epochs box reach the API."""
    errors = len(browser.errors())
    browser.navigate(server.url + "/?device=agx-xavier&workload=" + WORKLOAD)
    _ready_for(browser, "agx-xavier", 120)
    device = load_device("agx-xavier")
    rows = browser.evaluate("Array.from(document.querySelectorAll('#presets tbody tr')).map((r) => r.dataset.mode)")
    assert rows == [p.mode for p in device.presets]
    # 10 published modes: most of the space lies outside the profiled clock ranges, and says so
    extrapolated = browser.evaluate("jetpredictPage.state.data.extrapolated.reduce((a, b) => a + b, 0)")
    assert 0 < extrapolated < 29232
    assert "extrapolated" in browser.evaluate("document.getElementById('hm-legend').textContent")
    assert "extrapolated" in browser.evaluate("document.querySelector('#charts figcaption').textContent")
    assert browser.evaluate("document.getElementById('best').textContent").count("extrapolated") >= 1

    # the coverage selector offers what the API accepts, and a narrower coverage narrows the intervals
    spec = requests.get(f"{server.url}/openapi.json", timeout=30).json()
    allowed = spec["components"]["schemas"]["RecommendationRequest"]["properties"]["confidence"]
    options = browser.evaluate("Array.from(document.getElementById('confidence').options).map((o) => +o.value)")
    assert allowed["default"] in options and all(allowed["minimum"] <= v <= allowed["maximum"] for v in options)
    width = "(() => { const b = jetpredictPage.state.rec.best; return b.epoch_time_s_high - b.epoch_time_s_low; })()"
    wide = browser.evaluate(width)
    _choose(browser, "confidence", str(min(options)))
    assert browser.evaluate("document.getElementById('workload').disabled")  # device-bound controls wait
    key = _ready_for(browser, "agx-xavier")
    assert key["confidence"] == min(options)
    assert browser.evaluate(width) < wide

    # epochs: totals for that many epochs, as the API computes them
    _choose(browser, "epochs", "30", event="input")
    browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).epochs === 30", 60)
    text = browser.evaluate("document.getElementById('best').textContent")
    assert "30 epochs" in text
    body = json.loads(browser.posts()[-1][1])
    assert body["epochs"] == 30 and body["confidence"] == min(options)
    api = requests.post(f"{server.url}/v1/recommendations", json=body, timeout=60).json()
    assert api["best"]["mode"] == browser.evaluate("document.getElementById('best').dataset.mode")
    # a bad number names the field and the rule, and is not sent
    assert browser.evaluate("document.body.dataset.state") == "ready"
    sent = _watch_posts(browser)
    _choose(browser, "epochs", "0", event="input")
    message = browser.wait_for("document.getElementById('epochs-error').textContent", 10)
    assert message.startswith("epochs: must be a whole number from 1") and '"0"' in message
    assert browser.evaluate("document.body.dataset.state") == "error"
    assert _posts_after_debounce(browser) == sent
    assert browser.evaluate("document.getElementById('choice').classList.contains('stale')")
    _choose(browser, "epochs", "2.5", event="input")
    message = browser.wait_for("document.getElementById('epochs-error').textContent", 10)
    assert message.startswith("epochs: must be a whole number from 1") and '"2.5"' in message
    # a whole number written as the API takes it (JSON's exponent form) is that number
    _choose(browser, "epochs", "1e2", event="input")
    browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).epochs === 100", 60)
    assert browser.evaluate("document.getElementById('epochs-error').textContent") == ""
    _choose(browser, "epochs", "", event="input")
    browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).epochs === null", 60)
    assert not _errors_since(browser, errors), _errors_since(browser, errors)


#: Evaluated before page.js (or in the page, before the requests it is to hold): POST /v1/recommendations
#: can be held back (``window.__holdRecs``; ``window.__release()`` sends what was held, ``window.__deliver(i)``
#: the i-th held request alone). An abort rejects a held request, unless ``window.__keepAborted``: then its
#: answer still comes when delivered, as when the abort lands after the answer is in (a stale answer).
HOLD_HOOK = r"""(() => {
  const real = window.fetch.bind(window);
  window.__held = [];
  window.__holdRecs = false;
  window.__keepAborted = false;
  window.fetch = (url, options) => {
    if (!window.__holdRecs || String(url) !== "/v1/recommendations") return real(url, options);
    return new Promise((resolve, reject) => {
      const signal = options && options.signal;
      const keep = window.__keepAborted;
      if (signal && !keep) signal.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError")),
                                                  { once: true });
      const held = { body: options && options.body, sent: false, go: () => {
        if (held.sent) return;
        held.sent = true;
        real(url, keep ? Object.assign({}, options, { signal: undefined }) : options).then(resolve, reject);
      } };
      window.__held.push(held);
    });
  };
  window.__deliver = (i) => window.__held[i].go();
  window.__release = () => { window.__holdRecs = false; for (const held of window.__held) held.go(); };
})();"""

#: Evaluated before page.js on each page load of the test below: the page's first page of stored workloads
#: holds one (as when more than a page are stored), and POST /v1/recommendations can be held (HOLD_HOOK).
FETCH_HOOK = r"""(() => {
  const real = window.fetch.bind(window);
  window.fetch = (url, options) => {
    if (String(url) === "/v1/workloads?limit=100") return real("/v1/workloads?limit=1", options);
    return real(url, options);
  };
})();""" + HOLD_HOOK


def _provenance(browser: Browser) -> dict:
    return browser.evaluate("(() => { const dl = document.getElementById('provenance'); "
                            "const items = Object.fromEntries(Array.from(dl.querySelectorAll('dd'))"
                            ".map((d) => [d.dataset.key, d.textContent])); return Object.assign({}, dl.dataset, "
                            "{ items }); })()")


def test_cross_device_workload_past_the_first_page_states_its_provenance_with_no_mode_under_the_cap(server, browser):
    """A stored workload outside the page of workloads listed, named in the URL, is the one predicted; its
    provenance (cross-device, power) is shown as soon as all modes are drawn and stays when no mode meets
    the cap; a bad epochs number while the recommendation is out frees the controls."""
    errors = len(browser.errors())
    api_key = server.api_keys.split(",")[0]
    rows = requests.get(f"{server.url}/v1/reference-workloads/agx-xavier/mobilenetv3-gld23k", timeout=30).json()["rows"]
    for workload in ("aa-page-first", "zz-page-cross"):
        r = requests.post(f"{server.url}/v1/profiles", headers={"X-API-Key": api_key}, timeout=120,
                          json={"rows": [{**row, "workload": workload} for row in rows[:4]]})
        assert r.status_code == 201, r.text
    first = requests.get(f"{server.url}/v1/workloads", params={"limit": 1}, timeout=30).json()
    assert first["total"] >= 2 and first["workloads"][0]["id"] != "zz-page-cross"

    hook = browser.call("Page.addScriptToEvaluateOnNewDocument", source=FETCH_HOOK)["identifier"]
    try:
        browser.navigate(server.url + "/?device=xavier-nx&workload=stored:zz-page-cross")
        key = _ready_for(browser, "xavier-nx", 120)
        assert key["workload"] == "stored:zz-page-cross"
        stored = browser.evaluate("Array.from(document.querySelectorAll('optgroup[data-kind=stored] option'))"
                                  ".map((o) => [o.value, o.textContent])")
        assert len(stored) == 2 and stored[0][0] == "stored:zz-page-cross" and stored[0][1].endswith("(chosen)")
        assert "cross-device" in stored[0][1]  # its rows are of AGX Xavier

        # a cap no mode meets: no best mode, and the provenance still says cross-device and where power comes from
        _choose(browser, "cap-kind", "max_power_w")
        _move_cap(browser, 0)
        cap = browser.evaluate(CAP_VALUE)
        browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).constraints.max_power_w === {cap}", 60)
        assert browser.evaluate("document.getElementById('best').dataset.mode") == ""
        assert "no mode meets the cap" in browser.evaluate("document.getElementById('status').textContent")
        shown = _provenance(browser)
        assert shown["answer"] == "recommendation" and shown["crossDevice"] == "true", shown
        assert shown["items"]["cross-device"].startswith("yes: fitted on rows of") and "agx-xavier" in \
            shown["items"]["cross-device"], shown
        assert shown["powerSource"] in ("workload", "reference") and shown["items"]["power"] != "–", shown

        # the all-mode answer's provenance is on screen while the recommendation is still out
        browser.evaluate("window.__holdRecs = true")
        options = browser.evaluate("Array.from(document.getElementById('confidence').options).map((o) => o.value)")
        _choose(browser, "confidence", options[0])
        browser.wait_for("jetpredictPage.state.data && window.__held.length > 0 && "
                         "document.getElementById('provenance').dataset.answer === 'predictions'", 120)
        shown = _provenance(browser)
        assert shown["crossDevice"] == "true" and shown["items"]["cross-device"].startswith("yes"), shown
        assert shown["powerSource"] in ("workload", "reference"), shown
        assert not shown["items"]["predictions"].startswith("–"), shown  # the model version
        assert browser.evaluate("document.getElementById('workload').disabled") is True  # still loading
        # a bad epochs number cancels that recommendation: the controls are free again, the progress gone
        _choose(browser, "epochs", "0", event="input")
        after = browser.evaluate("(() => { const d = (id) => document.getElementById(id).disabled; return "
                                 "[document.body.dataset.state, d('workload'), d('confidence'), d('cap'), "
                                 "d('workload-search'), document.getElementById('progress').hidden, "
                                 "document.querySelector('main').getAttribute('aria-busy')]; })()")
        assert after == ["error", False, False, False, False, True, "false"], after
        browser.evaluate("window.__release()")
        _choose(browser, "epochs", "", event="input")
        key = _ready_for(browser, "xavier-nx")
        assert key["workload"] == "stored:zz-page-cross" and key["confidence"] == float(options[0])
        assert _provenance(browser)["answer"] == "recommendation"
    finally:
        browser.call("Page.removeScriptToEvaluateOnNewDocument", identifier=hook)
    assert not _errors_since(browser, errors), _errors_since(browser, errors)


# -- the cap slider, the epochs box, failures, links, names --------------------------------------------------
def _device_max_power(server) -> dict[str, float]:
    """The largest power cap the API takes per device (its ``device-max`` rule in /openapi.json)."""
    spec = requests.get(f"{server.url}/openapi.json", timeout=30).json()
    rules = spec["components"]["schemas"]["RecommendationRequest"]["x-jetpredict-rules"]
    return next(r["max"] for r in rules if r["rule"] == "device-max")


#: The slider and the upper ends it must reach: of every mode and every preset on screen.
CAP_STATE = r"""(() => {
  const s = document.getElementById("cap"), d = jetpredictPage.state.data, c = d.columns;
  const presets = jetpredictPage.state.presets;
  const top = (column, field) => Math.max(c[column].reduce((m, v) => (v > m ? v : m), -Infinity),
    ...presets.map((p) => p[field]));
  const within = (column, field, cap) => c[column].filter((v) => v <= cap).length +
    presets.filter((p) => p[field] <= cap).length;
  const least = (column) => c[column].reduce((m, v) => (v < m ? v : m), Infinity);
  const value = +document.getElementById("cap-number").value;
  return { min: +s.dataset.lo, max: +s.dataset.hi, value, step: +s.step, n: d.n + presets.length,
    leastPower: least("avg_power_w_high"), leastTime: least("epoch_time_s_high"),
    power: top("avg_power_w_high", "avg_power_w_high"), time: top("epoch_time_s_high", "epoch_time_s_high"),
    feasible: d.feasible.reduce((a, b) => a + b, 0), modes: d.n,
    within15: within("avg_power_w_high", "avg_power_w_high", 15),
    withinValue: within("avg_power_w_high", "avg_power_w_high", value),
    over: Array.from(document.querySelectorAll("#presets tr.over")).map((r) => r.dataset.mode) };
})()"""


def _cap_to_top(browser: Browser, kind: str) -> None:
    """Move the cap slider to its top and wait for the answer to that cap."""
    _move_cap(browser, 1.0)
    cap = browser.evaluate(CAP_VALUE)
    browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).constraints.{kind} === {cap}", 60)


def test_cap_slider_reaches_the_upper_ends_that_modes_are_judged_by(server, browser):
    """Modes meet a cap by the upper end of their interval: the slider reaches the largest upper end of any
    mode or preset (no higher than the API accepts), so that its top lets every mode in; the 15 W default
    is not lowered to a cap that shuts out modes 15 W lets in."""
    errors = len(browser.errors())
    most = _device_max_power(server)
    browser.navigate(server.url + "/?device=agx-xavier&workload=" + WORKLOAD)
    _ready_for(browser, "agx-xavier", 120)
    cap = browser.evaluate(CAP_STATE)
    assert cap["power"] < most["agx-xavier"]
    assert cap["power"] <= cap["max"] <= most["agx-xavier"], cap  # MAXN's upper end (33 W) within reach
    _cap_to_top(browser, "max_power_w")
    cap = browser.evaluate(CAP_STATE)
    assert cap["feasible"] == cap["modes"] and cap["over"] == [], cap  # every mode and preset qualifies

    # ... and starts at the least upper end: below it no mode qualifies, so no lower cap is offered.
    assert cap["leastPower"] - cap["step"] < cap["min"] <= cap["leastPower"], cap
    _choose(browser, "cap-kind", "max_epoch_time_s")
    cap = browser.evaluate(CAP_STATE)
    assert cap["max"] >= cap["time"], cap
    assert cap["leastTime"] * (1 - 1e-3) < cap["min"] <= cap["leastTime"], cap  # 4 significant digits
    _cap_to_top(browser, "max_epoch_time_s")
    cap = browser.evaluate(CAP_STATE)
    assert cap["feasible"] == cap["modes"] and cap["over"] == [], cap

    # LeNet-5 draws under 15 W in every mode: the default cap lets in all that 15 W would (MAXN included)
    browser.navigate(server.url + "/?device=agx-xavier&workload=builtin:published:lenet5-mnist")
    key = _ready_for(browser, "agx-xavier", 120)
    cap = browser.evaluate(CAP_STATE)
    assert key["constraints"] == {"max_power_w": cap["value"]}
    assert cap["withinValue"] == cap["within15"] == cap["n"], cap
    assert "MAXN" not in cap["over"], cap

    # Orin Nano: the 15W preset's upper end lies above every custom mode's
    browser.navigate(server.url + "/?device=orin-nano")
    _ready_for(browser, "orin-nano", 120)
    cap = browser.evaluate(CAP_STATE)
    assert cap["power"] <= cap["max"] <= most["orin-nano"], cap
    _cap_to_top(browser, "max_power_w")
    assert browser.evaluate(CAP_STATE)["over"] == []
    assert not _errors_since(browser, errors), _errors_since(browser, errors)


def test_epochs_text_that_is_no_number_is_refused_like_any_bad_number(server, browser):
    """Text the number box cannot parse reads as "" (validity.badInput): it is refused with the field and
    the rule, not taken for an empty box, and nothing is sent."""
    errors = len(browser.errors())
    browser.navigate(server.url + "/?device=orin-nano")
    _ready_for(browser, "orin-nano", 120)
    sent = _watch_posts(browser)
    for text in ("e", "1e", "--", "1-"):
        browser.evaluate("(() => { const e = document.getElementById('epochs'); e.value = ''; e.focus(); "
                         "document.getElementById('epochs-error').textContent = ''; })()")
        browser.call("Input.insertText", text=text)  # typed: the box keeps the text it cannot parse
        assert browser.evaluate("[document.getElementById('epochs').value, "
                                "document.getElementById('epochs').validity.badInput]") == ["", True], text
        message = browser.wait_for("document.getElementById('epochs-error').textContent", 10)
        assert message.startswith("epochs: must be a whole number from 1 to "), (text, message)
        assert browser.evaluate("document.body.dataset.state") == "error", text
    assert _posts_after_debounce(browser) == sent  # the debounce over: a request would have gone
    _choose(browser, "epochs", "", event="input")
    browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).epochs === null", 60)
    assert not _errors_since(browser, errors), _errors_since(browser, errors)


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
        _ready_for(browser, "orin-nano", 120)
        coverages = browser.evaluate("Array.from(document.getElementById('confidence').options).map((o) => o.value)")
        actions = [("workload", None), ("confidence", coverages[0]), ("objective", "min-time")]
        for (control, value), target in zip(actions, ("nano", "orin-nano", "nano"), strict=True):
            held = _stop(live)
            _choose(browser, "device", target)
            status = browser.wait_for("document.body.dataset.state === 'error' && "
                                      "document.getElementById('status').textContent", 30)
            assert browser.evaluate("document.getElementById('workload').disabled") is False
            live = _restart(live, held)
            if value is None:  # a workload of the list on screen (the other device's)
                value = browser.evaluate("document.getElementById('workload').value")
            _choose(browser, control, value)
            key = _ready_for(browser, target, 120)
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
    hook = browser.call("Page.addScriptToEvaluateOnNewDocument", source=FAULT_HOOK)["identifier"]
    try:
        browser.navigate(server.url + "/?device=orin-nano")
        _ready_for(browser, "orin-nano", 120)
        browser.evaluate("window.__fault = { path: '/v1/workloads', kind: '502' }")
        _choose(browser, "device", "nano")
        status = browser.wait_for("document.body.dataset.state === 'error' && "
                                  "document.getElementById('status').textContent", 30)
        assert "502 Bad Gateway" in status and "/v1/workloads" in status, status

        # a limit short enough for a test, long enough for the requests before the one held
        browser.evaluate("window.__fault = { path: '/v1/predictions', kind: 'hang' }; "
                         "jetpredictPage.state.requestTimeoutMs = 5000")
        _choose(browser, "objective", "min-time")  # loads nano again (its last load failed)
        status = browser.wait_for("document.body.dataset.state === 'error' && "
                                  "document.getElementById('status').textContent", 30)
        assert "did not answer POST /v1/predictions within 5 s" in status, status
        browser.evaluate("window.__fault = null; jetpredictPage.state.requestTimeoutMs = 60000")
        _choose(browser, "objective", "min-energy")
        _ready_for(browser, "nano", 120)

        # the search box: as long as the API allows; a longer text (set by a script) is refused once, clearly
        spec = requests.get(f"{server.url}/openapi.json", timeout=30).json()
        search = next(p for p in spec["paths"]["/v1/workloads"]["get"]["parameters"] if p["name"] == "search")
        assert browser.evaluate("document.getElementById('workload-search').maxLength") == \
            search["schema"]["maxLength"] == 200
        _choose(browser, "workload-search", "x" * 201, event="input")
        note = browser.wait_for("document.getElementById('workload-note').textContent.startsWith('search failed') "
                                "&& document.getElementById('workload-note').textContent", 30)
        assert note.count("Length must be between 0 and 200") == 1, note
        _choose(browser, "workload-search", "", event="input")
        browser.wait_for("!document.getElementById('workload-note').textContent.startsWith('search failed')", 30)

        csv = tmp_path / "one.csv"
        csv.write_text("workload,mode\nmine,1c-100-100-100\n")
        browser.set_files("#csv-file", [csv])
        _choose(browser, "api-key", "wrong-key", event="input")
        browser.evaluate("document.getElementById('upload-button').click()")
        refused = browser.wait_for("document.getElementById('upload-status').className === 'error' && "
                                   "document.getElementById('upload-status').textContent", 60)
        assert refused.count("is not one of the service's keys") == 1, refused
    finally:
        browser.call("Page.removeScriptToEvaluateOnNewDocument", identifier=hook)
    # the refusals the test provoked, as the browser logs them
    left = [e for e in _errors_since(browser, errors) if not re.search(r"status of (403|422)", e)]
    assert not left, left


def test_a_link_to_what_is_not_there_says_so(server, browser):
    """A link naming an unknown workload or device shows another one, and says which, until the user
    chooses."""
    errors = len(browser.errors())
    browser.navigate(server.url + "/?device=orin-nx&workload=stored:nonexistent")
    key = _ready_for(browser, "orin-nx", 120)
    note = browser.evaluate("document.getElementById('link-note').hidden || "
                            "document.getElementById('link-note').textContent")
    shown = browser.evaluate("(() => { const s = document.getElementById('workload'); "
                             "return s.options[s.selectedIndex].textContent; })()")
    assert note is not True and '"stored:nonexistent" was not found' in note and f"showing {shown}" in note, note
    assert key["workload"] != "stored:nonexistent"
    other = browser.evaluate("Array.from(document.getElementById('workload').options).map((o) => o.value)"
                             ".find((v) => v.startsWith('builtin:') && v !== document.getElementById('workload').value)")
    _choose(browser, "workload", other)
    _ready_for(browser, "orin-nx")
    assert browser.evaluate("document.getElementById('link-note').hidden") is True

    browser.navigate(server.url + "/?device=bogus")
    _ready_for(browser, "agx-xavier", 120)
    note = browser.evaluate("document.getElementById('link-note').textContent")
    assert browser.evaluate("document.getElementById('link-note').hidden") is False
    assert '"bogus"' in note and "agx-xavier" in note and "instead" in note, note
    assert not _errors_since(browser, errors), _errors_since(browser, errors)


def _accessible(browser: Browser, selector: str) -> dict:
    """Role, accessible name and where the name comes from (Chromium's accessibility tree)."""
    browser.call("Accessibility.enable")
    root = browser.call("DOM.getDocument", depth=0)["root"]["nodeId"]
    node = browser.call("DOM.querySelector", nodeId=root, selector=selector)["nodeId"]
    ax = browser.call("Accessibility.getPartialAXTree", nodeId=node, fetchRelatives=False)["nodes"][0]
    name = ax.get("name", {})
    source = next((s for s in name.get("sources", []) if "value" in s and not s.get("superseded")), {})
    return {"role": ax["role"]["value"], "name": name.get("value", ""),
            "from": source.get("nativeSource") or source.get("type", "")}


def test_controls_and_charts_have_accessible_names(server, browser):
    """Each control is named by its label (not a placeholder or a neighbour's), the cap slider by its kind
    with its value in words, and the canvases carry a text alternative that follows the answer."""
    browser.navigate(server.url + "/?device=orin-nano")
    _ready_for(browser, "orin-nano", 120)
    assert _accessible(browser, "#workload")["name"] == "Workload"
    assert _accessible(browser, "#workload-search")["name"] == "search stored workloads"
    assert _accessible(browser, "#csv-file")["name"] == "Profile CSV file"
    key = _accessible(browser, "#api-key")
    assert key["name"] == "API key" and key["from"] != "placeholder", key
    slider = ("[document.getElementById('cap').getAttribute('aria-valuetext'), "
              "String(+document.getElementById('cap-number').value)]")
    assert _accessible(browser, "#cap")["name"] == "power cap"
    text, value = browser.evaluate(slider)
    assert text == f"power cap {value} W"
    _choose(browser, "cap-kind", "max_epoch_time_s")
    assert _accessible(browser, "#cap")["name"] == "time cap"
    text, value = browser.evaluate(slider)
    assert text == f"time cap {value} s"
    _ready_for(browser, "orin-nano")
    for selector in ("#pareto", "#heatmap"):
        shown = _accessible(browser, selector)
        assert shown["role"] == "image" and "Jetson Orin Nano" in shown["name"], shown
    assert "1,800 modes" in _accessible(browser, "#pareto")["name"]
    _choose(browser, "device", "nano")
    _ready_for(browser, "nano", 120)
    assert "5,040 modes" in _accessible(browser, "#pareto")["name"]
    assert _accessible(browser, "#heatmap")["name"].endswith(
        browser.evaluate("document.getElementById('hm-legend').textContent"))


@pytest.fixture(scope="module")
def stored_server(tmp_path_factory):
    """A service of its own for the tests that store workloads: the shared one's stored list is counted."""
    with LiveServer(tmp_path_factory.mktemp("page-stored-server"), workers=1) as live:
        yield live


def _store(live: LiveServer, workload: str, rows: list[dict]) -> None:
    """Store ``rows`` as the workload ``workload`` (POST /v1/profiles)."""
    r = requests.post(f"{live.url}/v1/profiles", headers={"X-API-Key": live.api_keys.split(",")[0]},
                      timeout=120, json={"rows": [{**row, "workload": workload} for row in rows]})
    assert r.status_code == 201, r.text


def test_a_workload_is_matched_exactly_never_by_the_end_of_another_id(stored_server, browser):
    """Stored workloads are listed before the built-in ones, yet a link's bare workload name opens the
    built-in of that name, not a stored workload whose id ends in ':' and that name; a full option value
    and the choice kept across a device switch open that very workload, not a stored id ending with it. A
    stored id, named as it is, opens the stored workload."""
    live = stored_server
    errors = len(browser.errors())
    builtin = "builtin:simulated:resnet18-cifar10"  # nano's and Orin Nano's
    rows = requests.get(f"{live.url}/v1/reference-workloads/nano/resnet18-cifar10", timeout=30).json()["rows"]
    rows = rows[:8]
    for workload in ("team:resnet18-cifar10", f"team:{builtin}"):
        _store(live, workload, rows)
    chosen = "document.getElementById('workload').value"

    browser.navigate(live.url + "/?device=nano&workload=resnet18-cifar10")
    assert _ready_for(browser, "nano", 120)["workload"] == builtin
    assert browser.evaluate(chosen) == builtin
    assert browser.evaluate("document.getElementById('link-note').hidden") is True

    browser.navigate(live.url + "/?device=nano&workload=" + quote(builtin))
    assert _ready_for(browser, "nano", 120)["workload"] == builtin
    _choose(browser, "device", "orin-nano")  # the choice kept: Orin Nano has this built-in too
    assert _ready_for(browser, "orin-nano", 120)["workload"] == builtin

    for link in ("team:resnet18-cifar10", "stored:team:resnet18-cifar10"):
        browser.navigate(live.url + "/?device=nano&workload=" + quote(link))
        assert _ready_for(browser, "nano", 120)["workload"] == "stored:team:resnet18-cifar10", link
        assert browser.evaluate("document.getElementById('link-note').hidden") is True
    assert not _errors_since(browser, errors), _errors_since(browser, errors)


def test_power_provenance_says_whose_power_the_fit_used_never_measured_for_the_twin(stored_server, browser):
    """The provenance's power and prior lines name their rows' source from the answer (workload_source,
    reference_source): a built-in twin workload's power is simulated, not "measured"; a published one's is
    the published measurements; rows stored as measured say measured sweeps."""
    live = stored_server
    errors = len(browser.errors())
    rows = requests.get(f"{live.url}/v1/reference-workloads/agx-xavier/resnet18-cifar10",
                        params={"source": "published"}, timeout=30).json()["rows"]
    _store(live, "own-measured-power", [{**row, "source": "measured"} for row in rows[:6]])
    no_power = ("avg_power_w", "base_power_w", "epoch_energy_j")
    _store(live, "own-no-power", [{**row, **dict.fromkeys(no_power)} for row in rows[:6]])
    cases = [("orin-nx", "builtin:simulated:resnet18-cifar10", "simulated", "workload"),
             ("agx-xavier", "builtin:published:resnet18-cifar10", "published", "workload"),
             ("agx-xavier", "stored:own-measured-power", "measured", "workload"),
             ("orin-nx", "stored:own-no-power", "published", "reference")]
    words = {"simulated": "digital twin (simulated)", "published": "published measurements (POMACS 2022)",
             "measured": "measured sweeps"}
    for device, workload, source, power in cases:
        browser.navigate(f"{live.url}/?device={device}&workload={quote(workload)}")
        assert _ready_for(browser, device, 180)["workload"] == workload
        shown = _provenance(browser)
        api = browser.evaluate("jetpredictPage.state.rec")
        assert api["workload_source"] == source and shown["powerSource"] == power, (api, shown)
        prior = words[api["reference_source"]]
        assert shown["items"]["power"] == (f"fitted on the workload's own power: {words[source]}" if power == "workload"
                                           else f"device reference power model: {prior} (no power in the rows; "
                                           "wider interval)"), shown
        assert shown["items"]["prior"] == prior, shown
        if "simulated" in (source, api["reference_source"]):
            assert "measur" not in shown["items"]["power"] + shown["items"]["prior"], shown
    assert not _errors_since(browser, errors), _errors_since(browser, errors)


CHOICE_STATE = """[document.body.dataset.state, document.getElementById('copy').disabled,
  document.getElementById('choice').classList.contains('stale'),
  document.getElementById('stale-badge').hidden, document.getElementById('stale-badge').textContent,
  document.getElementById('command').textContent]"""


def test_copy_is_offered_only_for_a_current_answer_with_a_best_mode(server, browser):
    """After a bad epochs value or a failed recommendation the old answer stays dimmed: Copy is disabled
    (it would copy the command of an answer to other controls) and the badge does not say an update is on
    its way; after a failed device load there is nothing to copy; a new answer is copyable again."""
    errors = len(browser.errors())
    hook = browser.call("Page.addScriptToEvaluateOnNewDocument", source=FAULT_HOOK)["identifier"]
    try:
        browser.navigate(server.url + "/?device=nano&workload=builtin:simulated:resnet18-cifar10")
        _ready_for(browser, "nano", 120)
        state, disabled, stale, hidden, _, command = browser.evaluate(CHOICE_STATE)
        assert (state, disabled, stale, hidden) == ("ready", False, False, True)
        assert command.startswith("sudo jetpredict apply --mode ")

        _choose(browser, "epochs", "0", event="input")
        state, disabled, stale, hidden, badge, _ = browser.evaluate(CHOICE_STATE)
        assert state == "error" and stale and disabled, (state, stale, disabled)
        assert hidden or badge != "updating…", badge
        _choose(browser, "epochs", "", event="input")
        browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).epochs === null", 60)
        assert browser.evaluate(CHOICE_STATE)[1:4] == [False, False, True]

        browser.evaluate("window.__fault = { path: '/v1/recommendations', kind: '502' }")
        _choose(browser, "objective", "min-time")
        browser.wait_for("document.body.dataset.state === 'error'", 30)
        state, disabled, stale, hidden, badge, _ = browser.evaluate(CHOICE_STATE)
        assert stale and disabled and (hidden or badge != "updating…"), (stale, disabled, hidden, badge)

        browser.evaluate("window.__fault = { path: '/v1/predictions', kind: '502' }")
        _choose(browser, "device", "orin-nano")
        browser.wait_for("document.body.dataset.state === 'error'", 60)
        state, disabled, stale, hidden, badge, command = browser.evaluate(CHOICE_STATE)
        assert disabled and command == "–", (disabled, command)
        assert hidden or badge != "updating…", badge

        browser.evaluate("window.__fault = null")
        _choose(browser, "objective", "min-energy")  # loads Orin Nano again
        _ready_for(browser, "orin-nano", 120)
        assert browser.evaluate(CHOICE_STATE)[1:4] == [False, False, True]
    finally:
        browser.call("Page.removeScriptToEvaluateOnNewDocument", identifier=hook)
    left = [e for e in _errors_since(browser, errors) if not re.search(r"status of 502", e)]
    assert not left, left


def test_time_cap_slider_stays_above_zero_and_fine_for_sub_tenth_second_epochs(stored_server, browser):
    """The API takes only time caps above 0: for epochs of a few hundredths of a second the slider's least
    cap is still above 0 (and answered). The time slider is log-scaled (each position moves the cap by the
    same share, however short the epochs) and the number box beside it holds a cap exactly."""
    live = stored_server
    errors = len(browser.errors())
    rows = requests.get(f"{live.url}/v1/reference-workloads/nano/resnet18-cifar10", timeout=30).json()["rows"]
    rows = rows[:8]
    scaled = ("epoch_time_s", "stall_time_s", "compute_time_s", "epoch_energy_j")  # one minibatch of 1/50,000
    fast = [{**row, "minibatches_per_epoch": 1.0, **{k: row[k] / 50000 for k in scaled}} for row in rows]
    _store(live, "fast-epochs", fast)
    browser.navigate(live.url + "/?device=nano&workload=stored:fast-epochs")
    _ready_for(browser, "nano", 120)
    _choose(browser, "cap-kind", "max_epoch_time_s")
    cap = browser.evaluate(CAP_STATE)
    assert cap["leastTime"] < 0.1, cap  # the premise: the least epoch time's upper end under 0.1 s
    assert cap["min"] > 0, cap
    _move_cap(browser, 0)
    least = browser.evaluate(CAP_VALUE)
    assert least == cap["min"]
    browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).constraints.max_epoch_time_s "
                     f"=== {least}", 60)
    assert cap["leastTime"] * (1 - 1e-3) < cap["min"] <= cap["leastTime"] < cap["time"] <= cap["max"], cap
    # log scale: equal moves of the slider multiply the cap by equal factors
    caps = []
    for fraction in (0.25, 0.5, 0.75):
        _move_cap(browser, fraction)
        caps.append(browser.evaluate(CAP_VALUE))
    assert caps[1] / caps[0] == pytest.approx(caps[2] / caps[1], rel=0.02), caps
    # an exact cap typed in the box is asked as typed, and stays so when the coverage moves the bounds
    exact = float(f"{(caps[0] + caps[1]) / 2:.6g}")
    _choose(browser, "cap-number", str(exact), event="input")
    browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).constraints.max_epoch_time_s "
                     f"=== {exact}", 60)
    _choose(browser, "confidence", "0.5")
    key = _ready_for(browser, "nano", 120)
    assert key["constraints"] == {"max_epoch_time_s": exact} and key["confidence"] == 0.5, key
    rule = browser.evaluate("[jetpredictPage.timeScale(0.00041234, 0.2), jetpredictPage.timeScale(32.07, 3103.2), "
                            "jetpredictPage.powerSlider(3.2, 40.7, 40)]")
    assert rule == [{"min": 0.0004123, "max": 0.2, "log": True}, {"min": 32.07, "max": 3104, "log": True},
                    {"step": 0.5, "min": 3, "max": 40}], rule
    assert not _errors_since(browser, errors), _errors_since(browser, errors)


def test_a_refitted_workload_is_shown_from_one_fit_and_the_choice_says_why_it_may_look_beaten(stored_server,
                                                                                              browser):
    """A recommendation from a newer fit of the stored workload (rows uploaded while the page is open) makes
    the page load the cloud and the presets again: never two fits shown as one. A choice that passed over a
    better-looking extrapolated mode (``preferred_in_range``) says so under the chosen mode."""
    live = stored_server
    errors = len(browser.errors())
    rows = requests.get(f"{live.url}/v1/reference-workloads/agx-xavier/resnet18-cifar10",
                        params={"source": "published"}, timeout=30).json()["rows"]
    _store(live, "refit-me", rows[:4])
    browser.navigate(live.url + "/?device=agx-xavier&workload=refit-me")
    _ready_for(browser, "agx-xavier", 120)
    first = browser.evaluate("document.body.dataset.revision")
    assert first and browser.evaluate("jetpredictPage.state.rec.revision") == int(first)
    rec = browser.evaluate("jetpredictPage.state.rec")
    assert rec["preferred_in_range"] is True, rec["preferred_in_range"]  # the premise: 4 rows, 15 W cap
    note = browser.evaluate("document.getElementById('best-note').hidden ? '' : "
                            "document.getElementById('best-note').textContent")
    assert "looked better, but not beyond its interval" in note, note

    _store(live, "refit-me", rows[4:10])  # refitted: the next answers come from revision first + 1
    _choose(browser, "objective", "min-time")
    browser.wait_for(f"{READY} && document.body.dataset.revision === '{int(first) + 1}'", 120)
    shown = browser.evaluate("(() => { const s = jetpredictPage.state; return [s.data.revision, s.rec.revision, "
                             "s.rec.profiled_modes, document.getElementById('provenance').textContent]; })()")
    assert shown[:3] == [int(first) + 1, int(first) + 1, 10], shown
    assert f"revision {int(first) + 1}" in shown[3]
    key = _ready_for(browser, "agx-xavier")
    assert key["objective"] == "min-time" and key["constraints"] == {"max_power_w": 15}, key
    assert not _errors_since(browser, errors), _errors_since(browser, errors)


def test_caps_are_kept_across_devices_exact_and_by_keyboard(server, browser):
    """A power cap typed exactly is kept across devices, lowered only to what the API takes for the new one
    (and said so); focus stays on a select whose change loads; the presets show the upper end of the capped
    quantity; the front's intervals are in a table (no mouse needed)."""
    errors = len(browser.errors())
    most = _device_max_power(server)
    browser.navigate(server.url + "/?device=agx-xavier&workload=" + WORKLOAD)
    _ready_for(browser, "agx-xavier", 120)
    _choose(browser, "cap-number", "12.3", event="input")
    browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).constraints.max_power_w === 12.3", 60)
    _choose(browser, "device", "xavier-nx")
    assert _ready_for(browser, "xavier-nx", 120)["constraints"] == {"max_power_w": 12.3}
    assert browser.evaluate("document.getElementById('cap-note').textContent") == ""
    above = float(f"{(most['nano'] + most['agx-xavier']) / 2:.3g}")  # allowed on AGX Xavier, not on Nano
    _choose(browser, "device", "agx-xavier")
    _ready_for(browser, "agx-xavier", 120)
    _choose(browser, "cap-number", str(above), event="input")
    browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).constraints.max_power_w === {above}", 60)
    _choose(browser, "device", "nano")
    key = _ready_for(browser, "nano", 120)
    assert key["constraints"] == {"max_power_w": most["nano"]}, key
    note = browser.evaluate("document.getElementById('cap-note').textContent")
    assert "lowered to" in note and "Jetson Nano" in note, note

    # keyboard: the focused select keeps its focus through the load its change starts
    browser.evaluate("document.getElementById('confidence').focus()")
    _choose(browser, "confidence", "0.8")
    assert browser.evaluate("document.activeElement.id") == "confidence"
    _ready_for(browser, "nano", 120)
    assert browser.evaluate("[document.activeElement.id, document.getElementById('confidence').disabled, "
                            "document.getElementById('confidence').getAttribute('aria-disabled')]") == \
        ["confidence", False, None]
    front = browser.evaluate("Array.from(document.querySelectorAll('#front tbody tr')).map((r) => "
                            "Array.from(r.cells).map((c) => c.textContent).join(' | '))")
    assert len(front) == len(browser.evaluate("jetpredictPage.state.rec.pareto")) > 0
    assert all(re.search(r"\[[\d.]+, [\d.]+\]", row) for row in front), front[:3]

    # a time cap: the presets show the upper end of their epoch time, which the cap is checked against
    _choose(browser, "cap-kind", "max_epoch_time_s")
    _ready_for(browser, "nano")
    shown = browser.evaluate("[document.getElementById('presets-top').textContent, "
                             "Array.from(document.querySelectorAll('#presets tbody tr')).map((r) => "
                             "[r.cells[1].textContent, r.cells[4].textContent])]")
    presets = browser.evaluate("jetpredictPage.state.presets")
    cap = browser.evaluate(CAP_VALUE)
    assert shown[0] == "time ≤"
    for (within, top), p in zip(shown[1], presets, strict=True):
        assert top.endswith(" s") and float(top[:-2]) == pytest.approx(p["epoch_time_s_high"], rel=1e-3)
        assert within == ("yes" if p["epoch_time_s_high"] <= cap else "no")
    assert not _errors_since(browser, errors), _errors_since(browser, errors)


def test_narrow_windows_get_one_column_and_no_sideways_scroll(server):
    """Below 900 px the page is one column and the charts fit their figures: nothing scrolls sideways."""
    with Browser(width=375, height=800, offline=True) as narrow:
        narrow.navigate(server.url + "/?device=agx-xavier&workload=" + WORKLOAD)
        _ready_for(narrow, "agx-xavier", 120)
        sizes = narrow.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth, "
                                "document.getElementById('heatmap').getBoundingClientRect().right, "
                                "jetpredictPage.state.chart.width, getComputedStyle(document.querySelector('main'))"
                                ".gridTemplateColumns.split(' ').length]")
        assert sizes[0] <= sizes[1] and sizes[2] <= sizes[1] and sizes[3] < 375 and sizes[4] == 1, sizes
        assert not narrow.errors(), narrow.errors()


#: Uploads made on cue, for the refit tests: every answer of /v1/predictions and /v1/recommendations carries
#: ``window.__rev`` as its revision, and an upload (the revision moving on) lands just before each answer of
#: the kind ``window.__refit`` names ("all", "presets" or "recommendation"): real uploads cannot be timed
#: between two answers of one load. ``window.__allModes`` counts the all-mode requests sent.
REFIT_HOOK = r"""(() => {
  const real = window.fetch.bind(window);
  Object.assign(window, { __rev: 1, __refit: null, __allModes: 0 });
  window.fetch = async (url, options) => {
    const path = String(url);
    const recommendation = path.startsWith("/v1/recommendations");
    if (!recommendation && !path.startsWith("/v1/predictions")) return real(url, options);
    const kind = recommendation ? "recommendation" : JSON.parse(options.body).modes;
    if (kind === "all") window.__allModes++;
    const response = await real(url, options);
    if (!response.ok) return response;
    if (window.__refit === kind) window.__rev++;
    const answer = Object.assign(await response.json(), { revision: window.__rev });
    return new Response(JSON.stringify(answer), { status: response.status, headers: response.headers });
  };
})();"""

#: Loads in a row a refit may start: MAX_REFITS of the page's recommend.js, read from the page.
REFIT_LIMIT = int(re.search(r"const MAX_REFITS = (\d+);",
                            (Path(__file__).resolve().parents[2] / "api" / "static" / "recommend.js").read_text()).group(1))


def test_refits_in_a_row_are_bounded_and_a_later_choice_loads_again(server, browser):
    """Uploads that keep refitting the workload stop the page's reloads after a few, saying which choices
    load it again, whether they land before each recommendation or between a load's two answers; once they
    stop, an objective change (no reload of its own) loads the newer fit and answers: the page is not stuck."""
    errors = len(browser.errors())
    hook = browser.call("Page.addScriptToEvaluateOnNewDocument", source=REFIT_HOOK)["identifier"]
    error = "document.body.dataset.state === 'error' && document.getElementById('status').textContent"
    try:
        browser.navigate(server.url + "/?device=nano&workload=builtin:simulated:resnet18-cifar10")
        _ready_for(browser, "nano", 120)
        # a newer fit before every recommendation: the refit loads stop after the limit
        browser.evaluate("window.__refit = 'recommendation'; window.__allModes = 0")
        _choose(browser, "objective", "min-time")
        status = browser.wait_for(error, 60)
        assert "refitted" in status and "device, workload or coverage" in status, status
        assert "any choice" not in status, status
        assert browser.evaluate("window.__allModes") == REFIT_LIMIT
        # a coverage change loads again, with a count of its own: its load and as many refit loads
        browser.evaluate("window.__allModes = 0")
        _choose(browser, "confidence", "0.8")
        assert "refitted" in browser.wait_for(error, 60)
        assert browser.evaluate("window.__allModes") == REFIT_LIMIT + 1
        # the uploads stopped: the shown modes are of an older fit, and an objective change loads the newer one
        browser.evaluate("window.__refit = null")
        _choose(browser, "objective", "min-energy")
        assert _ready_for(browser, "nano", 60)["objective"] == "min-energy"
        assert browser.evaluate("[jetpredictPage.state.data.revision, jetpredictPage.state.rec.revision, "
                                "window.__rev]") == [browser.evaluate("window.__rev")] * 3

        # a newer fit between each load's all-mode answer and its presets: asked again a few times, not for ever
        browser.evaluate("window.__refit = 'presets'; window.__allModes = 0")
        _choose(browser, "confidence", "0.5")
        status = browser.wait_for(error, 60)
        assert "refitted" in status, status
        assert browser.evaluate("window.__allModes") == REFIT_LIMIT + 1
        browser.evaluate("window.__refit = null")
        _choose(browser, "confidence", "0.9")
        _ready_for(browser, "nano", 60)
    finally:
        browser.call("Page.removeScriptToEvaluateOnNewDocument", identifier=hook)
    assert not _errors_since(browser, errors), _errors_since(browser, errors)


def test_a_time_cap_stays_with_its_workload_and_device_a_power_cap_goes_everywhere(server, browser):
    """A time cap (s per epoch) means something only for the workload and device it was chosen for: another
    workload or device starts at the default (the middle of its slider), and coming back finds the cap again.
    A power cap (a supply's budget) is kept across workloads and devices."""
    errors = len(browser.errors())
    first = "builtin:simulated:resnet18-cifar10"  # nano's and Orin Nano's
    browser.navigate(server.url + "/?device=nano&workload=" + first)
    _ready_for(browser, "nano", 120)
    other = browser.evaluate("Array.from(document.getElementById('workload').options).map((o) => o.value)"
                             f".find((v) => v.startsWith('builtin:') && v !== {json.dumps(first)})")
    assert other, "the premise: nano has a second built-in workload"
    middle = ("(() => { const s = document.getElementById('cap'); "
              "return +(+s.dataset.lo * Math.sqrt(+s.dataset.hi / +s.dataset.lo)).toPrecision(4); })()")

    _choose(browser, "cap-kind", "max_epoch_time_s")
    default = _cap_key(browser, "nano", "max_epoch_time_s")
    assert default == browser.evaluate(middle)
    exact = float(f"{default * 1.37:.5g}")
    _choose(browser, "cap-number", str(exact), event="input")
    browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).constraints.max_epoch_time_s "
                     f"=== {exact}", 60)
    _choose(browser, "workload", other)
    browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).workload === {json.dumps(other)}", 120)
    assert _cap_key(browser, "nano", "max_epoch_time_s") == browser.evaluate(middle) != exact
    _choose(browser, "workload", first)
    browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).workload === {json.dumps(first)}", 120)
    assert _cap_key(browser, "nano", "max_epoch_time_s") == exact
    _choose(browser, "device", "orin-nano")  # the same workload, another device
    key = _ready_for(browser, "orin-nano", 120)
    assert key["workload"] == first and key["constraints"]["max_epoch_time_s"] == browser.evaluate(middle) != exact

    _choose(browser, "cap-kind", "max_power_w")
    _choose(browser, "cap-number", "6.5", event="input")
    browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).constraints.max_power_w === 6.5", 60)
    _choose(browser, "device", "nano")
    _choose(browser, "workload", other)
    browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).workload === {json.dumps(other)}", 120)
    assert _cap_key(browser, "nano", "max_power_w") == 6.5
    assert browser.evaluate("document.getElementById('cap-note').textContent") == ""
    assert not _errors_since(browser, errors), _errors_since(browser, errors)
