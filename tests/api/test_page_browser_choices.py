"""The user's choices in a real headless Chromium: the workload kept by name across a device switch (and the
note when it must change), the page's link following each choice so that a reload restores it, the fit's
caveats in the provenance (worded as ``jetpredict predict`` words them), a cap the service refuses told in
the service's words, and an upload's errors naming the CSV line."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, quote, urlsplit

import pandas as pd
import requests
from jetpredict.predictor.constants import LACK_OF_FIT_REL
from jetpredict.predictor.limits import DEFAULT_CONFIDENCE, MAX_EPOCHS
from page_browser_support import (
    BROWSER_TESTS,
    CAP_VALUE,
    READY,
    WORKLOAD,
    choose,
    errors_since,
    provenance,
    ready_for,
    store,
)

from tools.browser import Browser

pytestmark = BROWSER_TESTS

NOTE = "document.getElementById('workload-note').textContent"
LINK_NOTE = "(document.getElementById('link-note').hidden ? '' : document.getElementById('link-note').textContent)"


def _link(browser: Browser) -> dict[str, str]:
    """The page's own link (its query), one value per name."""
    return {k: v[-1] for k, v in parse_qs(urlsplit(browser.evaluate("location.href")).query).items()}


def _reload(browser: Browser) -> None:
    """Open the page's own link again, as a reload does (navigate waits for a changed address)."""
    href = browser.evaluate("location.href")
    browser.navigate("about:blank")
    browser.navigate(href)


def test_a_device_switch_keeps_the_workload_by_name_and_says_when_it_changes(server, browser):
    """AGX Xavier's published ResNet-18 becomes the simulated ResNet-18 of Orin NX (the same network: no
    built-in of another name), and the workload note says which it was, what it is now and why; a workload
    the new device lacks says so too; the note goes with the user's next choice of workload."""
    errors = len(browser.errors())
    browser.navigate(server.url + "/?device=agx-xavier&workload=" + quote(WORKLOAD))
    assert ready_for(browser, "agx-xavier", 120)["workload"] == WORKLOAD
    assert browser.evaluate(NOTE) == ""
    for device in ("orin-nx", "nano"):
        choose(browser, "device", device)
        assert ready_for(browser, device, 120)["workload"] == "builtin:simulated:resnet18-cifar10", device
        note = browser.evaluate(NOTE)
        assert "resnet18-cifar10 (published)" in note and "simulated" in note and "no published" in note, note
        choose(browser, "device", "agx-xavier")  # back: the published sweep is there again, by name and source
        key = ready_for(browser, "agx-xavier", 120)
        assert key["workload"] == "builtin:simulated:resnet18-cifar10", key  # what was shown stays, exactly
        assert browser.evaluate(NOTE) == ""
        choose(browser, "workload", WORKLOAD)
        ready_for(browser, "agx-xavier")

    published_only = "builtin:published:mobilenetv3-gld23k"  # AGX Xavier's alone
    choose(browser, "workload", published_only)
    browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).workload === {json.dumps(published_only)}",
                     120)
    choose(browser, "device", "orin-nx")
    key = ready_for(browser, "orin-nx", 120)
    shown = browser.evaluate("(() => { const s = document.getElementById('workload'); "
                             "return s.options[s.selectedIndex].textContent; })()")
    note = browser.evaluate(NOTE)
    assert key["workload"] != published_only and "mobilenetv3-gld23k (published)" in note, note
    assert "Jetson AGX Xavier" in note and "no built-in mobilenetv3-gld23k" in note, note
    assert shown.split(" (")[0] in note, (shown, note)  # what it is now
    choose(browser, "workload", "builtin:simulated:vgg11-cifar10")
    browser.wait_for(f"{READY} && {NOTE} === ''", 120)
    assert not errors_since(browser, errors), errors_since(browser, errors)


