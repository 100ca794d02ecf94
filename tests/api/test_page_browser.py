"""The mode-chooser page and /docs in a real headless Chromium, against a real ``jetpredict serve``: the
page's answer is the API's, uploads and searches, the workloads and devices a link names, provenance,
accessible names, narrow windows. Caps and epochs: ``test_page_browser_caps.py``; switching and refits:
``test_page_browser_switching.py``; failures: ``test_page_browser_faults.py``; the shared service, browser
and page helpers: ``conftest.py`` and ``page_browser_support.py``.

Chromium comes from the system packages (``.ci/run`` installs it); the tests are skipped, with the reason,
only where no Chromium executable exists. The browser is cut off from every host but the loopback one.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from urllib.parse import quote

import pytest
import requests
from jetpredict.models.catalogue import load_device
from page_browser_support import (
    BROWSER_TESTS,
    CAP_VALUE,
    HOLD_HOOK,
    READY,
    WORKLOAD,
    choose,
    errors_since,
    move_cap,
    off_host,
    provenance,
    ready_for,
    store,
)

from tools.browser import Browser

pytestmark = BROWSER_TESTS


#: The chosen mode's table on screen, as {row name: text}.
BEST_TABLE = ("Object.fromEntries(Array.from(document.querySelectorAll('#best table tr'))"
              ".map((r) => [r.cells[0].textContent, r.cells[1].textContent]))")


def _figures(text: str, unit: str) -> list[float]:
    """The figure, and the interval's ends where shown, of a cell the page wrote in ``unit``."""
    found = re.fullmatch(rf"(-?[\d.]+) {unit}(?:  \[(-?[\d.]+), (-?[\d.]+)\])?", text)
    assert found, (text, unit)
    return [float(g) for g in found.groups() if g is not None]


def _best_table_is_the_answers(table: dict[str, str], best: dict) -> None:
    """Each figure of the chosen mode's table is the answer's, in its unit (MHz, s, W, J), to the 4 significant
    digits the page writes (3 for an interval's ends)."""
    assert table["cores online"] == str(best["cpu_cores"])
    for name, field in (("CPU", "cpu_mhz"), ("GPU", "gpu_mhz"), ("memory (EMC)", "emc_mhz")):
        assert _figures(table[name], "MHz") == [pytest.approx(best[field], rel=5e-4)], (name, table[name])
    for name, field, unit in (("epoch time", "epoch_time_s", "s"), ("mean power", "avg_power_w", "W"),
                              ("energy", "epoch_energy_j", "J")):
        assert _figures(table[name], unit) == [pytest.approx(best[field], rel=5e-4),
                                               pytest.approx(best[f"{field}_low"], rel=5e-3),
                                               pytest.approx(best[f"{field}_high"], rel=5e-3)], (name, table[name])


def test_page_picks_the_same_best_mode_as_the_api(server, browser, tmp_path):
    errors, requested = len(browser.errors()), len(browser.requests())  # the browser is the session's
    browser.navigate(server.url + "/")
    browser.wait_for(READY, 120)
    choose(browser, "device", "agx-xavier")
    browser.wait_for(f"{READY} && document.getElementById('workload').options.length > 0", 60)
    choose(browser, "workload", WORKLOAD)
    browser.wait_for(f"{READY} && document.body.dataset.modes === '29232'", 120)
    choose(browser, "objective", "min-time")
    choose(browser, "cap-kind", "max_power_w")
    choose(browser, "cap", "15", event="input")
    expected_request = {"device": "agx-xavier", "workload": WORKLOAD, "confidence": 0.9, "objective": "min-time",
                        "constraints": {"max_power_w": 15}, "epochs": None}
    browser.wait_for(f"{READY} && document.body.dataset.request === {json.dumps(json.dumps(expected_request, separators=(',', ':')))}",
                     60)
    page_best = browser.evaluate("document.getElementById('best').dataset.mode")
    command = browser.evaluate("document.getElementById('command').textContent")
    reference_source = browser.evaluate("document.getElementById('provenance').dataset.referenceSource")

    rows = requests.get(f"{server.url}/v1/reference-workloads/agx-xavier/resnet18-cifar10",
                        params={"source": "published"}, timeout=30).json()["rows"]
    api = requests.post(f"{server.url}/v1/recommendations", timeout=60, json={
        "device": "agx-xavier", "workload": {"rows": rows}, "objective": "min-time",
        "constraints": {"max_power_w": 15}}).json()
    assert api["best"] is not None and api["best"]["avg_power_w"] <= 15
    assert page_best == api["best"]["mode"]
    assert command == f"sudo jetpredict apply --mode {api['best']['mode']}"
    assert reference_source == api["reference_source"] == "published"
    # the chosen mode's clocks and figures are the answer's, each in its unit
    _best_table_is_the_answers(browser.evaluate(BEST_TABLE), browser.evaluate("jetpredictPage.state.rec.best"))
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
    assert browser.errors()[errors:] == []
    assert off_host(server, browser, requested) == []

    shots = Path(os.environ.get("JETPREDICT_SCREENSHOT_DIR", tmp_path))
    shot = browser.screenshot(shots / "mode-chooser-test.png")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


