"""The cap slider and number box, the coverage selector and the epochs box, in a real headless Chromium: the
slider reaches the upper ends modes are judged by, caps kept or reset across workloads and devices, bad
numbers refused with the field and the rule and never sent."""

from __future__ import annotations

import json
import re

import pytest
import requests
from jetpredict.models.catalogue import load_device
from page_browser_support import (
    BROWSER_TESTS,
    CAP_VALUE,
    READY,
    WORKLOAD,
    cap_key,
    choose,
    errors_since,
    move_cap,
    ready_for,
    store,
)

from tools.browser import Browser

pytestmark = BROWSER_TESTS


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
    ready_for(browser, "agx-xavier", 120)
    device = load_device("agx-xavier")
    rows = browser.evaluate("Array.from(document.querySelectorAll('#presets tbody tr')).map((r) => r.dataset.mode)")
    assert rows == [p.mode for p in device.presets]
    # each preset, and each mode on the charts, is within a power cap by the upper end of its interval, as the
    # API judges it: a cap between the least preset's mean and the upper end of its interval leaves it out
    presets = browser.evaluate("jetpredictPage.state.presets")  # the API's answer, as it came
    least = min(presets, key=lambda p: p["avg_power_w"])
    cap = round((least["avg_power_w"] + least["avg_power_w_high"]) / 2, 1)
    assert least["avg_power_w"] < cap < least["avg_power_w_high"], least
    choose(browser, "cap-number", str(cap), event="input")
    browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).constraints.max_power_w === {cap}", 60)
    within = browser.evaluate("Object.fromEntries(Array.from(document.querySelectorAll('#presets tbody tr'))"
                              ".map((r) => [r.dataset.mode, r.cells[1].textContent]))")
    assert within == {p["mode"]: "yes" if p["avg_power_w_high"] <= cap else "no" for p in presets}, (cap, presets)
    marked, under = browser.evaluate("(() => { const d = jetpredictPage.state.data; "
                                     "return [d.feasible.reduce((a, b) => a + b, 0), "
                                     f"d.columns.avg_power_w_high.filter((v) => v <= {cap}).length]; }})()")
    assert 0 < marked == under < 29232, (marked, under)
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
    choose(browser, "confidence", str(min(options)))
    assert browser.evaluate("document.getElementById('workload').disabled")  # device-bound controls wait
    key = ready_for(browser, "agx-xavier")
    assert key["confidence"] == min(options)
    assert browser.evaluate(width) < wide

    # epochs: totals for that many epochs, as the API computes them
    choose(browser, "epochs", "30", event="input")
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
    choose(browser, "epochs", "0", event="input")
    message = browser.wait_for("document.getElementById('epochs-error').textContent", 10)
    assert message.startswith("epochs: must be a whole number from 1") and '"0"' in message
    assert browser.evaluate("document.body.dataset.state") == "error"
    assert _posts_after_debounce(browser) == sent
    assert browser.evaluate("document.getElementById('choice').classList.contains('stale')")
    choose(browser, "epochs", "2.5", event="input")
    message = browser.wait_for("document.getElementById('epochs-error').textContent", 10)
    assert message.startswith("epochs: must be a whole number from 1") and '"2.5"' in message
    # a whole number written as the API takes it (JSON's exponent form) is that number
    choose(browser, "epochs", "1e2", event="input")
    browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).epochs === 100", 60)
    assert browser.evaluate("document.getElementById('epochs-error').textContent") == ""
    choose(browser, "epochs", "", event="input")
    browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).epochs === null", 60)
    assert not errors_since(browser, errors), errors_since(browser, errors)


def test_epochs_text_that_is_no_number_is_refused_like_any_bad_number(server, browser):
    """Text the number box cannot parse reads as "" (validity.badInput): it is refused with the field and
    the rule, not taken for an empty box, and nothing is sent."""
    errors = len(browser.errors())
    browser.navigate(server.url + "/?device=orin-nano")
    ready_for(browser, "orin-nano", 120)
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
    choose(browser, "epochs", "", event="input")
    browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).epochs === null", 60)
    assert not errors_since(browser, errors), errors_since(browser, errors)


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
    move_cap(browser, 1.0)
    cap = browser.evaluate(CAP_VALUE)
    browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).constraints.{kind} === {cap}", 60)


