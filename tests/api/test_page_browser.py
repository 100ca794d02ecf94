"""The mode-chooser page and /docs in a real headless Chromium, against a real ``jetpredict serve``.

Chromium comes from the system packages (``.ci/run`` installs it); the test is skipped, with the reason,
only where no Chromium executable exists. The browser is cut off from every host but the loopback one.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import requests
from jetpredict.api.testing import LiveServer

from tools.browser import Browser, find_chromium

pytestmark = pytest.mark.skipif(find_chromium() is None,
                                reason="no Chromium: apt-get install chromium (as .ci/run does)")

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
    expected_request = {"device": "agx-xavier", "workload": WORKLOAD, "objective": "min-time",
                        "constraints": {"max_power_w": 15}}
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
    browser.evaluate("document.getElementById('upload-button').click()")
    browser.wait_for("document.getElementById('upload-status').textContent.startsWith('stored 4 rows of page-upload')",
                     60)
    browser.wait_for(f"{READY} && document.getElementById('workload').value === 'stored:page-upload'", 120)
    assert browser.evaluate("document.getElementById('best').dataset.mode")
    stored = requests.get(f"{server.url}/v1/workloads/page-upload", timeout=30).json()
    assert stored["rows_stored"] == 4
