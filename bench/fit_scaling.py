"""How the cost of one workload fit grows with its number of profile rows (10 ... 100,000), and the CLI's
cap (``models.reader_limits.MAX_ROWS`` rows, read from CSV and fitted).

Targets (issue 19): 1,000 rows <= 0.2 s, 100,000 rows <= 10 s, near-linear between: the printed slope is
the exponent b of ``time ~ rows^b`` fitted in log-log space over the sizes (1 = linear, 2 = quadratic), read
from 1,000 rows on and held to at most ``NEAR_LINEAR_MAX_B``. Each target prints met / NOT met (or not
measured, when ``--sizes`` leaves its size out); the run exits 1 when one is missed.

The rows are the published AGX Xavier ResNet-18 model's predictions at modes drawn uniformly from the
device's whole space, times 2% log-normal noise, with stall and compute columns: they are for cost only,
not accuracy (no figure here is an accuracy claim). Prints a table; only ``--write`` writes
``bench/results/fit_scaling.md`` and ``.json``.

The CLI cap's 200,000-row CSV read and fit takes most of a default run; ``--no-cap`` leaves it out (a quick
run: ``--sizes 10,100 --repeats 1 --no-cap``), and ``--write`` needs it, so the stored results always have it.

Run: ``python bench/fit_scaling.py [--sizes 10,100,...] [--repeats N] [--no-cap] [--write]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from jetpredict.models.catalogue import MODE_FIELDS, ModeArrays, load_device
from jetpredict.models.profile_files import read_profile_csv
from jetpredict.models.reader_limits import MAX_ROWS
from jetpredict.predictor.bundled import fit_workload
from jetpredict.predictor.reference import REFERENCE_DIR
from results_io import (
    cpu_seconds,
    exponent_text,
    growth_exponent,
    report_targets,
    target_lines,
    write_results,
)

DEVICE = "agx-xavier"
SIZES = (10, 100, 1_000, 10_000, 100_000)
NOISE_REL = 0.02
#: Issue 19's targets: CPU s of one fit at these row counts.
TARGET_S = {1_000: 0.2, 100_000: 10.0}
#: "Near-linear" read as time ~ rows^b with b at most this from 1,000 rows on (1 linear, 2 quadratic).
NEAR_LINEAR_MAX_B = 1.2
#: The per-row cost shows from this many rows on; below it a fit is its fixed cost.
LARGE_FROM_ROWS = 1_000


def synthetic_rows(n: int, seed: int = 0) -> pd.DataFrame:
    """``n`` profile rows of one workload at random AGX Xavier modes (see the module docstring)."""
    published = read_profile_csv(REFERENCE_DIR / f"{DEVICE}-published.csv")
    truth = fit_workload(published[published["workload"] == "resnet18-cifar10"].reset_index(drop=True), load_device(DEVICE))
    space = load_device(DEVICE).modes().arrays().columns()
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(space["cpu_cores"]), n)
    knobs = {k: np.asarray(space[k])[idx] for k in MODE_FIELDS}
    pred = truth.predict(ModeArrays.from_frame(knobs))
    noise = rng.lognormal(0.0, NOISE_REL, n)
    return pd.DataFrame({
        "device": DEVICE, "workload": "fit-scaling", "mode": [f"m{i}" for i in idx], **knobs,
        "num_workers": 4, "batch_size": 16, "minibatches_per_epoch": 3125,
        "epoch_time_s": pred.epoch_time_s * noise, "stall_time_s": pred.stall_time_s * noise,
        "compute_time_s": pred.compute_time_s * noise, "avg_power_w": pred.avg_power_w * noise,
        "source": "simulated: bench/fit_scaling.py (cost only)"})


def cap_cpu_s() -> tuple[float, float]:
    """CPU s to read and check a ``MAX_ROWS``-row profile CSV, and to fit it: the CLI path at its cap (what
    ``jetpredict fit`` does)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cap.csv"
        synthetic_rows(MAX_ROWS, seed=1).to_csv(path, index=False)
        t0 = time.process_time()
        capped = read_profile_csv(path)
        read_s = time.process_time() - t0
        fit_s = cpu_seconds(lambda: fit_workload(capped, load_device(DEVICE)), 1)
    return read_s, fit_s


