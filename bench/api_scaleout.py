"""Scale-out: two ``jetpredict serve`` instances on one PostgreSQL database, clients on both (loopback).

1. Throughput: the same mixed load (half the clients upload one row per request, half predict 10 modes of
   a stored workload) against one instance, then split over two instances, at 4, 8 and 16 clients, in
   interleaved rounds; the median over the rounds of each cell's requests per second and p50 latency, and
   how they grow with the clients (``~ clients^b``, per instance count).
2. Durability: every upload answered 201 (by either instance, in any phase) is present, once, in the
   database.
3. Cache invalidation across instances: a workload is grown one profiled mode at a time, each upload
   through one instance and the prediction right after through the *other*; the prediction must count
   the new mode (the fitted-model cache is keyed by the workload revision read from the database).

Starts a throwaway PostgreSQL (``initdb``/``pg_ctl`` from the system packages) unless ``--database-url``
is given, and stops it (and removes its files) on every exit path. Prints the figures; only ``--write``
writes ``bench/results/api_scaleout.json`` and ``.md``. Exit status 0 when every check held.

    python bench/api_scaleout.py [--clients 4,8,16] [--rounds 3] [--duration-s 10] [--workers 2] [--write]
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import tempfile
import threading
from pathlib import Path

from results_io import exponent_text, growth_exponent, write_results

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tools.testing
KEY = "scaleout-key"


def _row_for(workload: str, i: int) -> dict:
    from tools.testing import published_rows

    rows = published_rows(as_id=workload, n=10)
    return rows[i % len(rows)]


def _summary(results: list[dict], duration_s: float) -> dict:
    requests = sum(r["requests"] for r in results)
    by_kind = {kind: [x for r in results for x in r["latencies_s"][kind]] for kind in ("upload", "predict")}
    latencies = sorted(x for v in by_kind.values() for x in v)
    return {"requests": requests, "requests_per_s": requests / duration_s,
            **{f"{kind}_p50_ms": 1e3 * statistics.median(v) if v else None for kind, v in by_kind.items()},
            **{f"{kind}_requests": len(v) for kind, v in by_kind.items()},
            "errors": [e for r in results for e in r["errors"]][:5],
            "error_count": sum(len(r["errors"]) for r in results),
            "p50_ms": 1e3 * statistics.median(latencies) if latencies else None,
            "p95_ms": 1e3 * latencies[int(0.95 * (len(latencies) - 1))] if latencies else None}


def _client_numbers(clients: int, instances: int) -> int:
    """How many client numbers a ``_load`` of ``clients`` over ``instances`` servers takes (an even count)."""
    per = clients // instances
    return (per + per % 2) * instances


def _load(urls: list[str], clients: int, duration_s: float, round_id: str, first_client: int = 0
          ) -> tuple[dict, dict[str, int]]:
    """``clients`` split evenly over ``urls``, all at once; (summary, answered rows per workload)."""
    from tools.testing import mixed_load

    per = clients // len(urls)
    stride = _client_numbers(clients, len(urls)) // len(urls)  # even: each server starts on an uploader
    results: list[dict] = [{} for _ in urls]

    def run(j: int) -> None:
        # Even first_client keeps each server's half-uploaders/half-predictors split; distinct numbers keep
        # the per-client workloads distinct across servers. All share one workload (refits race).
        results[j] = mixed_load(urls[j], KEY, _row_for, clients=per, duration_s=duration_s,
                                shared_id=f"shared-{round_id}", predict_id="target",
                                first_client=first_client + stride * j)

    threads = [threading.Thread(target=run, args=(j,)) for j in range(len(urls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    answered: dict[str, int] = {}
    for r in results:
        for workload, n in r["answered_rows"].items():
            answered[workload] = answered.get(workload, 0) + n
    return _summary(results, duration_s), answered


def _stored_rows(url: str) -> dict[str, int]:
    import requests

    listing = requests.get(url + "/v1/workloads?limit=1000", timeout=30).json()
    return {w["id"]: w["rows_stored"] for w in listing["workloads"]}


def _cross_instance(a: str, b: str, steps: int = 6) -> list[dict]:
    """Grow workload ``grown`` one mode per upload, alternating instances; predict on the other one."""
    import requests

    from tools.testing import published_rows

    rows = published_rows(as_id="grown", n=4 + steps)
    headers = {"X-API-Key": KEY}
    r = requests.post(a + "/v1/profiles", json={"rows": rows[:4]}, headers=headers, timeout=60)
    r.raise_for_status()
    body = {"workload": {"id": "grown"}, "modes": "presets"}
    # Both instances predict (and cache) the 4-mode model first, so a stale cache would show.
    for url in (a, b):
        assert requests.post(url + "/v1/predictions", json=body, timeout=60).json()["profiled_modes"] == 4
    checks = []
    for step in range(steps):
        writer, reader = (a, b) if step % 2 == 0 else (b, a)
        up = requests.post(writer + "/v1/profiles", json={"rows": [rows[4 + step]]}, headers=headers, timeout=60)
        up.raise_for_status()
        seen = requests.post(reader + "/v1/predictions", json=body, timeout=60).json()["profiled_modes"]
        checks.append({"upload_via": "A" if writer == a else "B", "predict_via": "A" if reader == a else "B",
                       "expected_modes": 5 + step, "predicted_modes": seen, "ok": seen == 5 + step})
    return checks


INSTANCES = {1: "one_instance", 2: "two_instances"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="4,8,16",
                        help="client threads in all, comma-separated (each a multiple of 4: half upload, half "
                             "predict on each of two instances)")
    parser.add_argument("--duration-s", type=float, default=10.0, help="s per load phase")
    parser.add_argument("--rounds", type=int, default=3, help="phases per cell, interleaved; figures are medians")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers per instance")
    parser.add_argument("--write", action="store_true", help="write bench/results/api_scaleout.md and .json")
    parser.add_argument("--database-url", default="", help="an empty PostgreSQL database (default: a "
                        "throwaway cluster)")
    args = parser.parse_args(argv)
    counts = sorted({int(c) for c in args.clients.split(",")})
    if any(c < 4 or c % 4 for c in counts):
        parser.error("--clients: each count must be a multiple of 4")
    # SIGTERM (a CI timeout, kill) unwinds like Ctrl-C, so the finally below stops what this run started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    import os

    import requests

    from tools.testing import LiveServer, TempPostgres, empty_postgresql, published_rows

    pg = None
    result: dict = {"clients": counts, "rounds": args.rounds, "duration_s": args.duration_s,
                    "workers_per_instance": args.workers, "cpu_count": os.cpu_count()}
    servers: list = []
    phases: list[dict] = []
    next_client = 0  # client numbers run on across phases (small: mixed_load keeps its row perturbation tiny)
    answered: dict[str, int] = {}
    try:
        if args.database_url:
            url = args.database_url
        else:
            pg = TempPostgres()
            pg.start()  # inside the try: a failure after initdb still stops the server and removes its files
            url = pg.create_database("scaleout")
        empty_postgresql(url)
        with tempfile.TemporaryDirectory() as tmp:
            servers = [LiveServer(Path(tmp) / name, api_keys=KEY, workers=args.workers, database_url=url)
                       for name in ("a", "b")]
            a, b = servers[0].start(), servers[1].start()
            r = requests.post(a.url + "/v1/profiles", json={"rows": published_rows(as_id="target")},
                              headers={"X-API-Key": KEY}, timeout=60)
            r.raise_for_status()
            # Rounds interleave the cells: one phase is noisy on shared cores, a drift hits every cell alike.
            for round_no in range(args.rounds):
                for clients in counts:
                    for instances, urls in ((1, [a.url]), (2, [a.url, b.url])):
                        # Distinct client numbers per phase: a reused one would upload identical rows (deduplicated).
                        summary, answered_phase = _load(urls, clients, args.duration_s,
                                                        f"{round_no}-{instances}x{clients}",
                                                        first_client=next_client)
                        next_client += _client_numbers(clients, len(urls))
                        phases.append({"round": round_no + 1, "clients": clients, "instances": instances, **summary})
                        for workload, n in answered_phase.items():
                            answered[workload] = answered.get(workload, 0) + n
                        print(f"round {round_no + 1}, {clients} clients, {instances} instance(s): "
                              f"{summary['requests_per_s']:.1f} requests/s, p50 {summary['p50_ms']:.1f} ms, "
                              f"errors {summary['error_count']}", flush=True)
            stored_a, stored_b = _stored_rows(a.url), _stored_rows(b.url)
            missing = {w: (n, stored_a.get(w, 0)) for w, n in answered.items() if stored_a.get(w, 0) != n}
            cross = _cross_instance(a.url, b.url)
    finally:
        for server in servers:
            server.stop()  # the instances first: they hold connections to the cluster
        if pg is not None:
            pg.stop()

    cells = []
    for clients in counts:
        for instances in INSTANCES:
            runs = [p for p in phases if p["clients"] == clients and p["instances"] == instances]
            rates = [p["requests_per_s"] for p in runs]
            cells.append({"clients": clients, "instances": instances, "requests_per_s": statistics.median(rates),
                          "requests_per_s_min": min(rates), "requests_per_s_max": max(rates),
                          "p50_ms": statistics.median(p["p50_ms"] for p in runs),
                          "p95_ms": statistics.median(p["p95_ms"] for p in runs),
                          **{f"{kind}_p50_ms": statistics.median(p[f"{kind}_p50_ms"] for p in runs)
                             for kind in ("upload", "predict")},
                          "error_count": sum(p["error_count"] for p in runs)})

    def cell(clients: int, instances: int) -> dict:
        return next(c for c in cells if c["clients"] == clients and c["instances"] == instances)

    growth = {name: {k: growth_exponent((c["clients"], c[k]) for c in cells if c["instances"] == n)
                     for k in ("requests_per_s", "p50_ms")} for n, name in INSTANCES.items()}
    ratios = {c: (cell(c, 2)["requests_per_s"] / cell(c, 1)["requests_per_s"]
                  if cell(c, 1)["requests_per_s"] else None) for c in counts}
    errors = sum(p["error_count"] for p in phases)
    result.update({
        "cells": cells, "phases": phases, "growth_exponents": growth, "throughput_ratio_by_clients": ratios,
        "answered_uploads_rows": sum(answered.values()), "workloads": len(answered),
        "answered_rows_missing_or_extra": missing, "instances_agree_on_listing": stored_a == stored_b,
        "cross_instance": cross, "cross_instance_ok": all(c["ok"] for c in cross), "errors": errors})
    ok = not missing and result["instances_agree_on_listing"] and result["cross_instance_ok"] and errors == 0
    result["ok"] = ok

    from jetpredict.api.config import load_settings

    threads = load_settings({}).THREADS  # what LiveServer's ``jetpredict serve`` runs per worker
    result["threads_per_worker"] = threads

    lines = [
        "# Scale-out on one PostgreSQL (`bench/api_scaleout.py`)", "",
        f"Client threads on loopback (half upload one row per request, half predict 10 modes) against one "
        f"instance, then split over two, {args.duration_s:g} s per phase, {args.workers} gunicorn workers per "
        f"instance, {result['cpu_count']} CPU cores shared by clients, servers and PostgreSQL. Each cell is the "
        f"median of {args.rounds} interleaved rounds (requests/s: median, then the rounds' range).", "",
        "| clients | one: requests/s | one: p50 ms | one: p95 ms | two: requests/s | two: p50 ms | two: p95 ms "
        "| two/one | errors |", "|---|---|---|---|---|---|---|---|---|"]
    for c in counts:
        one, two = cell(c, 1), cell(c, 2)
        lines.append(f"| {c} | {one['requests_per_s']:.0f} ({one['requests_per_s_min']:.0f}-"
                     f"{one['requests_per_s_max']:.0f}) | {one['p50_ms']:.1f} | {one['p95_ms']:.1f} | "
                     f"{two['requests_per_s']:.0f} ({two['requests_per_s_min']:.0f}-{two['requests_per_s_max']:.0f}) "
                     f"| {two['p50_ms']:.1f} | {two['p95_ms']:.1f} | "
                     f"{exponent_text(ratios[c])}x | {one['error_count'] + two['error_count']} |")
    lines += ["", "Median latency by request kind (ms; an upload refits its workload before it answers, so it "
              "holds a request thread for the fit):", "",
              "| clients | one: upload p50 | one: predict p50 | two: upload p50 | two: predict p50 |",
              "|---|---|---|---|---|"]
    for c in counts:
        one, two = cell(c, 1), cell(c, 2)
        lines.append(f"| {c} | {one['upload_p50_ms']:.0f} | {one['predict_p50_ms']:.1f} | "
                     f"{two['upload_p50_ms']:.0f} | {two['predict_p50_ms']:.1f} |")
    lines += [
        "", f"Growth with the clients ({', '.join(map(str, counts))}): one instance throughput ~ clients^"
        f"{exponent_text(growth['one_instance']['requests_per_s'])}, p50 ~ clients^{exponent_text(growth['one_instance']['p50_ms'])}; "
        f"two instances throughput ~ clients^{exponent_text(growth['two_instances']['requests_per_s'])}, p50 ~ clients^"
        f"{exponent_text(growth['two_instances']['p50_ms'])}. The two instances add no cores (clients, servers and "
        f"PostgreSQL share {result['cpu_count']}); they add request slots: one instance serves at most "
        f"{args.workers * threads} requests at once ({args.workers} workers x {threads} threads), two serve "
        f"{2 * args.workers * threads}; once uploads (each holding a thread for its refit) fill one instance's "
        "slots, its predictions wait for a thread (latency by kind above).", "",
        f"Answered uploads: {result['answered_uploads_rows']} rows over {result['workloads']} workloads in all "
        f"{len(phases)} phases; missing or duplicated: **{len(missing)}**; both instances list the same rows: "
        f"{result['instances_agree_on_listing']}; errors: **{errors}**.", "",
        "Cross-instance cache invalidation (upload through one, predict through the other; profiled modes "
        "expected/seen): " + ", ".join(f"{c['upload_via']}->{c['predict_via']} {c['expected_modes']}/"
                                      f"{c['predicted_modes']}" for c in cross)
        + f"; all reflected: **{result['cross_instance_ok']}**.", ""]
    text = "\n".join(lines)
    print(text)
    if args.write:
        write_results("api_scaleout", text, result)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