#: The objective list on screen, as [value, words] pairs.
OBJECTIVES_SHOWN = "Array.from(document.getElementById('objective').options).map((o) => [o.value, o.text])"


def test_the_objectives_offered_are_the_apis(server, browser):
    """The objective list is the OpenAPI document's enum, read at run time: every objective the API takes,
    in words, least energy first (the page opens on a power cap); given a document stating a third, the same
    page code offers it too, under its name."""
    spec = requests.get(f"{server.url}/openapi.json", timeout=30).json()
    enum = spec["components"]["schemas"]["RecommendationRequest"]["properties"]["objective"]["enum"]
    browser.navigate(server.url + "/")
    browser.wait_for(READY, 120)
    shown = browser.evaluate(OBJECTIVES_SHOWN)
    assert sorted(value for value, _ in shown) == sorted(enum) and len(shown) == len(enum) >= 2
    assert all(words and words != value for value, words in shown), shown
    assert shown[0][0] == browser.evaluate("document.getElementById('objective').value") == "min-energy"
    # limits.js again, with a document that states one more objective (the page's fetch answers it)
    browser.evaluate("""(async () => {
      const real = window.fetch;
      window.fetch = async (url, options) => {
        const response = await real(url, options);
        if (!String(url).endsWith("/openapi.json")) return response;
        const doc = await response.json();
        doc.components.schemas.RecommendationRequest.properties.objective.enum.push("min-carbon");
        return new Response(JSON.stringify(doc), { headers: { "Content-Type": "application/json" } });
      };
      try { await (await import("/assets/limits.js")).loadLimits(); } finally { window.fetch = real; }
    })()""")
    assert browser.evaluate(OBJECTIVES_SHOWN) == [*shown, ["min-carbon", "min-carbon"]]


def test_docs_render_offline_from_the_package(server, browser):
    errors, requested = len(browser.errors()), len(browser.requests())
    browser.navigate(server.url + "/docs")
    title = browser.wait_for("document.querySelector('.swagger-ui .info .title') && "
                             "document.querySelector('.swagger-ui .info .title').textContent", 60)
    assert title.startswith("jetpredict")
    assert browser.wait_for("document.querySelectorAll('.opblock').length", 30) >= 8
    browser.evaluate("document.querySelector('.opblock-summary-control').click()")  # an operation opens
    browser.wait_for("document.querySelector('.opblock-body')", 30)
    blocked = [e for e in browser.errors()[errors:] if "Content Security Policy" in e]
    assert not blocked, blocked  # the page's own CSP and the docs' allow what they load
    assert off_host(server, browser, requested) == []


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
    choose(browser, "api-key", "wrong-key", event="input")
    browser.evaluate("document.getElementById('upload-button').click()")
    refused = browser.wait_for("document.getElementById('upload-status').className === 'error' && "
                               "document.getElementById('upload-status').textContent", 60)
    assert "X-API-Key" in refused
    choose(browser, "api-key", server.api_keys.split(",")[0], event="input")
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
    choose(browser, "workload-search", "PAGE-UP", event="input")
    browser.wait_for("document.getElementById('workload-note').textContent.includes('match')", 30)
    assert browser.evaluate("document.getElementById('workload-note').textContent") == \
        '1 stored workload matches "PAGE-UP"'
    assert browser.evaluate("Array.from(document.querySelectorAll('optgroup[data-kind=stored] option'))"
                            ".map((o) => o.value)") == ["stored:page-upload"]
    choose(browser, "workload-search", "no-such-net", event="input")
    browser.wait_for("document.getElementById('workload-note').textContent.includes('no-such-net')", 30)
    assert browser.evaluate("document.getElementById('workload').value") == "stored:page-upload"
    assert browser.evaluate("document.body.dataset.state") == "ready"
    choose(browser, "workload-search", "", event="input")


