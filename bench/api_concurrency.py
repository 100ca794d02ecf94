"""Concurrency check of the HTTP service: 2, 4 and 8 clients upload and predict against a live server.

Half the clients upload one profile row per request (their own workload and one shared by all, so refits
race); the others predict 10 modes of a stored workload. Afterwards every row answered 201 must be stored
exactly once, every stored upload complete, and no request may have failed. Each client count runs on a
fresh server, so the figures show how latency and throughput grow with the clients (``~ clients^b``).
Only ``--write`` writes ``bench/results/api_concurrency.json`` and ``.md``.

    python bench/api_concurrency.py [--clients 2,4,8] [--seconds 10]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from results_io import exponent_text, growth_exponent, write_results

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tools.testing
KEY = "load-key"


def run_once(clients: int, seconds: float) -> dict:
    """One mixed load of ``clients`` for ``seconds`` on a fresh server, and what the database holds after."""
    import requests
    import sqlalchemy as sa
    from jetpredict.api.config import load_settings
    from jetpredict.api.storage import Storage, profile_rows, uploads, workloads

    from tools.testing import LiveServer, mixed_load, published_rows

    def row(workload: str, i: int) -> dict:
        rows = published_rows(as_id=workload, n=10)
        return rows[i % len(rows)]

    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        with LiveServer(data_dir, api_keys=KEY) as server:
            r = requests.post(server.url + "/v1/profiles", json={"rows": published_rows(as_id="target")},
                              headers={"X-API-Key": KEY}, timeout=60)
            r.raise_for_status()
            load = mixed_load(server.url, KEY, row, clients=clients, duration_s=seconds, predict_id="target")
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
    lat = sorted(x for kind in load["latencies_s"].values() for x in kind)
    result = {
        "clients": clients, "seconds": seconds, "requests": load["requests"],
        "requests_per_s": load["requests"] / seconds,
        "errors": len(load["errors"]), "first_errors": load["errors"][:5],
        "rows_answered": sum(load["answered_rows"].values()), "rows_lost_or_extra": lost,
        "inconsistent_workloads": inconsistent,
        "p50_ms": 1000 * lat[len(lat) // 2] if lat else None,
        "p99_ms": 1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else None,
        "mean_ms": 1000 * statistics.fmean(lat) if lat else None,
    }
    result["passed"] = not result["errors"] and not lost and not inconsistent
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="2,4,8", help="client counts, comma-separated (each >= 2)")
    parser.add_argument("--seconds", type=float, default=10.0, help="per client count")
    parser.add_argument("--write", action="store_true", help="write the figures to bench/results/")
    args = parser.parse_args(argv)
    counts = sorted({int(c) for c in args.clients.split(",")})
    if counts[0] < 2:
        parser.error("--clients: each count must be >= 2 (half upload, half predict)")

    runs = [run_once(n, args.seconds) for n in counts]
    growth = {k: growth_exponent((r["clients"], r[k]) for r in runs) for k in ("p50_ms", "requests_per_s")}
    ok = all(r["passed"] for r in runs)
    lines = ["# API concurrency check (`bench/api_concurrency.py`)", "",
             f"Per client count, {args.seconds:g} s on a fresh server (half the clients upload one row per "
             "request, half predict 10 modes) against gunicorn with 2 workers; 2 CPUs shared by server and "
             "clients. Lost or duplicated: workloads whose rows answered 201 differ from the rows stored; "
             "inconsistent: stored counts that disagree with the rows and uploads tables.", "",
             "| clients | requests | errors | rows answered 201 | lost or duplicated | inconsistent | p50 ms | "
             "p99 ms | requests/s |", "|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        lines.append(f"| {r['clients']} | {r['requests']} | {r['errors']} | {r['rows_answered']} | "
                     f"{len(r['rows_lost_or_extra'])} | {len(r['inconsistent_workloads'])} | {r['p50_ms']:.1f} | "
                     f"{r['p99_ms']:.1f} | {r['requests_per_s']:.0f} |")
    lines += ["", f"Growth with the clients: p50 latency ~ clients^{exponent_text(growth['p50_ms'])}, throughput ~ "
              f"clients^{exponent_text(growth['requests_per_s'])}. **{'PASS' if ok else 'FAIL'}** (no errors, nothing "
              "lost, duplicated or inconsistent at any count).", ""]
    text = "\n".join(lines)
    print(text)
    if args.write:
        write_results("api_concurrency", text, {"runs": runs, "growth_exponents": growth, "passed": ok})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
