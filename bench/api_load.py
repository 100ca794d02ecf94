"""Load benchmark of the HTTP service: ``POST /v1/predictions`` (a stored workload, its presets or 10 listed
modes) vs a bare Flask endpoint returning a constant JSON, both under the same gunicorn setup (2 workers,
gthread).

The servers run in their own processes; the clients run in a second process (threads with keep-alive
connections on loopback), bounded by a request count and a time limit per scenario. Each client count of
``--clients`` is one scenario pair, so the figures show how latency and throughput grow with the clients
(``~ clients^b``). Prints the figures; only ``--write`` writes ``bench/results/api_load.json`` and ``.md``.

    python bench/api_load.py [--clients 1,2,4,8] [--seconds 8] [--single-requests 400] [--write]

Targets: p50 < 10 ms at one client (issue 6); presets throughput >= 60 % of the bare endpoint at 8
clients (issue 19).
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing as mp
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from results_io import exponent_text, growth_exponent, write_results

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tools.testing
KEY = "bench-key"
MODES = [{"mode": f"m{i}", "cpu_cores": c, "cpu_mhz": 1190.4, "gpu_mhz": g, "emc_mhz": 1600.0}
         for i, (c, g) in enumerate((c, g) for c in (2, 8) for g in (318.75, 522.75, 675.75, 905.25, 1377.0))]
#: What each prediction request asks for: the device's presets (issue 19), or the 10 listed modes.
BODIES = {"presets": json.dumps({"workload": {"id": "bench-resnet"}, "modes": "presets"}).encode(),
          "modes": json.dumps({"workload": {"id": "bench-resnet"}, "modes": MODES}).encode()}
THROUGHPUT_RATIO_TARGET = 0.60
#: Target median latency (ms) of one client's prediction requests.
P50_TARGET_MS = 10.0


def bare_app():
    """A Flask app whose one route returns a constant JSON: the floor of Flask + gunicorn + loopback."""
    from flask import Flask

    app = Flask("bare")

    @app.post("/bare")
    def bare():
        return {"ok": True}

    @app.get("/healthz")
    def healthz():
        return {"status": "ok"}

    return app


def serve_bare(port: int, workers: int) -> None:
    """Run :func:`bare_app` under exactly the gunicorn setup of ``jetpredict serve``."""
    from jetpredict.api.config import load_settings
    from jetpredict.api.serve_cli import run_gunicorn

    run_gunicorn(load_settings({"PORT": port, "WORKERS": workers}), load=bare_app)


def _drive(port: int, path: str, body: bytes, clients: int, max_requests: int, seconds: float) -> dict:
    """``clients`` threads, each with one keep-alive connection, until ``max_requests`` or ``seconds``."""
    lock = threading.Lock()
    latencies: list[float] = []
    errors: list[str] = []
    issued = [0]
    start = time.perf_counter()
    stop_at = start + seconds

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        while time.perf_counter() < stop_at:
            with lock:
                if issued[0] >= max_requests:
                    break
                issued[0] += 1
            t0 = time.perf_counter()
            conn.request("POST", path, body=body, headers=headers)
            response = conn.getresponse()
            payload = response.read()
            elapsed = time.perf_counter() - t0
            with lock:
                latencies.append(elapsed)
                if response.status != 200:
                    errors.append(f"{response.status}: {payload[:200]!r}")
        conn.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    ordered = sorted(latencies)

    def pct(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else float("nan")

    return {"path": path, "clients": clients, "requests": len(latencies), "errors": len(errors),
            "_latencies": latencies,
            "first_errors": errors[:3], "wall_s": wall, "requests_per_s": len(latencies) / wall,
            "p50_ms": pct(0.50), "p90_ms": pct(0.90), "p99_ms": pct(0.99),
            "mean_ms": statistics.fmean(ordered) * 1000 if ordered else float("nan")}


def _merge(parts: list[dict]) -> dict:
    """One scenario measured in several interleaved rounds, as if it were one run."""
    merged = {k: parts[0][k] for k in ("path", "clients")}
    merged["requests"] = sum(p["requests"] for p in parts)
    merged["errors"] = sum(p["errors"] for p in parts)
    merged["first_errors"] = [e for p in parts for e in p["first_errors"]][:3]
    merged["wall_s"] = sum(p["wall_s"] for p in parts)
    merged["requests_per_s"] = merged["requests"] / merged["wall_s"]
    lat = sorted(x for p in parts for x in p["_latencies"])
    for name, q in (("p50_ms", 0.5), ("p90_ms", 0.9), ("p99_ms", 0.99)):
        merged[name] = lat[min(len(lat) - 1, int(q * len(lat)))] * 1000
    merged["mean_ms"] = statistics.fmean(lat) * 1000
    merged["rounds"] = len(parts)
    return merged


def _client_process(queue, warm: list[tuple], pairs: list[tuple[tuple, tuple]], rounds: int) -> None:
    for job in warm:
        _drive(*job)
    results = []
    for a, b in pairs:
        # Alternate short rounds of the two endpoints, so background load on a shared machine hits both.
        parts_a, parts_b = [], []
        for _ in range(rounds):
            parts_a.append(_drive(*a[:4], max(1, a[4] // rounds), a[5] / rounds))
            parts_b.append(_drive(*b[:4], max(1, b[4] // rounds), b[5] / rounds))
        results += [_merge(parts_a), _merge(parts_b)]
    queue.put(results)


def run(clients: list[int], seconds: float, single_requests: int, workers: int, rounds: int,
        body: str = "presets") -> dict:
    import requests

    from tools.testing import LiveServer, free_port, published_rows

    prediction_body = BODIES[body]
    with tempfile.TemporaryDirectory() as tmp, LiveServer(tmp, api_keys=KEY, workers=workers) as server:
        r = requests.post(server.url + "/v1/profiles", json={"rows": published_rows(as_id="bench-resnet")},
                          headers={"X-API-Key": KEY}, timeout=60)
        r.raise_for_status()
        bare_port = free_port()
        bare = subprocess.Popen([sys.executable, __file__, "--serve-bare", str(bare_port), "--workers", str(workers)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    if requests.get(f"http://127.0.0.1:{bare_port}/healthz", timeout=1).ok:
                        break
                except requests.RequestException:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            # Warm both (fitted-model cache in every worker, connection setup) outside the measurement.
            warm = [(server.port, "/v1/predictions", prediction_body, 4, 200, 10.0),
                    (bare_port, "/bare", b"{}", 4, 200, 10.0)]
            # One client is bounded by requests (its latency), more by time (their throughput).
            pairs = [((server.port, "/v1/predictions", prediction_body, n, single_requests if n == 1 else 1_000_000,
                       seconds),
                      (bare_port, "/bare", b"{}", n, single_requests if n == 1 else 1_000_000, seconds))
                     for n in clients]
            ctx = mp.get_context("spawn")
            queue = ctx.Queue()
            proc = ctx.Process(target=_client_process, args=(queue, warm, pairs, rounds))
            proc.start()
            results = queue.get(timeout=600)
            proc.join(timeout=30)
        finally:
            os.killpg(bare.pid, 2)
            bare.wait(timeout=30)
    by_clients = [{"clients": n, "prediction": _public(a), "bare": _public(b),
                   "throughput_ratio": a["requests_per_s"] / b["requests_per_s"]}
                  for n, a, b in zip(clients, results[0::2], results[1::2], strict=True)]
    single, multi = by_clients[0], by_clients[-1]
    growth = {f"{name}_{stat}": growth_exponent((c["clients"], c[name][stat]) for c in by_clients)
              for name in ("prediction", "bare") for stat in ("p50_ms", "requests_per_s")}
    return {
        "host": {"python": platform.python_version(), "cpus": os.cpu_count(), "machine": platform.machine(),
                 "load_avg_1m": os.getloadavg()[0]},
        "server": {"gunicorn_workers": workers, "worker_class": "gthread", "threads": 4},
        "rounds": rounds, "seconds_per_scenario": seconds,
        "by_clients": by_clients, "growth_exponents": growth,
        "prediction_one_client": single["prediction"], "bare_one_client": single["bare"],
        "prediction_many_clients": multi["prediction"], "bare_many_clients": multi["bare"],
        "throughput_ratio": multi["throughput_ratio"],
        "body": body,
        "targets": {"p50_ms_one_client_lt": P50_TARGET_MS, "throughput_ratio_ge": THROUGHPUT_RATIO_TARGET},
    }


def _public(r: dict) -> dict:
    return {k: v for k, v in r.items() if not k.startswith("_")}


def _markdown(res: dict) -> str:
    rows = [(f"{name}, {c['clients']} client{'s' if c['clients'] > 1 else ''}", c[key])
            for c in res["by_clients"] for name, key in (("predictions", "prediction"), ("bare", "bare"))]
    lines = ["# API load benchmark (`bench/api_load.py`)", "",
             f"POST /v1/predictions (stored workload, {'its presets' if res['body'] == 'presets' else '10 listed modes'}) "
             "vs a bare Flask endpoint; gunicorn "
             f"{res['server']['gunicorn_workers']} workers (gthread x {res['server']['threads']}); "
             f"{res['rounds']} interleaved rounds per pair, {res['seconds_per_scenario']:g} s per scenario; "
             f"{res['host']['cpus']} CPUs, load average {res['host']['load_avg_1m']:.1f} at the end.", "",
             "| scenario | requests | errors | p50 ms | p99 ms | requests/s |", "|---|---|---|---|---|---|"]
    for name, r in rows:
        lines.append(f"| {name} | {r['requests']} | {r['errors']} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | "
                     f"{r['requests_per_s']:.0f} |")
    g = res["growth_exponents"]
    lines += ["", f"Growth with the clients ({', '.join(str(c['clients']) for c in res['by_clients'])}): p50 latency "
              f"~ clients^{exponent_text(g['prediction_p50_ms'])} (bare {exponent_text(g['bare_p50_ms'])}), "
              f"throughput ~ clients^{exponent_text(g['prediction_requests_per_s'])} "
              f"(bare {exponent_text(g['bare_requests_per_s'])}); "
              "on 2 cores the server's and the clients' processes share them.",
              "", f"Throughput ratio predictions / bare at {res['prediction_many_clients']['clients']} clients: "
              f"**{res['throughput_ratio']:.0%}** (target >= "
              f"{THROUGHPUT_RATIO_TARGET:.0%}); "
              f"p50 at one client: **{res['prediction_one_client']['p50_ms']:.2f} ms** "
              f"(target < {P50_TARGET_MS:g} ms).",
              "", "Presets are predicted once per fitted model and kept (`predictor/service.py`); listed "
              "catalogue modes are read from the fitted model's all-modes prediction (`predictor/space.py`); "
              "off-step modes (e.g. nvpmodel caps) are predicted per request.", ""]
    return "\n".join(lines)


def met_targets(res: dict) -> bool:
    """Whether one client's p50 is under ``P50_TARGET_MS``, the throughput ratio reaches
    ``THROUGHPUT_RATIO_TARGET`` and no prediction request failed."""
    return (res["prediction_one_client"]["p50_ms"] < P50_TARGET_MS
            and res["throughput_ratio"] >= THROUGHPUT_RATIO_TARGET
            and not any(res[k]["errors"] for k in ("prediction_one_client", "prediction_many_clients")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="1,2,4,8",
                        help="client counts, comma-separated (1 is always run; the largest is the throughput target's)")
    parser.add_argument("--seconds", type=float, default=8.0, help="time limit per scenario")
    parser.add_argument("--single-requests", type=int, default=400, help="request limit at one client")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=8, help="interleaved rounds per scenario pair")
    parser.add_argument("--body", choices=sorted(BODIES), default="presets", help="what to predict")
    parser.add_argument("--write", action="store_true", help="write bench/results/api_load.md and .json")
    parser.add_argument("--serve-bare", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_bare:
        serve_bare(args.serve_bare, args.workers)
        return 0
    clients = sorted({1, *(int(c) for c in args.clients.split(","))})  # one client: the latency target's
    res = run(clients, args.seconds, args.single_requests, args.workers, args.rounds, args.body)
    text = _markdown(res)
    print(text)
    if args.write:
        write_results("api_load", text, res)
    return 0 if met_targets(res) else 1


if __name__ == "__main__":
    sys.exit(main())
