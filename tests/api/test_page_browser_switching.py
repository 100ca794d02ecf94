"""The answer on screen is always the chosen board's and the newest fit's, in a real headless Chromium:
devices switched faster than the service answers, stale answers dropped, refits loaded again a bounded
number of times."""

from __future__ import annotations

import json
import random
import re
import time
from functools import cache
from pathlib import Path

import pytest
import requests
from jetpredict.models.catalogue import device_ids, load_device
from page_browser_support import (
    BROWSER_TESTS,
    CAP_VALUE,
    HOLD_HOOK,
    READY,
    cap_key,
    choose,
    errors_since,
    move_cap,
    ready_for,
    store,
)

from tools.browser import Browser

pytestmark = BROWSER_TESTS


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


def _violations(browser: Browser) -> list[dict]:
    seen = browser.evaluate("Array.from(window.__seen.values())")
    return [s for s in seen if s["label"] not in _labels(s["device"])]


def _sent_for_other_device(browser: Browser, since: int) -> list[str]:
    """POSTs after the first ``since`` whose inline rows are of another device than the one asked for (the
    old board sent along)."""
    bad = []
    for url, body in browser.posts()[since:]:
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


def _stale_answers_are_dropped(browser: Browser, device: str, kind: str, other: str) -> None:
    """Stale answers made on purpose, whatever the service's speed: recommendations held back (HOLD_HOOK) and
    delivered after the page moved on, as if each arrived just before its abort. An answer to an older cap
    that comes after the newer one is shown, and one for the device left, are dropped: not shown, counted."""
    browser.evaluate(HOLD_HOOK)
    browser.evaluate("window.__keepAborted = true; window.__holdRecs = true")
    move_cap(browser, 0.35)
    older = browser.evaluate(CAP_VALUE)
    browser.wait_for("window.__held.length === 1", 30)  # asked after the debounce, and held
    move_cap(browser, 0.85)
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
    assert cap_key(browser, device, kind) == pytest.approx(newer)  # still the newer answer on screen
    assert _dropped(browser) > before

    # an answer asked for the device left, arriving once the next device is shown
    browser.evaluate("window.__holdRecs = true")
    move_cap(browser, 0.6)
    browser.wait_for("window.__held.length === 3", 30)
    browser.evaluate("window.__holdRecs = false")
    choose(browser, "device", other)
    ready_for(browser, other)
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
    errors, posted = len(browser.errors()), len(browser.posts())
    browser.navigate(server.url + "/?device=agx-xavier")
    ready_for(browser, "agx-xavier", 120)
    assert browser.evaluate(WATCH)
    current = "agx-xavier"
    for kind in ("max_power_w", "max_epoch_time_s"):
        choose(browser, "cap-kind", kind)
        order = [d for d in devices if d != current] + [current]
        for target in order:
            # a detour through the slowest board (AGX Xavier: 29,232 modes), abandoned mid-load
            detour = "agx-xavier" if target != "agx-xavier" else "xavier-nx"
            choose(browser, "device", detour)
            time.sleep(rng.choice((0.0, 0.05, 0.2, 0.5)))
            move_cap(browser, rng.random())
            # right after the switch (same task): loading, the device-bound controls disabled, nothing shown
            after = browser.evaluate(
                f"(() => {{ const e = document.getElementById('device'); e.value = {json.dumps(target)}; "
                "e.dispatchEvent(new Event('change')); const d = (id) => document.getElementById(id).disabled; "
                "return [document.body.dataset.state, d('cap'), d('workload'), d('confidence'), "
                "document.getElementById('best').dataset.mode, document.getElementById('progress').hidden]; })()")
            assert after == ["loading", True, True, True, "", False], after
            move_cap(browser, rng.random())  # disabled while loading: must not send the old device
            key = ready_for(browser, target)
            assert key["constraints"].keys() == {kind}
            # once ready, a cap move is answered for this device alone
            move_cap(browser, rng.uniform(0.3, 1.0))
            cap = browser.evaluate(CAP_VALUE)
            key = ready_for(browser, target)
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
    assert _sent_for_other_device(browser, posted) == []
    assert not errors_since(browser, errors), errors_since(browser, errors)


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
    error = "document.body.dataset.state === 'error' && document.getElementById('status').textContent"
    with browser.scripts_on_new_documents(REFIT_HOOK):
        browser.navigate(server.url + "/?device=nano&workload=builtin:simulated:resnet18-cifar10")
        ready_for(browser, "nano", 120)
        # a newer fit before every recommendation: the refit loads stop after the limit
        browser.evaluate("window.__refit = 'recommendation'; window.__allModes = 0")
        choose(browser, "objective", "min-time")
        status = browser.wait_for(error, 60)
        assert "refitted" in status and "device, workload or coverage" in status, status
        assert "any choice" not in status, status
        assert browser.evaluate("window.__allModes") == REFIT_LIMIT
        # a coverage change loads again, with a count of its own: its load and as many refit loads
        browser.evaluate("window.__allModes = 0")
        choose(browser, "confidence", "0.8")
        assert "refitted" in browser.wait_for(error, 60)
        assert browser.evaluate("window.__allModes") == REFIT_LIMIT + 1
        # the uploads stopped: the shown modes are of an older fit, and an objective change loads the newer one
        browser.evaluate("window.__refit = null")
        choose(browser, "objective", "min-energy")
        assert ready_for(browser, "nano", 60)["objective"] == "min-energy"
        assert browser.evaluate("[jetpredictPage.state.data.revision, jetpredictPage.state.rec.revision, "
                                "window.__rev]") == [browser.evaluate("window.__rev")] * 3

        # a newer fit between each load's all-mode answer and its presets: asked again a few times, not for ever
        browser.evaluate("window.__refit = 'presets'; window.__allModes = 0")
        choose(browser, "confidence", "0.5")
        status = browser.wait_for(error, 60)
        assert "refitted" in status, status
        assert browser.evaluate("window.__allModes") == REFIT_LIMIT + 1
        browser.evaluate("window.__refit = null")
        choose(browser, "confidence", "0.9")
        ready_for(browser, "nano", 60)
    assert not errors_since(browser, errors), errors_since(browser, errors)


