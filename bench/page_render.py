"""How fast the mode-chooser page draws every power mode of each Jetson type in headless Chromium, and how
that cost grows with the number of modes (1,800 on Orin Nano to 29,232 on AGX Xavier).

Starts ``jetpredict serve`` (one worker), opens ``/`` for each device with the built-in simulated
ResNet-18 workload in the system's Chromium (cut off from other hosts), and reads the page's own timings
(``performance.now()`` around each stage, see ``api/static/load.js`` and ``recommend.js``):

- ``paint``: from the parsed data to the frame that shows all modes (Pareto cloud + heat map) done,
  the figure the issue bounds (< 2 s on AGX Xavier); ``render``: the drawing calls alone;
- ``parse``: the all-mode answer's columns into typed arrays; ``fetch``: the workload's rows,
  ``POST /v1/predictions`` for all modes (``"layout": "columns"``, JSON decoding included) and the presets;
- ``redraw``: a cap change (recolour every mode, front, heat map) after the recommendation arrives;
- ``switch``: from choosing the device (after another one was shown) to its chosen mode on screen.

Each figure is the median (and max) over ``--runs`` loads per device. A plain run prints; ``--write``
also writes ``bench/results/page_render.md`` and the page's screenshot ``docs/mode-chooser.png`` (AGX
Xavier, published ResNet-18 rows, shown in the README).

    python bench/page_render.py [--runs 3] [--write]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jetpredict.models.catalogue import list_devices  # noqa: E402
from results_io import growth_exponent, write_results  # noqa: E402

from tools.browser import Browser, find_chromium  # noqa: E402
from tools.testing import LiveServer  # noqa: E402

SCREENSHOT = ROOT / "docs" / "mode-chooser.png"
LIMIT_MS = 2000.0  # the bound on drawing all 29,232 AGX Xavier modes
STAGES = ("paintMs", "renderMs", "parseMs", "fetchMs", "redrawMs", "switchMs")
WORKLOAD = "builtin:simulated:resnet18-cifar10"  # on every device: the same workload across sizes
SCREENSHOT_WORKLOAD = "builtin:published:resnet18-cifar10"
READY = "document.body.dataset.state === 'ready'"


def _set(browser: Browser, element_id: str, value: str, event: str) -> None:
    browser.evaluate(f"(() => {{ const e = document.getElementById({json.dumps(element_id)}); "
                     f"e.value = {json.dumps(value)}; e.dispatchEvent(new Event({json.dumps(event)})); }})()")


def _ready(browser: Browser, device: str, extra: str = "") -> None:
    browser.wait_for(f"{READY} && JSON.parse(document.body.dataset.request).device === {json.dumps(device)}"
                     + extra, 180)


def measure_device(browser: Browser, url: str, device: str, other: str, run: int) -> dict[str, float]:
    """One cold load of ``device`` (its timings), a cap change, then a switch away and back (its time)."""
    browser.navigate(f"{url}/?device={device}&workload={WORKLOAD}")
    _ready(browser, device)
    data = browser.evaluate("Object.assign({}, document.body.dataset)")
    # a cap change: alternately a quarter and three quarters up the slider (its range is the device's)
    cap = browser.evaluate(f"(() => {{ const s = document.getElementById('cap'); "
                           f"s.value = String(+s.min + {0.75 if run % 2 else 0.25} * (+s.max - +s.min)); "
                           "s.dispatchEvent(new Event('input')); return +s.value; })()")
    _ready(browser, device, f" && JSON.parse(document.body.dataset.request).constraints.max_power_w === {cap}")
    redraw = float(browser.evaluate("document.body.dataset.redrawMs"))
    _set(browser, "device", other, "change")
    _ready(browser, other)
    t0 = browser.evaluate("(() => { window.__switchAt = performance.now(); const e = document.getElementById('device'); "
                          f"e.value = {json.dumps(device)}; e.dispatchEvent(new Event('change')); return window.__switchAt; }})()")
    _ready(browser, device)
    switch = float(browser.evaluate("document.body.dataset.readyMs")) - float(t0)
    return {"paintMs": float(data["paintMs"]), "renderMs": float(data["renderMs"]),
            "parseMs": float(data["parseMs"]), "fetchMs": float(data["fetchMs"]), "redrawMs": redraw,
            "switchMs": switch, "modes": float(data["modes"])}


def measure(runs: int, screenshot: Path) -> tuple[dict[str, dict[str, list[float]]], dict]:
    devices = sorted(list_devices(), key=lambda d: len(d.modes()))
    timings: dict[str, dict[str, list[float]]] = {d.id: {k: [] for k in (*STAGES, "modes")} for d in devices}
    info: dict = {}
    with tempfile.TemporaryDirectory() as data_dir, LiveServer(data_dir, workers=1) as server, \
            Browser(width=1280, height=1000, offline=True) as browser:
        for device in devices:
            other = devices[0].id if device.id != devices[0].id else devices[1].id
            for run in range(runs):
                got = measure_device(browser, server.url, device.id, other, run)
                for key, value in got.items():
                    timings[device.id][key].append(value)
                print(f"{device.id:11s} run {run + 1}: " + ", ".join(f"{k[:-2]} {got[k]:.0f} ms" for k in STAGES),
                      flush=True)
        browser.navigate(f"{server.url}/?device=agx-xavier&workload={SCREENSHOT_WORKLOAD}")
        _ready(browser, "agx-xavier")
        _set(browser, "cap", "15", "input")
        _ready(browser, "agx-xavier", " && document.body.dataset.request.includes('\"max_power_w\":15')")
        info["best"] = browser.evaluate("document.getElementById('best').dataset.mode")
        browser.screenshot(screenshot)
        info["errors"] = [e for e in browser.errors() if "status of 503" not in e]
        info["chromium"] = browser.evaluate("navigator.userAgent").split("Chrome/")[-1].split(" ")[0]
    return timings, info


def report(timings: dict[str, dict[str, list[float]]], info: dict, runs: int,
           write: bool = False) -> tuple[str, bool]:
    """The Markdown report (its header names the command as run: ``write`` for ``--write``) and whether the
    bound holds."""
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip() or "?"
    # Its own outputs (the screenshot is taken before this report) do not make the tree another one.
    own = [f":!{SCREENSHOT.relative_to(ROOT)}", ":!bench/results/page_render.md"]
    if subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", *own], cwd=ROOT,
                      capture_output=True, text=True).stdout.strip():
        commit += " + uncommitted changes"
    rows = []
    for device, t in timings.items():
        med = {k: statistics.median(v) for k, v in t.items()}
        top = {k: max(v) for k, v in t.items()}
        per_k = (med["parseMs"] + med["renderMs"]) / (med["modes"] / 1000)
        rows.append(f"| {device} | {med['modes']:,.0f} | {med['parseMs']:.0f} | {med['renderMs']:.0f} | "
                    f"{med['paintMs']:.0f} ({top['paintMs']:.0f}) | {per_k:.1f} | {med['fetchMs']:.0f} | "
                    f"{med['redrawMs']:.1f} | {med['switchMs']:.0f} ({top['switchMs']:.0f}) |")
    by_size = sorted(timings.values(), key=lambda t: t["modes"][0])
    smallest, largest = by_size[0], by_size[-1]
    worst_paint = max(largest["paintMs"])
    cost = {id(t): statistics.median(t["parseMs"]) + statistics.median(t["renderMs"]) for t in by_size}
    b = growth_exponent((t["modes"][0], cost[id(t)]) for t in by_size)
    growth = ("?" if b is None else f"~ modes^{b:.2f}, " + (
        "about linearly" if 0.8 <= b <= 1.2 else
        "less than linearly (fixed costs weigh most on the small devices)" if b < 0.8 else "MORE than linearly"))
    holds = worst_paint < LIMIT_MS
    lines = [
        "# Mode-chooser page: drawing every mode of each Jetson type",
        "",
        f"`python bench/page_render.py --runs {runs}{' --write' if write else ''}` on {started}, commit {commit}, "
        f"{os.cpu_count()} CPU "
        f"cores, headless Chromium {info['chromium']} (system package, software rendering, network cut off but "
        "loopback), `jetpredict serve` with one worker. Workload: built-in simulated ResNet-18 on every device. "
        f"Median over {runs} loads per device (max in brackets); ms.",
        "",
        "| device | modes | columns to typed arrays | draw calls | paint all modes | parse+draw per 1,000 modes | fetch rows + "
        "predictions | redraw after a cap change | switch to it until chosen mode shown |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"Bound: drawing all 29,232 AGX Xavier modes < {LIMIT_MS:.0f} ms: {'holds' if holds else 'does NOT hold'} "
        f"(max paint {worst_paint:.0f} ms). Over the six devices, {smallest['modes'][0]:,.0f} to "
        f"{largest['modes'][0]:,.0f} modes, the page's own parse + draw grows {growth}. Most of the wait is the "
        "service fitting and predicting (`fetch`).",
        f"Best mode under 15 W (min-energy, published ResNet-18 rows) on the screenshot `docs/mode-chooser.png`: "
        f"`{info['best']}`.",
        f"Page errors: {info['errors'] or 'none'}.",
        "",
    ]
    return "\n".join(lines), holds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="loads per device (default 3)")
    parser.add_argument("--write", action="store_true",
                        help="write bench/results/page_render.md and docs/mode-chooser.png")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs: must be at least 1")
    if find_chromium() is None:
        print("no Chromium: apt-get install chromium", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        shot = SCREENSHOT if args.write else Path(tmp) / "mode-chooser.png"
        timings, info = measure(args.runs, shot)
        text, holds = report(timings, info, args.runs, write=args.write)
        print(text)
        if args.write:
            print(f"wrote {write_results('page_render', text)} and {SCREENSHOT}")
    return 0 if holds else 1


if __name__ == "__main__":
    sys.exit(main())
