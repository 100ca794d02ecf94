"""The first listings after an upgrade: ``GET /v1/workloads?limit=N`` over N stored workloads whose fits an
older model version wrote (SQLite, in process).

A listing refits such fits, as a prediction would, starting none after ``api.workloads.LISTING_REFIT_S``, and
lists the rest as stored; the fits it refreshed are stored, so each listing takes the next ones. Per N (one workload of
4 real rows per id, the ResNet-18 sweep's modes), the seconds of the first listing, how many listings until
every fit on the page is the running model's, and the seconds of a listing once they all are; on a copy of the
same database, one listing without the budget (as before it: every fit on the page refitted at once). Then how
each grows with N (``s ~ N^b``: flat under the budget, where the whole page grows as N).
Prints the figures; only ``--write`` writes ``bench/results/listing_after_upgrade.json`` and ``.md``.

    python bench/listing_after_upgrade.py [--sizes 50,200,800] [--write]
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

from results_io import exponent_text, growth_exponent, write_results

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tools.testing
KEY = "listing-key"


def _app(data_dir: Path):
    from jetpredict.api.app import create_app

    return create_app({"DATA_DIR": str(data_dir), "API_KEYS": KEY, "DATABASE_URL": "", "RATE_LIMIT": "off",
                       "RATE_LIMIT_ALL_MODES": "off", "ACCESS_LOG": "off"})


def _store_aged(data_dir: Path, workloads: int) -> None:
    """``workloads`` workloads stored under ``data_dir``, every fit then marked as an older model's."""
    from jetpredict.api.upload_groups import MAX_UPLOAD_WORKLOADS

    from tools.testing import age_stored_fits, published_rows

    app = _app(data_dir)
    ids = [f"w{i:05d}" for i in range(workloads)]
    for start in range(0, workloads, MAX_UPLOAD_WORKLOADS):
        rows = [row for workload_id in ids[start:start + MAX_UPLOAD_WORKLOADS]
                for row in published_rows(as_id=workload_id)]
        answer = app.test_client().post("/v1/profiles", json={"rows": rows}, headers={"X-API-Key": KEY})
        assert answer.status_code == 201, answer.json
    app.extensions["jetpredict"].storage.dispose()
    age_stored_fits(data_dir / "jetpredict.sqlite")


def measure(workloads: int) -> dict:
    """The listings of one page of ``workloads`` aged workloads on a fresh (restarted) service, until every
    fit is current, then one more; and, on a fresh copy, one listing that refits the whole page (no budget)."""
    from jetpredict.api import workloads as workloads_module
    from jetpredict.predictor.model import MODEL_VERSION

    def listings(data_dir: Path, until_current: bool) -> tuple[list[float], list[int]]:
        app = _app(data_dir)
        client = app.test_client()
        seconds, current = [], []
        while not current or (until_current and current[-1] < workloads):
            # Each listing refits at least one fit: a page still stale after N of them never becomes current.
            assert len(current) <= workloads, f"{workloads - current[-1]} fits never became current: {current}"
            start = time.perf_counter()
            answer = client.get(f"/v1/workloads?limit={workloads}")
            seconds.append(time.perf_counter() - start)
            assert answer.status_code == 200, answer.json
            current.append(sum(w["model_version"] == MODEL_VERSION for w in answer.json["workloads"]))
        start = time.perf_counter()
        assert client.get(f"/v1/workloads?limit={workloads}").status_code == 200
        seconds.append(time.perf_counter() - start)
        app.extensions["jetpredict"].storage.dispose()
        return seconds, current

    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as whole_tmp:
        _store_aged(Path(tmp), workloads)
        shutil.copytree(tmp, whole_tmp, dirs_exist_ok=True)
        seconds, current = listings(Path(tmp), until_current=True)
        budget = workloads_module.LISTING_REFIT_S
        workloads_module.LISTING_REFIT_S = math.inf  # as before the budget: the whole page in one listing
        try:
            whole, _ = listings(Path(whole_tmp), until_current=False)
        finally:
            workloads_module.LISTING_REFIT_S = budget
    return {"workloads": workloads, "first_listing_s": seconds[0], "max_listing_s": max(seconds[:-1]),
            "listings_to_current": len(current), "current_after_each": current, "current_listing_s": seconds[-1],
            "whole_page_refit_s": whole[0]}


def markdown(data: dict) -> str:
    from jetpredict.api.workloads import LISTING_REFIT_S

    lines = ["# The first listings after an upgrade (`bench/listing_after_upgrade.py`)", "",
             f"`GET /v1/workloads?limit=N` over N stored workloads (4 real rows each) whose fits an older model "
             f"version wrote, SQLite, in process; a listing starts no refit of them after {LISTING_REFIT_S:g} s "
             "(`api.workloads.LISTING_REFIT_S`) and lists the rest as stored.", "",
             "| workloads | first listing s | slowest listing s | listings until all current | "
             "fits current after each | listing s, all current | one listing refitting the whole page s |",
             "|---|---|---|---|---|---|---|"]
    for r in data["sizes"]:
        lines.append(f"| {r['workloads']} | {r['first_listing_s']:.2f} | {r['max_listing_s']:.2f} | "
                     f"{r['listings_to_current']} | {', '.join(map(str, r['current_after_each']))} | "
                     f"{r['current_listing_s']:.3f} | {r['whole_page_refit_s']:.2f} |")
    lines += ["", f"Growth with the workloads: first listing s ~ N^{exponent_text(data['first_listing_exponent'])}, "
              f"listings until all current ~ N^{exponent_text(data['listings_exponent'])}; one listing refitting the "
              f"whole page (no budget, as before it) ~ N^{exponent_text(data['whole_page_exponent'])}.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50,200,800", help="workloads per page, comma-separated (<= 1000)")
    parser.add_argument("--write", action="store_true", help="write the figures to bench/results/")
    args = parser.parse_args(argv)
    sizes = []
    for n in sorted({int(s) for s in args.sizes.split(",")}):
        sizes.append(measure(n))
        r = sizes[-1]
        print(f"{n} workloads: first listing {r['first_listing_s']:.2f} s, slowest {r['max_listing_s']:.2f} s, "
              f"{r['listings_to_current']} listings until all current ({r['current_after_each']}), then "
              f"{r['current_listing_s']:.3f} s; the whole page in one listing {r['whole_page_refit_s']:.2f} s",
              flush=True)
    data = {"sizes": sizes,
            "first_listing_exponent": growth_exponent((r["workloads"], r["first_listing_s"]) for r in sizes),
            "listings_exponent": growth_exponent((r["workloads"], r["listings_to_current"]) for r in sizes),
            "whole_page_exponent": growth_exponent((r["workloads"], r["whole_page_refit_s"]) for r in sizes)}
    text = markdown(data)
    print(text)
    if args.write:
        write_results("listing_after_upgrade", text, data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