def test_the_link_follows_each_choice_and_a_reload_restores_it(server, browser):
    """Each choice of device, workload, objective and cap is written into the page's link (replaceState), so a
    reload shows what the user saw; a link's note about a workload not found goes once the user chooses, and
    is not repeated by a reload; a link's cap that is no number is said and left out."""
    errors = len(browser.errors())
    browser.navigate(server.url + "/?device=orin-nx&workload=stored:nonexistent")
    ready_for(browser, "orin-nx", 120)
    assert '"stored:nonexistent" was not found' in browser.evaluate(LINK_NOTE)
    choose(browser, "device", "nano")
    key = ready_for(browser, "nano", 120)
    assert browser.evaluate(LINK_NOTE) == ""
    browser.wait_for(f"new URLSearchParams(location.search).get('workload') === {json.dumps(key['workload'])}", 30)
    # the cap's kind; its value only once the user chooses one (the default is no choice)
    assert _link(browser) == {"device": "nano", "workload": key["workload"], "objective": "min-energy",
                              "cap": "max_power_w"}, _link(browser)
    choose(browser, "objective", "min-time")
    choose(browser, "cap-number", "7.5", event="input")
    browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).constraints.max_power_w === 7.5", 60)
    browser.wait_for("new URLSearchParams(location.search).get('max_power_w') === '7.5'", 30)
    assert _link(browser)["objective"] == "min-time"
    _reload(browser)
    again = ready_for(browser, "nano", 120)
    assert again == {**key, "objective": "min-time", "constraints": {"max_power_w": 7.5}}, (again, key)
    assert browser.evaluate(LINK_NOTE) == ""

    # a time cap (exact, from the box) and no cap are restored too
    choose(browser, "cap-kind", "max_epoch_time_s")
    ready_for(browser, "nano")
    exact = float(f"{browser.evaluate(CAP_VALUE) * 1.37:.5g}")
    choose(browser, "cap-number", str(exact), event="input")
    browser.wait_for(f"+new URLSearchParams(location.search).get('max_epoch_time_s') === {exact}", 30)
    assert "max_power_w" not in _link(browser)
    _reload(browser)
    assert ready_for(browser, "nano", 120)["constraints"] == {"max_epoch_time_s": exact}
    choose(browser, "cap-kind", "none")
    browser.wait_for("new URLSearchParams(location.search).get('cap') === 'none'", 30)
    assert "max_epoch_time_s" not in _link(browser)
    _reload(browser)
    assert ready_for(browser, "nano", 120)["constraints"] == {}
    assert browser.evaluate("document.getElementById('cap-kind').value") == "none"

    browser.navigate(server.url + "/?device=agx-xavier")
    default = ready_for(browser, "agx-xavier", 120)["constraints"]
    browser.navigate(server.url + "/?device=agx-xavier&max_power_w=abc&cap=watts&objective=fastest")
    key = ready_for(browser, "agx-xavier", 120)
    assert key["constraints"] == default and key["objective"] == "min-energy", key
    note = browser.evaluate(LINK_NOTE)
    assert 'max_power_w "abc"' in note and 'cap "watts"' in note and "left out" in note, note
    assert 'objective "fastest"' in note, note
    browser.navigate(server.url + "/?device=orin-nano&max_epoch_time_s=12.5")  # a value names its kind
    assert ready_for(browser, "orin-nano", 120)["constraints"] == {"max_epoch_time_s": 12.5}
    assert not errors_since(browser, errors), errors_since(browser, errors)


def _controls(browser: Browser) -> list[str]:
    """The coverage and epochs shown, as the page's controls hold them."""
    return browser.evaluate("['confidence', 'epochs'].map((id) => document.getElementById(id).value)")


def test_the_link_carries_the_coverage_and_epochs_from_the_first_request(server, browser):
    """?confidence= and ?epochs= are chosen before the first requests: the predictions and the recommendations
    ask with them from the start (none with the defaults first). A change of either is written into the link,
    the other parameters kept (the default coverage and an empty epochs box are not written), and a reload
    restores it; a coverage the page does not offer, or epochs that are no whole number in the API's range, is
    said in the link's note and left out."""
    errors, posted = len(browser.errors()), len(browser.posts())
    browser.navigate(server.url + "/?device=nano&objective=min-time&confidence=0.95&epochs=20")
    key = ready_for(browser, "nano", 120)
    assert (key["confidence"], key["epochs"], key["objective"]) == (0.95, 20, "min-time"), key
    assert _controls(browser) == ["0.95", "20"]
    assert browser.evaluate(LINK_NOTE) == ""
    asked = [(urlsplit(url).path, json.loads(body)) for url, body in browser.posts()[posted:]]
    recs = [body for path, body in asked if path == "/v1/recommendations"]
    assert recs and all(body.get("epochs") == 20 for body in recs), recs
    assert all(body["confidence"] == 0.95 for _, body in asked), asked

    choose(browser, "confidence", "0.8")
    browser.wait_for("new URLSearchParams(location.search).get('confidence') === '0.8'", 30)
    choose(browser, "epochs", "7", event="input")
    browser.wait_for("new URLSearchParams(location.search).get('epochs') === '7'", 30)
    link = _link(browser)
    assert (link["device"], link["objective"], link["confidence"]) == ("nano", "min-time", "0.8"), link
    _reload(browser)
    key = ready_for(browser, "nano", 120)
    assert (key["confidence"], key["epochs"], key["objective"]) == (0.8, 7, "min-time"), key
    choose(browser, "confidence", str(DEFAULT_CONFIDENCE))
    choose(browser, "epochs", "", event="input")
    browser.wait_for("!new URLSearchParams(location.search).has('confidence') && "
                     "!new URLSearchParams(location.search).has('epochs')", 30)
    assert _link(browser)["objective"] == "min-time"

    for coverage, epochs in (("0.97", "2.5"), ("most", str(MAX_EPOCHS + 1)), ("0.95", "0"), ("0.95", "many")):
        browser.navigate(server.url + f"/?device=nano&confidence={coverage}&epochs={epochs}")
        key = ready_for(browser, "nano", 120)
        assert key["epochs"] is None and _controls(browser)[1] == "", key
        note = browser.evaluate(LINK_NOTE)
        assert f'epochs "{epochs}"' in note and "left out" in note, note
        if coverage != "0.95":
            assert key["confidence"] == DEFAULT_CONFIDENCE and f'coverage "{coverage}"' in note, (key, note)
            assert "0.95" in note, note  # the coverages the page offers, as a link writes them
        else:
            assert key["confidence"] == 0.95 and "coverage" not in note, (key, note)
    assert not errors_since(browser, errors), errors_since(browser, errors)