#: Evaluated before page.js on each page load of the test below: the page's first page of stored workloads
#: holds one (as when more than a page are stored), and POST /v1/recommendations can be held (HOLD_HOOK).
FETCH_HOOK = r"""(() => {
  const real = window.fetch.bind(window);
  window.fetch = (url, options) => {
    if (String(url) === "/v1/workloads?limit=100") return real("/v1/workloads?limit=1", options);
    return real(url, options);
  };
})();""" + HOLD_HOOK


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

    with browser.scripts_on_new_documents(FETCH_HOOK):
        browser.navigate(server.url + "/?device=xavier-nx&workload=stored:zz-page-cross")
        key = ready_for(browser, "xavier-nx", 120)
        assert key["workload"] == "stored:zz-page-cross"
        stored = browser.evaluate("Array.from(document.querySelectorAll('optgroup[data-kind=stored] option'))"
                                  ".map((o) => [o.value, o.textContent])")
        assert len(stored) == 2 and stored[0][0] == "stored:zz-page-cross" and stored[0][1].endswith("(chosen)")
        assert "cross-device" in stored[0][1]  # its rows are of AGX Xavier

        # a cap no mode meets: no best mode, and the provenance still says cross-device and where power comes from
        choose(browser, "cap-kind", "max_power_w")
        move_cap(browser, 0)
        cap = browser.evaluate(CAP_VALUE)
        browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).constraints.max_power_w === {cap}", 60)
        assert browser.evaluate("document.getElementById('best').dataset.mode") == ""
        status = browser.evaluate("document.getElementById('status').textContent")
        assert status.startswith("Jetson Xavier NX") and status.count("no mode meets") == 1, status  # the reason's
        shown = provenance(browser)
        assert shown["answer"] == "recommendation" and shown["crossDevice"] == "true", shown
        assert shown["items"]["cross-device"].startswith("yes: fitted on rows of") and "agx-xavier" in \
            shown["items"]["cross-device"], shown
        assert shown["powerSource"] in ("workload", "reference") and shown["items"]["power"] != "–", shown

        # the all-mode answer's provenance is on screen while the recommendation is still out
        browser.evaluate("window.__holdRecs = true")
        options = browser.evaluate("Array.from(document.getElementById('confidence').options).map((o) => o.value)")
        choose(browser, "confidence", options[0])
        browser.wait_for("jetpredictPage.state.data && window.__held.length > 0 && "
                         "document.getElementById('provenance').dataset.answer === 'predictions'", 120)
        shown = provenance(browser)
        assert shown["crossDevice"] == "true" and shown["items"]["cross-device"].startswith("yes"), shown
        assert shown["powerSource"] in ("workload", "reference"), shown
        assert not shown["items"]["predictions"].startswith("–"), shown  # the model version
        assert browser.evaluate("document.getElementById('workload').disabled") is True  # still loading
        # a bad epochs number cancels that recommendation: the controls are free again, the progress gone
        choose(browser, "epochs", "0", event="input")
        after = browser.evaluate("(() => { const d = (id) => document.getElementById(id).disabled; return "
                                 "[document.body.dataset.state, d('workload'), d('confidence'), d('cap'), "
                                 "d('workload-search'), document.getElementById('progress').hidden, "
                                 "document.querySelector('main').getAttribute('aria-busy')]; })()")
        assert after == ["error", False, False, False, False, True, "false"], after
        browser.evaluate("window.__release()")
        choose(browser, "epochs", "", event="input")
        key = ready_for(browser, "xavier-nx")
        assert key["workload"] == "stored:zz-page-cross" and key["confidence"] == float(options[0])
        assert provenance(browser)["answer"] == "recommendation"
    assert not errors_since(browser, errors), errors_since(browser, errors)


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
        store(live, workload, rows)
    chosen = "document.getElementById('workload').value"

    browser.navigate(live.url + "/?device=nano&workload=resnet18-cifar10")
    assert ready_for(browser, "nano", 120)["workload"] == builtin
    assert browser.evaluate(chosen) == builtin
    assert browser.evaluate("document.getElementById('link-note').hidden") is True

    browser.navigate(live.url + "/?device=nano&workload=" + quote(builtin))
    assert ready_for(browser, "nano", 120)["workload"] == builtin
    choose(browser, "device", "orin-nano")  # the choice kept: Orin Nano has this built-in too
    assert ready_for(browser, "orin-nano", 120)["workload"] == builtin

    for link in ("team:resnet18-cifar10", "stored:team:resnet18-cifar10"):
        browser.navigate(live.url + "/?device=nano&workload=" + quote(link))
        assert ready_for(browser, "nano", 120)["workload"] == "stored:team:resnet18-cifar10", link
        assert browser.evaluate("document.getElementById('link-note').hidden") is True
    assert not errors_since(browser, errors), errors_since(browser, errors)


