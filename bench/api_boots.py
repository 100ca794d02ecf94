"""First boots of ``gunicorn -w 4 jetpredict.api.wsgi:app`` on an empty PostgreSQL database, five times.

No ``--preload``: the four workers import the app and create the schema at the same moment, the race that
made 4 of 5 boots fail before schema creation took a database lock. A boot counts when every worker
reports ready, none failed, and ``/healthz`` answers 200. Starts a throwaway PostgreSQL unless
``--database-url`` is given. Only ``--write`` writes ``bench/results/api_boots.json`` and ``.md``.

    python bench/api_boots.py [--boots 5] [--workers 4]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from results_io import write_results

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tools.testing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boots", type=int, default=5)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--database-url", default="", help="a PostgreSQL database it may empty")
    parser.add_argument("--write", action="store_true", help="write the figures to bench/results/")
    args = parser.parse_args(argv)

    from tools.testing import TempPostgres, empty_postgresql, gunicorn_first_boot

    pg = None
    url = args.database_url
    if not url:
        pg = TempPostgres().start()
        url = pg.create_database("boots")
    boots = []
    try:
        for i in range(args.boots):
            empty_postgresql(url)
            with tempfile.TemporaryDirectory() as tmp:
                result = gunicorn_first_boot(url, workers=args.workers, work_dir=tmp)
            print(f"boot {i + 1}: ok={result['ok']} workers ready {result['workers_ready']}/{args.workers}, "
                  f"failures {result['worker_failures']}, /healthz {result['healthz']}, {result['seconds']:.1f} s",
                  flush=True)
            if not result["ok"]:
                print(result["log_tail"], file=sys.stderr)
            boots.append({k: v for k, v in result.items() if k != "log_tail"})
    finally:
        if pg is not None:
            pg.stop()
    ok = sum(b["ok"] for b in boots)
    summary = {"boots": args.boots, "workers": args.workers, "ok": ok, "runs": boots}
    times = ", ".join(f"{b['seconds']:.1f}" for b in boots)
    text = "\n".join([
        "# First boots on an empty PostgreSQL (`bench/api_boots.py`)", "",
        f"`gunicorn -w {args.workers} jetpredict.api.wsgi:app` without preload, schema dropped before each boot: "
        f"**{ok} of {args.boots} boots came up** (every worker ready, none failed, /healthz 200); "
        f"boot times {times} s on a shared 2-core machine.", ""])
    print(text)
    if args.write:
        write_results("api_boots", text, summary)
    return 0 if ok == args.boots else 1


if __name__ == "__main__":
    sys.exit(main())