def test_cap_slider_reaches_the_upper_ends_that_modes_are_judged_by(server, browser):
    """Modes meet a cap by the upper end of their interval: the slider reaches the largest upper end of any
    mode or preset (no higher than the API accepts), so that its top lets every mode in; the 15 W default
    is not lowered to a cap that shuts out modes 15 W lets in."""
    errors = len(browser.errors())
    most = _device_max_power(server)
    browser.navigate(server.url + "/?device=agx-xavier&workload=" + WORKLOAD)
    ready_for(browser, "agx-xavier", 120)
    cap = browser.evaluate(CAP_STATE)
    assert cap["power"] < most["agx-xavier"]
    assert cap["power"] <= cap["max"] <= most["agx-xavier"], cap  # MAXN's upper end (33 W) within reach
    _cap_to_top(browser, "max_power_w")
    cap = browser.evaluate(CAP_STATE)
    assert cap["feasible"] == cap["modes"] and cap["over"] == [], cap  # every mode and preset qualifies

    # ... and starts at the least upper end: below it no mode qualifies, so no lower cap is offered.
    assert cap["leastPower"] - cap["step"] < cap["min"] <= cap["leastPower"], cap
    choose(browser, "cap-kind", "max_epoch_time_s")
    cap = browser.evaluate(CAP_STATE)
    assert cap["max"] >= cap["time"], cap
    assert cap["leastTime"] * (1 - 1e-3) < cap["min"] <= cap["leastTime"], cap  # 4 significant digits
    _cap_to_top(browser, "max_epoch_time_s")
    cap = browser.evaluate(CAP_STATE)
    assert cap["feasible"] == cap["modes"] and cap["over"] == [], cap

    # LeNet-5 draws under 15 W in every mode: the default cap lets in all that 15 W would (MAXN included)
    browser.navigate(server.url + "/?device=agx-xavier&workload=builtin:published:lenet5-mnist")
    key = ready_for(browser, "agx-xavier", 120)
    cap = browser.evaluate(CAP_STATE)
    assert key["constraints"] == {"max_power_w": cap["value"]}
    assert cap["withinValue"] == cap["within15"] == cap["n"], cap
    assert "MAXN" not in cap["over"], cap

    # Orin Nano: the 15W preset's upper end lies above every custom mode's
    browser.navigate(server.url + "/?device=orin-nano")
    ready_for(browser, "orin-nano", 120)
    cap = browser.evaluate(CAP_STATE)
    assert cap["power"] <= cap["max"] <= most["orin-nano"], cap
    _cap_to_top(browser, "max_power_w")
    assert browser.evaluate(CAP_STATE)["over"] == []
    assert not errors_since(browser, errors), errors_since(browser, errors)


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
    store(live, "fast-epochs", fast)
    browser.navigate(live.url + "/?device=nano&workload=stored:fast-epochs")
    ready_for(browser, "nano", 120)
    choose(browser, "cap-kind", "max_epoch_time_s")
    cap = browser.evaluate(CAP_STATE)
    assert cap["leastTime"] < 0.1, cap  # the premise: the least epoch time's upper end under 0.1 s
    assert cap["min"] > 0, cap
    move_cap(browser, 0)
    least = browser.evaluate(CAP_VALUE)
    assert least == cap["min"]
    browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).constraints.max_epoch_time_s "
                     f"=== {least}", 60)
    assert cap["leastTime"] * (1 - 1e-3) < cap["min"] <= cap["leastTime"] < cap["time"] <= cap["max"], cap
    # log scale: equal moves of the slider multiply the cap by equal factors
    caps = []
    for fraction in (0.25, 0.5, 0.75):
        move_cap(browser, fraction)
        caps.append(browser.evaluate(CAP_VALUE))
    assert caps[1] / caps[0] == pytest.approx(caps[2] / caps[1], rel=0.02), caps
    # an exact cap typed in the box is asked as typed, and stays so when the coverage moves the bounds
    exact = float(f"{(caps[0] + caps[1]) / 2:.6g}")
    choose(browser, "cap-number", str(exact), event="input")
    browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).constraints.max_epoch_time_s "
                     f"=== {exact}", 60)
    choose(browser, "confidence", "0.5")
    key = ready_for(browser, "nano", 120)
    assert key["constraints"] == {"max_epoch_time_s": exact} and key["confidence"] == 0.5, key
    rule = browser.evaluate("[jetpredictPage.timeScale(0.00041234, 0.2), jetpredictPage.timeScale(32.07, 3103.2), "
                            "jetpredictPage.powerSlider(3.2, 40.7, 40)]")
    assert rule == [{"min": 0.0004123, "max": 0.2, "log": True}, {"min": 32.07, "max": 3104, "log": True},
                    {"step": 0.5, "min": 3, "max": 40}], rule
    assert not errors_since(browser, errors), errors_since(browser, errors)