def _unasked_errors(browser: Browser, start: int) -> list[str]:
    """Page errors after the first ``start``, less the refusals (422) that the test asks for on purpose and
    Chromium logs (a bad CSV cell, a cap the service refuses)."""
    return [e for e in errors_since(browser, start) if "status of 422" not in e]


def _csv(rows: list[dict], path, blank_after: int | None = None) -> None:
    """``rows`` as a profile CSV at ``path`` (an empty cell for null); a blank line after data row
    ``blank_after`` where given."""
    lines = pd.DataFrame(rows).to_csv(index=False).splitlines()
    if blank_after is not None:
        lines.insert(blank_after + 2, "")
    path.write_text("\n".join(lines) + "\n")


def _upload(browser: Browser, live, path) -> str:
    """Upload ``path`` from the page with the service's key; the upload status once the answer is in."""
    browser.set_files("#csv-file", [path])
    choose(browser, "api-key", live.api_keys.split(",")[0], event="input")
    browser.evaluate("document.getElementById('upload-button').click()")
    return browser.wait_for("!document.getElementById('upload-button').disabled && "
                            "!document.getElementById('upload-status').textContent.startsWith('uploading') && "
                            "document.getElementById('upload-status').textContent", 120)


def test_the_fits_caveats_are_shown_as_the_cli_words_them_and_upload_errors_name_the_csv_line(stored_server,
                                                                                              browser, tmp_path):
    """A 4-row Orin NX CSV whose modes all run the CPU at 1190.4 MHz: the provenance says cpu_mhz is not varied
    and how far the rows scatter about the fit, in ``jetpredict predict``'s words, with the warning above the
    service's own level (read from its OpenAPI document, not restated). A bad cell of that CSV is named by its
    line in the file as well as by the rows index the service gives."""
    live = stored_server
    errors = len(browser.errors())
    sweep = requests.get(f"{live.url}/v1/reference-workloads/orin-nx/resnet18-cifar10",
                         params={"source": "simulated"}, timeout=30).json()["rows"]
    fixed_cpu = [{**r, "workload": "fixed-cpu"} for r in sweep if abs(r["cpu_mhz"] - 1190.4) < 0.01][:4]
    assert len(fixed_cpu) == 4 and len({r["mode"] for r in fixed_cpu}) == 4
    browser.navigate(live.url + "/?device=orin-nx")
    ready_for(browser, "orin-nx", 120)
    assert browser.evaluate("jetpredictPage.state.scatterWarnRel") == LACK_OF_FIT_REL

    bad = [dict(r) for r in fixed_cpu]
    bad[1]["epoch_time_s"] = -1.0
    path = tmp_path / "fixed-cpu.csv"
    _csv(bad, path, blank_after=0)  # header line 1, rows.0 line 2, a blank line 3: rows.1 is line 4
    said = _upload(browser, live, path)
    assert said.startswith("upload failed") and "line 4 (rows.1.epoch_time_s): must be > 0 s" in said, said

    _csv(fixed_cpu, path)
    assert _upload(browser, live, path).startswith("stored 4 rows of fixed-cpu")
    browser.wait_for(f"{READY} && document.getElementById('workload').value === 'stored:fixed-cpu'", 120)
    answer = browser.evaluate("jetpredictPage.state.rec")
    assert answer["aliased_knobs"] == {"cpu_mhz": "not varied"} and 0 < answer["rows_scatter_rel"] < LACK_OF_FIT_REL
    items = provenance(browser)["items"]
    assert items["aliased knobs"] == ("cpu_mhz (not varied): the profiled modes do not separate their effects; "
                                      "predictions along them take their split from the reference"), items
    scatter = f"{answer['rows_scatter_rel']:.1%}"
    assert items["rows' scatter"] == (f"the rows of the 4 profiled mode(s) scatter {scatter} (RMS) about the fitted "
                                      f"model: within what run-to-run noise explains (<= {LACK_OF_FIT_REL:.0%})"), items

    # rows the model's form misses: warned, in fit_check's words
    noisy = [{**r, "workload": "noisy-rows"} for r in sweep[:8]]
    for i, scale in ((1, 1.5), (4, 0.7), (6, 1.5)):
        for k in ("epoch_time_s", "stall_time_s", "compute_time_s", "epoch_energy_j"):
            if noisy[i].get(k) is not None:
                noisy[i][k] *= scale
    store(live, "noisy-rows", noisy)
    browser.navigate(live.url + "/?device=orin-nx&workload=stored:noisy-rows")
    ready_for(browser, "orin-nx", 120)
    answer = browser.evaluate("jetpredictPage.state.rec")
    assert answer["rows_scatter_rel"] > LACK_OF_FIT_REL and answer["aliased_knobs"] == {}
    items = provenance(browser)["items"]
    assert items["rows' scatter"] == (
        f"warning: the rows of the 8 profiled mode(s) scatter {answer['rows_scatter_rel']:.1%} (RMS) about the "
        f"fitted model: more than run-to-run noise explains (> {LACK_OF_FIT_REL:.0%}), so the model's form misses "
        "this workload here; its intervals carry the scatter as noise, and modes far from the profiled ones may be "
        "off by more"), items
    assert provenance(browser)["rowsScatterRel"] == str(answer["rows_scatter_rel"])
    assert items["aliased knobs"] == "none", items
    assert not _unasked_errors(browser, errors), _unasked_errors(browser, errors)


