"""Answers for every mode of a device: server time and bytes on the wire per answer form, by mode count.

For each Jetson type (1,280 to 29,232 modes), ``POST /v1/predictions`` with ``"modes": "all"`` for a stored
workload (the published AGX Xavier ResNet-18 rows; cross-device on the others) in each form: JSON rows
(the default), JSON columns (``layout: "columns"``), CSV and Arrow, with ``Accept-Encoding: gzip``. The
requests go through the WSGI app in this process (server time only, no network), measured three ways:

- ``model ms``: the first request for the device (its every-mode prediction computed, then encoded);
- ``answer ms``: a request in that form once the prediction is kept, at the same confidence with the
  answer cache emptied before it (encoding only: the kept prediction is keyed by the confidence, so
  another confidence would predict every mode again);
- ``cached ms``: the same request again (served from the answer cache).

Prints a table and how the uncached answer time grows with the number of modes (exponent b of
``ms ~ modes^b``); ``--write`` writes ``bench/results/api_compact.md`` and ``.json``.

    python bench/api_compact.py [--repeats 3] [--write]

Targets (issue 19): every AGX Xavier mode, warm: <= 100 ms server time and <= 2 MB on the wire in the
compact forms (columns, CSV, Arrow).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from results_io import growth_exponent, write_results

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the package from this checkout, tools.testing
KEY = "compact-key"
ARROW = "application/vnd.apache.arrow.stream"
#: form -> (extra body fields, Accept)
FORMS = {"rows": ({}, "application/json"), "columns": ({"layout": "columns"}, "application/json"),
         "csv": ({}, "text/csv"), "arrow": ({}, ARROW)}
COMPACT = ("columns", "csv", "arrow")
TARGET_MS, TARGET_BYTES = 100.0, 2 * 1024 * 1024
#: One confidence for every request: the kept every-mode prediction is per (model, device, confidence).
CONFIDENCE = 0.8


def _post(client, body: dict, accept: str) -> tuple[float, int, int]:
    t0 = time.perf_counter()
    r = client.post("/v1/predictions", json=body, headers={"Accept": accept, "Accept-Encoding": "gzip"})
    return (time.perf_counter() - t0) * 1000, r.status_code, len(r.data)


def _forget_answers(app) -> None:
    """Empty the app's answer cache (memory and its directory); the fitted models and their kept
    every-mode predictions stay, so the next request only encodes."""
    from jetpredict.api.heavy import AnswerCache

    services = app.extensions["jetpredict"]
    old = services.answers
    if old.directory is not None:
        shutil.rmtree(old.directory, ignore_errors=True)
    services.answers = AnswerCache(old.max_bytes, old.directory, old.disk_bytes)


def run(repeats: int) -> dict:
    from jetpredict.api.answers import arrow_available
    from jetpredict.api.app import create_app
    from jetpredict.models.catalogue import device_ids, load_device

    from tools.testing import published_rows

    forms = {k: v for k, v in FORMS.items() if k != "arrow" or arrow_available()}
    devices = sorted(device_ids(), key=lambda d: len(load_device(d).modes()))
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        app = create_app({"DATA_DIR": tmp, "API_KEYS": KEY, "RATE_LIMIT": "off", "RATE_LIMIT_ALL_MODES": "off",
                          "ACCESS_LOG": "off"})
        client = app.test_client()
        r = client.post("/v1/profiles", json={"rows": published_rows(as_id="compact", n=10)},
                        headers={"X-API-Key": KEY})
        assert r.status_code == 201, r.get_json()
        for device in devices:
            modes = len(load_device(device).modes())
            model_ms = None
            for form, (extra, accept) in forms.items():
                answer, cached, size = [], [], 0
                # The device's first request computes the prediction (model ms); one more request then
                # gives that form its ``repeats`` answer timings too (else --repeats 1 leaves it none).
                first = model_ms is None
                body = {"workload": {"id": "compact"}, "device": device, "modes": "all",
                        "confidence": CONFIDENCE, **extra}
                for i in range(repeats + first):
                    _forget_answers(app)  # the prediction stays kept: only the encode is timed after the first
                    ms, status, size = _post(client, body, accept)
                    assert status == 200, (device, form, status)
                    if first and i == 0:
                        model_ms = ms
                    else:
                        answer.append(ms)
                    cached.append(_post(client, body, accept)[0])
                results.append({"device": device, "modes": modes, "form": form, "bytes": size,
                                "answer_ms": statistics.median(answer) if answer else None,
                                "cached_ms": statistics.median(cached), "model_ms": model_ms})
    return {"host": {"python": platform.python_version(), "cpus": os.cpu_count(), "machine": platform.machine(),
                     "load_avg_1m": os.getloadavg()[0]},
            "repeats": repeats, "results": results,
            "targets": {"server_ms_le": TARGET_MS, "wire_bytes_le": TARGET_BYTES}}


def _ms(ms: float | None, digits: int) -> str:
    """A time in ms to ``digits`` decimals, or "-" where none was measured."""
    return "-" if ms is None else f"{ms:.{digits}f}"


def _meets_targets(r: dict) -> bool:
    """A result within the targets: bytes, the first encode (answer ms, when measured) and the cached answer."""
    return (r["bytes"] <= TARGET_BYTES and r["cached_ms"] <= TARGET_MS
            and (r["answer_ms"] is None or r["answer_ms"] <= TARGET_MS))


def _markdown(res: dict) -> str:
    lines = ["# Every mode, compact (`bench/api_compact.py`)", "",
             "`POST /v1/predictions` with `\"modes\": \"all\"` and `Accept-Encoding: gzip`, through the WSGI app "
             "(server time, no network); median of "
             f"{res['repeats']} requests; {res['host']['cpus']} CPUs, load average "
             f"{res['host']['load_avg_1m']:.1f} at the end. `answer ms`: the form encoded from the kept "
             "prediction (same confidence, answer cache emptied first); `cached ms`: the same request again; `model ms`: the device's first request.", "",
             "| device | modes | form | bytes on the wire | answer ms | cached ms | model ms |",
             "|---|---|---|---|---|---|---|"]
    for r in res["results"]:
        lines.append(f"| {r['device']} | {r['modes']} | {r['form']} | {r['bytes']:,} | {_ms(r['answer_ms'], 1)} | "
                     f"{r['cached_ms']:.2f} | {r['model_ms']:.0f} |")
    lines.append("")
    forms = dict.fromkeys(r["form"] for r in res["results"])
    for form in forms:
        slope = growth_exponent((r["modes"], r["answer_ms"]) for r in res["results"]
                                if r["form"] == form and r["answer_ms"] is not None)
        lines.append(f"- {form}: answer time ~ modes^{slope:.2f}" if slope is not None else f"- {form}: -")
    big = max(r["modes"] for r in res["results"])
    top = [r for r in res["results"] if r["modes"] == big and r["form"] in COMPACT]
    lines += ["", f"Largest device ({big} modes), compact forms: "
              + "; ".join(f"{r['form']} {r['bytes'] / 1e6:.2f} MB, {_ms(r['answer_ms'], 0)} ms uncached, "
                          f"{r['cached_ms']:.1f} ms cached" for r in top)
              + f" (targets <= {TARGET_MS:g} ms, <= {TARGET_BYTES / 2**20:.0f} MiB).", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="requests per device and form")
    parser.add_argument("--write", action="store_true", help="write bench/results/api_compact.md and .json")
    args = parser.parse_args(argv)
    res = run(args.repeats)
    text = _markdown(res)
    print(text)
    if args.write:
        write_results("api_compact", text, res)
    big = max(r["modes"] for r in res["results"])
    ok = all(_meets_targets(r) for r in res["results"] if r["modes"] == big and r["form"] in COMPACT)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