def test_a_refitted_workload_is_shown_from_one_fit_and_the_choice_says_why_it_may_look_beaten(stored_server,
                                                                                              browser):
    """A recommendation from a newer fit of the stored workload (rows uploaded while the page is open) makes
    the page load the cloud and the presets again: never two fits shown as one. A choice that passed over a
    better-looking extrapolated mode (``preferred_in_range``) says so under the chosen mode."""
    live = stored_server
    errors = len(browser.errors())
    rows = requests.get(f"{live.url}/v1/reference-workloads/agx-xavier/resnet18-cifar10",
                        params={"source": "published"}, timeout=30).json()["rows"]
    store(live, "refit-me", rows[:4])
    browser.navigate(live.url + "/?device=agx-xavier&workload=refit-me")
    ready_for(browser, "agx-xavier", 120)
    first = browser.evaluate("document.body.dataset.revision")
    assert first and browser.evaluate("jetpredictPage.state.rec.revision") == int(first)
    rec = browser.evaluate("jetpredictPage.state.rec")
    assert rec["preferred_in_range"] is True, rec["preferred_in_range"]  # the premise: 4 rows, 15 W cap
    note = browser.evaluate("document.getElementById('best-note').hidden ? '' : "
                            "document.getElementById('best-note').textContent")
    assert "looked better, but not beyond its interval" in note, note

    store(live, "refit-me", rows[4:10])  # refitted: the next answers come from revision first + 1
    choose(browser, "objective", "min-time")
    browser.wait_for(f"{READY} && document.body.dataset.revision === '{int(first) + 1}'", 120)
    shown = browser.evaluate("(() => { const s = jetpredictPage.state; return [s.data.revision, s.rec.revision, "
                             "s.rec.profiled_modes, document.getElementById('provenance').textContent]; })()")
    assert shown[:3] == [int(first) + 1, int(first) + 1, 10], shown
    assert f"revision {int(first) + 1}" in shown[3]
    key = ready_for(browser, "agx-xavier")
    assert key["objective"] == "min-time" and key["constraints"] == {"max_power_w": 15}, key
    assert not errors_since(browser, errors), errors_since(browser, errors)


def _late_for_device_left(browser: Browser, modes: str, status: int | None = None) -> None:
    """A load of xavier-nx whose ``modes`` answer is held, nano chosen and shown, then that answer (or an error
    of ``status``) delivered: it is dropped, and the page still shows nano's answer as current."""
    held = browser.evaluate("window.__held.length")
    browser.evaluate(f"window.__holdModes = {json.dumps(modes)}")
    choose(browser, "device", "xavier-nx")
    browser.wait_for(f"window.__held.length === {held + 1}", 60)
    browser.evaluate("window.__holdModes = null")
    choose(browser, "device", "nano")
    ready_for(browser, "nano")
    before = _dropped(browser)
    browser.evaluate(f"window.__deliver({held}, {json.dumps(status)})")
    browser.wait_for(f"+(document.body.dataset.dropped || 0) > {before} || document.body.dataset.state !== 'ready'",
                     60)
    shown = ("(() => { const s = jetpredictPage.state; return [document.body.dataset.state, s.data.device, "
             "s.presets.map((p) => p.mode)]; })()")
    assert browser.evaluate(shown) == ["ready", "nano", [p.mode for p in load_device("nano").presets]]
    assert "5,040 modes predicted" in browser.evaluate("document.getElementById('status').textContent")
    assert [browser.evaluate(f"document.getElementById('{id}').dataset.device") for id in ("pareto", "heatmap")] \
        == ["nano", "nano"]


def test_late_answers_of_a_load_for_the_device_left_are_dropped(server, browser):
    """A load's answers for the device left, arriving once the next device is shown (its presets, or an
    error for its modes), are dropped: the modes drawn and held, and the status, stay the shown device's."""
    errors = len(browser.errors())
    browser.navigate(server.url + "/?device=nano")
    ready_for(browser, "nano", 120)
    browser.evaluate(HOLD_HOOK)
    browser.evaluate("window.__keepAborted = true")  # each late answer arrives whole, as if just before its abort
    assert browser.evaluate(WATCH)
    _late_for_device_left(browser, "presets")
    _late_for_device_left(browser, "all", status=422)
    assert _violations(browser) == []
    assert not errors_since(browser, errors), errors_since(browser, errors)