def test_caps_are_kept_across_devices_exact_and_by_keyboard(server, browser):
    """A power cap typed exactly is kept across devices, lowered only to what the API takes for the new one
    (and said so); focus stays on a select whose change loads; the presets show the upper end of the capped
    quantity; the front's intervals are in a table (no mouse needed)."""
    errors = len(browser.errors())
    most = _device_max_power(server)
    browser.navigate(server.url + "/?device=agx-xavier&workload=" + WORKLOAD)
    ready_for(browser, "agx-xavier", 120)
    choose(browser, "cap-number", "12.3", event="input")
    browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).constraints.max_power_w === 12.3", 60)
    choose(browser, "device", "xavier-nx")
    assert ready_for(browser, "xavier-nx", 120)["constraints"] == {"max_power_w": 12.3}
    assert browser.evaluate("document.getElementById('cap-note').textContent") == ""
    above = float(f"{(most['nano'] + most['agx-xavier']) / 2:.3g}")  # allowed on AGX Xavier, not on Nano
    choose(browser, "device", "agx-xavier")
    ready_for(browser, "agx-xavier", 120)
    choose(browser, "cap-number", str(above), event="input")
    browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).constraints.max_power_w === {above}", 60)
    choose(browser, "device", "nano")
    key = ready_for(browser, "nano", 120)
    assert key["constraints"] == {"max_power_w": most["nano"]}, key
    note = browser.evaluate("document.getElementById('cap-note').textContent")
    assert "lowered to" in note and "Jetson Nano" in note, note

    # keyboard: the focused select keeps its focus through the load its change starts
    browser.evaluate("document.getElementById('confidence').focus()")
    choose(browser, "confidence", "0.8")
    assert browser.evaluate("document.activeElement.id") == "confidence"
    ready_for(browser, "nano", 120)
    assert browser.evaluate("[document.activeElement.id, document.getElementById('confidence').disabled, "
                            "document.getElementById('confidence').getAttribute('aria-disabled')]") == \
        ["confidence", False, None]
    front = browser.evaluate("Array.from(document.querySelectorAll('#front tbody tr')).map((r) => "
                            "Array.from(r.cells).map((c) => c.textContent).join(' | '))")
    assert len(front) == len(browser.evaluate("jetpredictPage.state.rec.pareto")) > 0
    assert all(re.search(r"\[[\d.]+, [\d.]+\]", row) for row in front), front[:3]

    # a time cap: the presets show the upper end of their epoch time, which the cap is checked against
    choose(browser, "cap-kind", "max_epoch_time_s")
    ready_for(browser, "nano")
    shown = browser.evaluate("[document.getElementById('presets-top').textContent, "
                             "Array.from(document.querySelectorAll('#presets tbody tr')).map((r) => "
                             "[r.cells[1].textContent, r.cells[4].textContent])]")
    presets = browser.evaluate("jetpredictPage.state.presets")
    cap = browser.evaluate(CAP_VALUE)
    assert shown[0] == "time ≤"
    for (within, top), p in zip(shown[1], presets, strict=True):
        assert top.endswith(" s") and float(top[:-2]) == pytest.approx(p["epoch_time_s_high"], rel=1e-3)
        assert within == ("yes" if p["epoch_time_s_high"] <= cap else "no")
    assert not errors_since(browser, errors), errors_since(browser, errors)


def test_a_time_cap_stays_with_its_workload_and_device_a_power_cap_goes_everywhere(server, browser):
    """A time cap (s per epoch) means something only for the workload and device it was chosen for: another
    workload or device starts at the default (the middle of its slider), and coming back finds the cap again.
    A power cap (a supply's budget) is kept across workloads and devices."""
    errors = len(browser.errors())
    first = "builtin:simulated:resnet18-cifar10"  # nano's and Orin Nano's
    browser.navigate(server.url + "/?device=nano&workload=" + first)
    ready_for(browser, "nano", 120)
    other = browser.evaluate("Array.from(document.getElementById('workload').options).map((o) => o.value)"
                             f".find((v) => v.startsWith('builtin:') && v !== {json.dumps(first)})")
    assert other, "the premise: nano has a second built-in workload"
    middle = ("(() => { const s = document.getElementById('cap'); "
              "return +(+s.dataset.lo * Math.sqrt(+s.dataset.hi / +s.dataset.lo)).toPrecision(4); })()")

    choose(browser, "cap-kind", "max_epoch_time_s")
    default = cap_key(browser, "nano", "max_epoch_time_s")
    assert default == browser.evaluate(middle)
    exact = float(f"{default * 1.37:.5g}")
    choose(browser, "cap-number", str(exact), event="input")
    browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).constraints.max_epoch_time_s "
                     f"=== {exact}", 60)
    choose(browser, "workload", other)
    browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).workload === {json.dumps(other)}", 120)
    assert cap_key(browser, "nano", "max_epoch_time_s") == browser.evaluate(middle) != exact
    choose(browser, "workload", first)
    browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).workload === {json.dumps(first)}", 120)
    assert cap_key(browser, "nano", "max_epoch_time_s") == exact
    choose(browser, "device", "orin-nano")  # the same workload, another device
    key = ready_for(browser, "orin-nano", 120)
    assert key["workload"] == first and key["constraints"]["max_epoch_time_s"] == browser.evaluate(middle) != exact

    choose(browser, "cap-kind", "max_power_w")
    choose(browser, "cap-number", "6.5", event="input")
    browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).constraints.max_power_w === 6.5", 60)
    choose(browser, "device", "nano")
    choose(browser, "workload", other)
    browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).workload === {json.dumps(other)}", 120)
    assert cap_key(browser, "nano", "max_power_w") == 6.5
    assert browser.evaluate("document.getElementById('cap-note').textContent") == ""
    assert not errors_since(browser, errors), errors_since(browser, errors)
