"""Concurrency check of the HTTP service: 8 clients upload and predict for 30 s against a live server.

Half the clients upload one profile row per request (their own workload and one shared by all, so refits
race); the others predict 10 modes of a stored workload. Afterwards every row answered 201 must be stored
exactly once, every stored upload complete, and no request may have failed. Only ``--write`` writes ``bench/results/api_concurrency.json`` and ``.md``.

    python bench/api_concurrency.py [--clients 8] [--seconds 30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from results_io import write_results

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "api")]  # tools.testing, the API fixtures
KEY = "load-key"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--write", action="store_true", help="write the figures to bench/results/")
    args = parser.parse_args(argv)

    import requests
    import sqlalchemy as sa
    from api_fixtures import published_rows
    from jetpredict.api.config import load_settings
    from jetpredict.api.storage import Storage, profile_rows, uploads, workloads

    from tools.testing import LiveServer, mixed_load

    def row(workload: str, i: int) -> dict:
        rows = published_rows(as_id=workload, n=10)
        return rows[i % len(rows)]

    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        with LiveServer(data_dir, api_keys=KEY) as server:
            r = requests.post(server.url + "/v1/profiles", json={"rows": published_rows(as_id="target")},
                              headers={"X-API-Key": KEY}, timeout=60)
            r.raise_for_status()
            load = mixed_load(server.url, KEY, row, clients=args.clients, duration_s=args.seconds,
                              predict_id="target")
        storage = Storage(load_settings({"DATA_DIR": data_dir}).database_url)
        with storage.engine.connect() as conn:
            stored = dict(conn.execute(sa.select(workloads.c.id, workloads.c.rows_stored)).all())
            counted = dict(conn.execute(sa.select(profile_rows.c.workload_id, sa.func.count())
                                        .group_by(profile_rows.c.workload_id)).all())
            per_upload = dict(conn.execute(sa.select(uploads.c.workload_id, sa.func.sum(uploads.c.rows))
                                           .group_by(uploads.c.workload_id)).all())
        storage.dispose()

    lost = {w: (n, stored.get(w, 0)) for w, n in load["answered_rows"].items() if stored.get(w, 0) != n}
    inconsistent = [w for w in stored if not (stored[w] == counted.get(w, 0) == per_upload.get(w, 0))]
    lat = sorted(load["latencies_s"])
    result = {
        "clients": args.clients, "seconds": args.seconds, "requests": load["requests"],
        "errors": len(load["errors"]), "first_errors": load["errors"][:5],
        "rows_answered": sum(load["answered_rows"].values()), "rows_lost_or_extra": lost,
        "inconsistent_workloads": inconsistent,
        "p50_ms": 1000 * lat[len(lat) // 2] if lat else None,
        "p99_ms": 1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else None,
        "mean_ms": 1000 * statistics.fmean(lat) if lat else None,
    }
    ok = not result["errors"] and not lost and not inconsistent
    text = "\n".join([
        "# API concurrency check (`bench/api_concurrency.py`)", "",
        f"{args.clients} clients for {args.seconds:g} s (half upload one row per request, half predict 10 "
        f"modes) against gunicorn with 2 workers: **{result['requests']} requests, {result['errors']} errors**, "
        f"{result['rows_answered']} rows answered 201, lost or duplicated: {len(lost)} workload(s), "
        f"inconsistent workloads: {len(inconsistent)}; latency p50 {result['p50_ms']:.1f} ms, "
        f"p99 {result['p99_ms']:.1f} ms. {'PASS' if ok else 'FAIL'}", ""])
    print(text)
    if args.write:
        write_results("api_concurrency", text, result)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