def verdict(table: list[dict], b_large: float | None) -> dict[str, bool | None]:
    """Each target met (True), missed (False) or not measured (None) by the fits in ``table`` (``rows``,
    ``fit_cpu_s``) and the slope ``b_large`` from ``LARGE_FROM_ROWS`` rows on."""
    cpu_s = {r["rows"]: r["fit_cpu_s"] for r in table}
    out: dict[str, bool | None] = {
        f"{rows:,} rows <= {limit_s:g} CPU-s": (cpu_s[rows] <= limit_s) if rows in cpu_s else None
        for rows, limit_s in TARGET_S.items()}
    out[f"near-linear from {LARGE_FROM_ROWS:,} rows (b <= {NEAR_LINEAR_MAX_B:g})"] = (
        None if b_large is None else b_large <= NEAR_LINEAR_MAX_B)
    return out


def cap_text(result: dict) -> str:
    """The CLI cap's sentence from a run's result: its CPU s to read and check the ``cap_rows``-row CSV and
    to fit it, or that a ``--no-cap`` run left it out."""
    if "cap_rows" not in result:
        return "CLI cap: not run (--no-cap)."
    return (f"CLI cap, {result['cap_rows']:,} rows: CSV read and checked in {result['cap_read_cpu_s']:.2f} "
            f"CPU-s, fitted in {result['cap_fit_cpu_s']:.2f} CPU-s.")


def host_text(result: dict) -> str:
    """The host's load while the run ended: others share the cores, and CPU seconds grow with it."""
    return f"{result['cpu_count']} CPUs, load average {result['load_avg_1m']:.1f} at the end"


def markdown(result: dict) -> str:
    """The Markdown report of a run from its result (what ``--write`` stores as JSON), its verdicts included."""
    lines = ["# Fit cost against rows", "",
             f"`python bench/fit_scaling.py --write` on {result['machine']}, {result['python']}; "
             f"median CPU seconds of {result['repeats']} fits (synthetic rows, cost only); "
             f"{host_text(result)}.", "",
             "| rows | fit CPU-s |", "|---:|---:|"]
    lines += [f"| {r['rows']:,} | {r['fit_cpu_s']:.3f} |" for r in result["sizes"]]
    lines += ["", f"Slope of time ~ rows^b: **b = {exponent_text(result['slope'])}** over all sizes, "
              f"**{exponent_text(result['slope_from_1000_rows'])}** from 1,000 rows on "
              "(1 = linear; below 1,000 rows a fit is its fixed cost).", "",
              cap_text(result), "", "## Targets", ""]
    lines += [f"- {line}" for line in target_lines(verdict(result["sizes"], result["slope_from_1000_rows"]))]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-cap", action="store_true",
                        help=f"skip the CLI cap ({MAX_ROWS:,} rows read from CSV and fitted): a quick run")
    parser.add_argument("--write", action="store_true", help="write bench/results/fit_scaling.md/.json")
    args = parser.parse_args(argv)
    if args.write and args.no_cap:
        parser.error("--write stores the CLI cap's figures too: drop --no-cap")
    sizes = [int(s) for s in args.sizes.split(",")]

    fit_workload(synthetic_rows(10), load_device(DEVICE))  # warm the bundled reference's cache
    table = []
    for n in sizes:
        rows = synthetic_rows(n)
        table.append({"rows": n, "fit_cpu_s": cpu_seconds(lambda r=rows: fit_workload(r, load_device(DEVICE)), args.repeats)})
        print(f"{n:>8} rows  fit {table[-1]['fit_cpu_s']:.3f} CPU-s", flush=True)
    b = growth_exponent((r["rows"], r["fit_cpu_s"]) for r in table)
    # Small fits are their fixed cost; the per-row cost shows from 1,000 rows on.
    large = [r for r in table if r["rows"] >= LARGE_FROM_ROWS]
    b_large = growth_exponent((r["rows"], r["fit_cpu_s"]) for r in large)
    print(f"slope (time ~ rows^b): b = {exponent_text(b)} over all sizes, {exponent_text(b_large)} from 1,000 rows on")
    result = {"sizes": table, "slope": b, "slope_from_1000_rows": b_large, "repeats": args.repeats,
              "machine": platform.machine(), "python": platform.python_version()}
    if not args.no_cap:
        read_s, fit_s = cap_cpu_s()
        result.update(cap_rows=MAX_ROWS, cap_read_cpu_s=read_s, cap_fit_cpu_s=fit_s)
    print(cap_text(result))
    result.update(cpu_count=os.cpu_count(), load_avg_1m=os.getloadavg()[0])
    print(host_text(result))
    if args.write:
        print(write_results("fit_scaling", markdown(result), result))
    return report_targets(verdict(table, b_large))


if __name__ == "__main__":
    raise SystemExit(main())
