"""Fleet plans by fleet size: server time and answer bytes of ``POST /v1/fleet-plans`` for 10 ... 10,000
clients (mixed device types, a stored workload), through the WSGI app in this process (server time, no
network). Prints the table and how the time grows with the number of clients (exponent b of
``ms ~ clients^b``); ``--write`` writes ``bench/results/api_fleet.md`` and ``.json``.

    python bench/api_fleet.py [--sizes 10,100,1000,10000] [--repeats 3] [--write]

Target (issue 19): a 10,000-client plan <= 1 s.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from results_io import growth_exponent, write_results

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tools.testing
KEY = "fleet-key"
TARGET_S = 1.0
#: The growth is read from this fleet size up: below it a plan is its fixed cost.
GROWTH_FROM_CLIENTS = 100
DEVICES = ("agx-xavier", "xavier-nx", "nano", "orin-agx", "orin-nx", "orin-nano")


def run(sizes: list[int], repeats: int) -> dict:
    from jetpredict.api.app import create_app

    from tools.testing import published_rows

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        app = create_app({"DATA_DIR": tmp, "API_KEYS": KEY, "RATE_LIMIT": "off", "RATE_LIMIT_ALL_MODES": "off",
                          "ACCESS_LOG": "off"})
        client = app.test_client()
        assert client.post("/v1/profiles", json={"rows": published_rows(as_id="fleet", n=10)},
                           headers={"X-API-Key": KEY}).status_code == 201
        # Every device's space prediction once, outside the measurement (as a warm server has it).
        warm = {"workload": {"id": "fleet"}, "deadline_s": 3600,
                "clients": [{"id": d, "device": d} for d in DEVICES]}
        assert client.post("/v1/fleet-plans", json=warm).status_code == 200
        for n in sizes:
            body = {"workload": {"id": "fleet"}, "deadline_s": 3600, "epochs": 1,
                    "clients": [{"id": f"client-{i}", "device": DEVICES[i % len(DEVICES)]} for i in range(n)]}
            times, size = [], 0
            for _ in range(repeats):
                t0 = time.perf_counter()
                r = client.post("/v1/fleet-plans", json=body)
                times.append(time.perf_counter() - t0)
                assert r.status_code == 200, r.get_json()
                size = len(r.data)
            rows.append({"clients": n, "median_s": statistics.median(times), "max_s": max(times), "bytes": size})
    return {"host": {"python": platform.python_version(), "cpus": os.cpu_count(), "machine": platform.machine(),
                     "load_avg_1m": os.getloadavg()[0]}, "repeats": repeats, "results": rows,
            "target_s_at_10000": TARGET_S}


def _slope(rows: list[dict]) -> float | None:
    """Exponent of plan time ~ clients^b from ``GROWTH_FROM_CLIENTS`` clients on; None below two such sizes."""
    return growth_exponent((r["clients"], r["median_s"]) for r in rows if r["clients"] >= GROWTH_FROM_CLIENTS)


def _markdown(res: dict) -> str:
    lines = ["# Fleet plans by fleet size (`bench/api_fleet.py`)", "",
             f"`POST /v1/fleet-plans` for a stored workload, clients spread over the six device types, through "
             f"the WSGI app (server time); median of {res['repeats']}; {res['host']['cpus']} CPUs, load "
             f"average {res['host']['load_avg_1m']:.1f} at the end.", "",
             "| clients | median s | max s | answer bytes |", "|---|---|---|---|"]
    for r in res["results"]:
        lines.append(f"| {r['clients']:,} | {r['median_s']:.3f} | {r['max_s']:.3f} | {r['bytes']:,} |")
    slope = _slope(res["results"])
    growth = (f"Time ~ clients^{slope:.2f} from {GROWTH_FROM_CLIENTS} clients up." if slope is not None
              else f"Time ~ clients^b: n/a (needs two sizes >= {GROWTH_FROM_CLIENTS}).")
    lines += ["", growth, ""]
    return "\n".join(lines)


def met_target(res: dict) -> bool:
    """Whether every run of 10,000 clients or more planned within ``TARGET_S`` (median s)."""
    return all(r["median_s"] <= TARGET_S for r in res["results"] if r["clients"] >= 10_000)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000,10000")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="write bench/results/api_fleet.md and .json")
    args = parser.parse_args(argv)
    res = run([int(s) for s in args.sizes.split(",") if s.strip()], args.repeats)
    text = _markdown(res)
    print(text)
    if args.write:
        write_results("api_fleet", text, res)
    return 0 if met_target(res) else 1


if __name__ == "__main__":
    sys.exit(main())
