"""First boots of ``gunicorn -w N jetpredict.api.wsgi:app`` on an empty PostgreSQL database, N = 1, 2, 4, 8.

No ``--preload``: the N workers import the app and create the schema at the same moment, the race that
made 4 of 5 boots at N = 4 fail before schema creation took a database lock. A boot counts when every
worker reports ready, none failed, and ``/healthz`` answers 200. Each worker count boots ``--boots`` times
(rounds interleave the counts, so the machine's drift spreads over all of them); the median boot time per
count shows how a boot grows with the workers (``boot s ~ workers^b``). Starts a throwaway PostgreSQL
unless ``--database-url`` is given. Only ``--write`` writes ``bench/results/api_boots.json`` and ``.md``.
This is not ``jetpredict serve``'s start (which imports the app once and forks its workers): DESIGN.md's
"``serve`` answers within 15 s" is held by ``bench/serve_boot.py``.

    python bench/api_boots.py [--workers 1,2,4,8] [--boots 5] [--write]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

from results_io import exponent_text, growth_exponent, write_results

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tools.testing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2,4,8", help="gunicorn worker counts, comma-separated")
    parser.add_argument("--boots", type=int, default=5, help="boots per worker count")
    parser.add_argument("--database-url", default="", help="a PostgreSQL database it may empty")
    parser.add_argument("--write", action="store_true", help="write the figures to bench/results/")
    args = parser.parse_args(argv)
    counts = sorted({int(w) for w in args.workers.split(",")})

    from tools.testing import TempPostgres, empty_postgresql, gunicorn_first_boot

    pg = None
    url = args.database_url
    if not url:
        pg = TempPostgres().start()
        url = pg.create_database("boots")
    boots: list[dict] = []
    try:
        for round_no in range(args.boots):
            for workers in counts:
                empty_postgresql(url)
                with tempfile.TemporaryDirectory() as tmp:
                    result = gunicorn_first_boot(url, workers=workers, work_dir=tmp)
                print(f"round {round_no + 1}, -w {workers}: ok={result['ok']} workers ready "
                      f"{result['workers_ready']}/{workers}, failures {result['worker_failures']}, "
                      f"/healthz {result['healthz']}, {result['seconds']:.1f} s", flush=True)
                if not result["ok"]:
                    print(result["log_tail"], file=sys.stderr)
                boots.append({"workers": workers, **{k: v for k, v in result.items() if k != "log_tail"}})
    finally:
        if pg is not None:
            pg.stop()

    sizes = []
    for workers in counts:
        runs = [b for b in boots if b["workers"] == workers]
        seconds = [b["seconds"] for b in runs]
        sizes.append({"workers": workers, "boots": len(runs), "ok": sum(b["ok"] for b in runs),
                      "median_s": statistics.median(seconds), "min_s": min(seconds), "max_s": max(seconds)})
    growth = growth_exponent((s["workers"], s["median_s"]) for s in sizes)
    ok = sum(b["ok"] for b in boots)
    failed_workers = sum(b["worker_failures"] for b in boots)
    summary = {"workers": counts, "boots_per_count": args.boots, "boots": len(boots), "ok": ok,
               "worker_failures": failed_workers,
               "cpu_count": os.cpu_count(), "sizes": sizes, "growth_exponent_median_s": growth, "runs": boots}
    lines = ["# First boots on an empty PostgreSQL (`bench/api_boots.py`)", "",
             f"`gunicorn -w N jetpredict.api.wsgi:app` without preload, schema dropped before each boot, "
             f"{args.boots} boots per worker count (rounds interleave the counts); {os.cpu_count()} CPU cores "
             "shared by gunicorn and PostgreSQL. A boot came up when every worker was ready, none failed and "
             "/healthz answered 200.", "",
             "| workers | boots | came up | median s | min s | max s |", "|---|---|---|---|---|---|"]
    for s in sizes:
        lines.append(f"| {s['workers']} | {s['boots']} | {s['ok']} | {s['median_s']:.1f} | {s['min_s']:.1f} | "
                     f"{s['max_s']:.1f} |")
    growth_text = f"workers^{exponent_text(growth)}"
    lines += ["", f"Growth with the workers ({', '.join(map(str, counts))}): median boot s ~ {growth_text} "
              "(without preload every worker imports the app and its numeric stack itself, on the shared cores).", "",
              f"**{ok} of {len(boots)} boots came up** (every worker ready, /healthz 200); failed workers: "
              f"**{failed_workers}**.", ""]
    text = "\n".join(lines)
    print(text)
    if args.write:
        write_results("api_boots", text, summary)
    return 0 if ok == len(boots) else 1


if __name__ == "__main__":
    sys.exit(main())