def test_a_cap_the_service_refuses_is_told_in_its_words_with_no_cap_shown(server, browser):
    """A cap no mode meets says so once. A power cap of 15000 on AGX Xavier is refused in the service's own
    words (it looks like milliwatts), beside the box and on the status line, and the readout beside the
    slider says no valid cap, as for -3 or a blank box; the cap carried to the next device is the last one
    taken, not a refused one."""
    errors = len(browser.errors())
    browser.navigate(server.url + "/?device=agx-xavier&workload=" + quote(WORKLOAD))
    ready_for(browser, "agx-xavier", 120)
    readout = "document.getElementById('cap-value').textContent"
    choose(browser, "cap-number", "0.5", event="input")
    browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).constraints.max_power_w === 0.5", 60)
    status = browser.evaluate("document.getElementById('status').textContent")
    reason = browser.evaluate("jetpredictPage.state.rec.reason")
    assert reason.startswith("no mode meets max_power_w=0.5")
    assert status.endswith(f": {reason}") and status.count("no mode meets") == 1, status
    assert browser.evaluate(readout) == "≤ 0.5 W"

    for typed, words in (("15000", "it looks like milliwatts (15 W); leave the cap out for no cap"),
                         ("-3", "max_power_w=-3 W is below the 0.1 W any powered Jetson module draws"),
                         ("", "got nothing")):
        choose(browser, "cap-number", typed, event="input")
        said = browser.wait_for(f"document.getElementById('cap-error').textContent.includes({json.dumps(words)}) "
                                "&& document.getElementById('cap-error').textContent", 60)
        assert browser.evaluate(readout) == "no valid cap", typed
        assert browser.evaluate("document.getElementById('cap').getAttribute('aria-valuetext')") == \
            "power cap: no valid cap", typed
        assert browser.evaluate("document.body.dataset.state") == "error"
        assert said in browser.evaluate("document.getElementById('status').textContent"), typed
    choose(browser, "device", "nano")
    assert ready_for(browser, "nano", 120)["constraints"] == {"max_power_w": 0.5}
    assert browser.evaluate("document.getElementById('cap-note').textContent") == ""
    assert browser.evaluate("document.getElementById('cap-error').textContent") == ""
    assert not _unasked_errors(browser, errors), _unasked_errors(browser, errors)
