"""Scale-out: two ``jetpredict serve`` instances on one PostgreSQL database, clients on both (loopback).

1. Throughput: the same mixed load (half the clients upload one row per request, half predict 10 modes of
   a stored workload) against one instance, then split over two instances; requests per second of each.
2. Durability: every upload answered 201 (by either instance) is present, once, in the database.
3. Cache invalidation across instances: a workload is grown one profiled mode at a time, each upload
   through one instance and the prediction right after through the *other*; the prediction must count
   the new mode (the fitted-model cache is keyed by the workload revision read from the database).

Starts a throwaway PostgreSQL (``initdb``/``pg_ctl`` from the system packages) unless ``--database-url``
is given, and stops it (and removes its files) on every exit path. Prints the figures; only ``--write``
writes ``bench/results/api_scaleout.json`` and ``.md``. Exit status 0 when every check held.

    python bench/api_scaleout.py [--clients 8] [--duration-s 15] [--workers 2] [--write]
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import tempfile
import threading
from pathlib import Path

from results_io import write_results

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "api")]  # tools.testing, the API fixtures
KEY = "scaleout-key"


def _row_for(workload: str, i: int) -> dict:
    from api_fixtures import published_rows

    rows = published_rows(as_id=workload, n=10)
    return rows[i % len(rows)]


def _summary(results: list[dict], duration_s: float) -> dict:
    requests = sum(r["requests"] for r in results)
    latencies = sorted(x for r in results for x in r["latencies_s"])
    return {"requests": requests, "requests_per_s": requests / duration_s,
            "errors": [e for r in results for e in r["errors"]][:5],
            "error_count": sum(len(r["errors"]) for r in results),
            "p50_ms": 1e3 * statistics.median(latencies) if latencies else None,
            "p95_ms": 1e3 * latencies[int(0.95 * (len(latencies) - 1))] if latencies else None}


def _load(urls: list[str], clients: int, duration_s: float, round_id: str, first_client: int = 0
          ) -> tuple[dict, dict[str, int]]:
    """``clients`` split evenly over ``urls``, all at once; (summary, answered rows per workload)."""
    from tools.testing import mixed_load

    per = clients // len(urls)
    results: list[dict] = [{} for _ in urls]

    def run(j: int) -> None:
        # Even first_client keeps each server's half-uploaders/half-predictors split; distinct numbers keep
        # the per-client workloads distinct across servers. All share one workload (refits race).
        results[j] = mixed_load(urls[j], KEY, _row_for, clients=per, duration_s=duration_s,
                                shared_id=f"shared-{round_id}", predict_id="target",
                                first_client=first_client + 100 * j)

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
    from api_fixtures import published_rows

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8, help="client threads in all (even)")
    parser.add_argument("--duration-s", type=float, default=15.0, help="s per load phase")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers per instance")
    parser.add_argument("--write", action="store_true", help="write bench/results/api_scaleout.md and .json")
    parser.add_argument("--database-url", default="", help="an empty PostgreSQL database (default: a "
                        "throwaway cluster)")
    args = parser.parse_args(argv)
    # SIGTERM (a CI timeout, kill) unwinds like Ctrl-C, so the finally below stops what this run started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    import os

    import requests
    from api_fixtures import published_rows

    from tools.testing import LiveServer, TempPostgres, empty_postgresql

    pg = None
    result: dict = {"clients": args.clients, "duration_s": args.duration_s, "workers_per_instance": args.workers,
                    "cpu_count": os.cpu_count()}
    servers: list = []
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
            a = servers[0].start()
            r = requests.post(a.url + "/v1/profiles", json={"rows": published_rows(as_id="target")},
                              headers={"X-API-Key": KEY}, timeout=60)
            r.raise_for_status()
            one, answered_one = _load([a.url], args.clients, args.duration_s, "one")
            b = servers[1].start()
            two, answered_two = _load([a.url, b.url], args.clients, args.duration_s, "two", first_client=200)
            stored_a, stored_b = _stored_rows(a.url), _stored_rows(b.url)
            answered = dict(answered_one)
            for workload, n in answered_two.items():
                answered[workload] = answered.get(workload, 0) + n
            missing = {w: (n, stored_a.get(w, 0)) for w, n in answered.items() if stored_a.get(w, 0) != n}
            cross = _cross_instance(a.url, b.url)
    finally:
        for server in servers:
            server.stop()  # the instances first: they hold connections to the cluster
        if pg is not None:
            pg.stop()

    result.update({
        "one_instance": one, "two_instances": two,
        "throughput_ratio": two["requests_per_s"] / one["requests_per_s"] if one["requests_per_s"] else None,
        "answered_uploads_rows": sum(answered.values()), "workloads": len(answered),
        "answered_rows_missing_or_extra": missing, "instances_agree_on_listing": stored_a == stored_b,
        "cross_instance": cross, "cross_instance_ok": all(c["ok"] for c in cross)})
    ok = (not missing and result["instances_agree_on_listing"] and result["cross_instance_ok"]
          and one["error_count"] == 0 and two["error_count"] == 0)
    result["ok"] = ok
    text = "\n".join([
        "# Scale-out on one PostgreSQL (`bench/api_scaleout.py`)", "",
        f"{args.clients} client threads on loopback (half upload one row per request, half predict 10 modes), "
        f"{args.duration_s:g} s per phase, {args.workers} gunicorn workers per instance, "
        f"{result['cpu_count']} CPU cores shared by clients, servers and PostgreSQL.", "",
        "| | requests/s | p50 ms | p95 ms | errors |", "|---|---|---|---|---|",
        f"| one instance | {one['requests_per_s']:.1f} | {one['p50_ms']:.1f} | {one['p95_ms']:.1f} | "
        f"{one['error_count']} |",
        f"| two instances | {two['requests_per_s']:.1f} | {two['p50_ms']:.1f} | {two['p95_ms']:.1f} | "
        f"{two['error_count']} |", "",
        f"Throughput two/one: **{result['throughput_ratio']:.2f}x** (the machine's cores, not the service, "
        "bound it when clients and servers share them).", "",
        f"Answered uploads: {result['answered_uploads_rows']} rows over {result['workloads']} workloads; "
        f"missing or duplicated: **{len(missing)}**; both instances list the same rows: "
        f"{result['instances_agree_on_listing']}.", "",
        "Cross-instance cache invalidation (upload through one, predict through the other; profiled modes "
        "expected/seen): " + ", ".join(f"{c['upload_via']}->{c['predict_via']} {c['expected_modes']}/"
                                      f"{c['predicted_modes']}" for c in cross)
        + f"; all reflected: **{result['cross_instance_ok']}**.", ""])
    print(text)
    if args.write:
        write_results("api_scaleout", text, result)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