def test_power_provenance_says_whose_power_the_fit_used_never_measured_for_the_twin(stored_server, browser):
    """The provenance's power and prior lines name their rows' source from the answer (workload_source,
    reference_source): a built-in twin workload's power is simulated, not "measured"; a published one's is
    the published measurements; rows stored as measured say measured sweeps."""
    live = stored_server
    errors = len(browser.errors())
    rows = requests.get(f"{live.url}/v1/reference-workloads/agx-xavier/resnet18-cifar10",
                        params={"source": "published"}, timeout=30).json()["rows"]
    store(live, "own-measured-power", [{**row, "source": "measured"} for row in rows[:6]])
    no_power = ("avg_power_w", "base_power_w", "epoch_energy_j")
    store(live, "own-no-power", [{**row, **dict.fromkeys(no_power)} for row in rows[:6]])
    cases = [("orin-nx", "builtin:simulated:resnet18-cifar10", "simulated", "workload"),
             ("agx-xavier", "builtin:published:resnet18-cifar10", "published", "workload"),
             ("agx-xavier", "stored:own-measured-power", "measured", "workload"),
             ("orin-nx", "stored:own-no-power", "published", "reference")]
    words = {"simulated": "digital twin (simulated)", "published": "published measurements (POMACS 2022)",
             "measured": "measured sweeps"}
    for device, workload, source, power in cases:
        browser.navigate(f"{live.url}/?device={device}&workload={quote(workload)}")
        assert ready_for(browser, device, 180)["workload"] == workload
        shown = provenance(browser)
        api = browser.evaluate("jetpredictPage.state.rec")
        assert api["workload_source"] == source and shown["powerSource"] == power, (api, shown)
        prior = words[api["reference_source"]]
        assert shown["items"]["power"] == (f"fitted on the workload's own power: {words[source]}" if power == "workload"
                                           else f"device reference power model: {prior} (no power in the rows; "
                                           "wider interval)"), shown
        assert shown["items"]["prior"] == prior, shown
        if "simulated" in (source, api["reference_source"]):
            assert "measur" not in shown["items"]["power"] + shown["items"]["prior"], shown
    assert not errors_since(browser, errors), errors_since(browser, errors)


def test_a_link_to_what_is_not_there_says_so(server, browser):
    """A link naming an unknown workload or device shows another one, and says which, until the user
    chooses."""
    errors = len(browser.errors())
    browser.navigate(server.url + "/?device=orin-nx&workload=stored:nonexistent")
    key = ready_for(browser, "orin-nx", 120)
    note = browser.evaluate("document.getElementById('link-note').hidden || "
                            "document.getElementById('link-note').textContent")
    shown = browser.evaluate("(() => { const s = document.getElementById('workload'); "
                             "return s.options[s.selectedIndex].textContent; })()")
    assert note is not True and '"stored:nonexistent" was not found' in note and f"showing {shown}" in note, note
    assert key["workload"] != "stored:nonexistent"
    other = browser.evaluate("Array.from(document.getElementById('workload').options).map((o) => o.value)"
                             ".find((v) => v.startsWith('builtin:') && v !== document.getElementById('workload').value)")
    choose(browser, "workload", other)
    ready_for(browser, "orin-nx")
    assert browser.evaluate("document.getElementById('link-note').hidden") is True

    browser.navigate(server.url + "/?device=bogus")
    ready_for(browser, "agx-xavier", 120)
    note = browser.evaluate("document.getElementById('link-note').textContent")
    assert browser.evaluate("document.getElementById('link-note').hidden") is False
    assert '"bogus"' in note and "agx-xavier" in note and "instead" in note, note
    assert not errors_since(browser, errors), errors_since(browser, errors)


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
    ready_for(browser, "orin-nano", 120)
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
    choose(browser, "cap-kind", "max_epoch_time_s")
    assert _accessible(browser, "#cap")["name"] == "time cap"
    text, value = browser.evaluate(slider)
    assert text == f"time cap {value} s"
    ready_for(browser, "orin-nano")
    for selector in ("#pareto", "#heatmap"):
        shown = _accessible(browser, selector)
        assert shown["role"] == "image" and "Jetson Orin Nano" in shown["name"], shown
    assert "1,800 modes" in _accessible(browser, "#pareto")["name"]
    choose(browser, "device", "nano")
    ready_for(browser, "nano", 120)
    assert "5,040 modes" in _accessible(browser, "#pareto")["name"]
    assert _accessible(browser, "#heatmap")["name"].endswith(
        browser.evaluate("document.getElementById('hm-legend').textContent"))


def test_narrow_windows_get_one_column_and_no_sideways_scroll(server):
    """Below 900 px the page is one column and the charts fit their figures: nothing scrolls sideways."""
    with Browser(width=375, height=800, offline=True) as narrow:
        narrow.navigate(server.url + "/?device=agx-xavier&workload=" + WORKLOAD)
        ready_for(narrow, "agx-xavier", 120)
        sizes = narrow.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth, "
                                "document.getElementById('heatmap').getBoundingClientRect().right, "
                                "jetpredictPage.state.chart.width, getComputedStyle(document.querySelector('main'))"
                                ".gridTemplateColumns.split(' ').length]")
        assert sizes[0] <= sizes[1] and sizes[2] <= sizes[1] and sizes[3] < 375 and sizes[4] == 1, sizes
        assert not narrow.errors(), narrow.errors()
