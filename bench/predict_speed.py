"""Speed of the predictor's operations, in process (median of repeated runs).

Targets (issue 5): predicting all 29,232 AGX Xavier modes for one fitted workload < 50 ms; fitting a
workload < 1 s. Also times recommendation over the full space, a 50-client fleet plan and a profiling
plan, then how each size-driven cost grows: prediction with the modes asked for, a fleet plan with its
clients, a profiling plan with its budget (``cost ~ size^b``; fitting against its rows is
``bench/fit_scaling.py``'s). Prints the tables; only ``--write`` writes ``bench/results/predict_speed.md``
(a tracked file: timings vary from run to run, so a plain run must not leave the checkout modified).

Run: ``python bench/predict_speed.py [--repeats N] [--cold-repeats N] [--write]``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from jetpredict.models.catalogue import ModeArrays, load_device
from jetpredict.models.profile_files import read_profile_csv
from jetpredict.predictor import service
from jetpredict.predictor.bundled import fit_workload, load_reference, predict_modes
from jetpredict.predictor.reference import REFERENCE_DIR
from results_io import exponent_text, growth_exponent, write_results

PROFILED = ["a", "d", "g", "h"]
#: Sizes of the growth tables: modes predicted (the last is every AGX Xavier mode), fleet clients, and
#: profiling budgets (modes to profile).
MODE_COUNTS = (1_000, 3_000, 10_000, 29_232)
CLIENT_COUNTS = (10, 50, 200, 1_000)
BUDGETS = (2, 4, 8, 16)
#: Devices of the cold profiling-plan table (each in a fresh process: nothing read or fitted yet).
COLD_DEVICES = ("agx-xavier", "xavier-nx", "nano", "orin-agx", "orin-nx", "orin-nano")
#: Run in a fresh interpreter: the first profiling plan's wall and CPU time (ms). Module imports are excluded,
#: but not scipy.optimize, which the first fit imports (deferred since aa8d618 so predictions skip it).
_COLD_PLAN = """
import json, sys, time
from jetpredict.predictor import service
t0, c0 = time.perf_counter(), time.process_time()
service.plan_profiling(sys.argv[1], 4)
print(json.dumps([(time.perf_counter() - t0) * 1e3, (time.process_time() - c0) * 1e3]))
"""


def timed(fn: Callable[[], object], repeats: int) -> tuple[float, float, float, float]:
    """(median, min, max) wall time and median CPU time, in ms, of ``repeats`` calls after a warm-up.

    CPU time shows how much of the wall time is the work itself when other processes share the cores.
    """
    fn()
    wall, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
    return statistics.median(wall), min(wall), max(wall), statistics.median(cpu)


def cold_plan(device_id: str, repeats: int) -> tuple[float, float]:
    """Median wall and CPU ms of a process's first ``plan_profiling(device_id, 4)``, each run a fresh one."""
    runs = [json.loads(subprocess.run([sys.executable, "-c", _COLD_PLAN, device_id], capture_output=True,
                                      text=True, check=True).stdout.splitlines()[-1]) for _ in range(repeats)]
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def _clients(n: int) -> list[dict[str, str]]:
    """``n`` fleet clients spread over three device types."""
    return [{"id": f"c{i}", "device": ("agx-xavier", "xavier-nx", "nano")[i % 3]} for i in range(n)]


def met_text(median_ms: float, target_ms: float | None) -> str:
    """The table's "met" cell: "-" without a target, "yes" when the median is under it, else "NO"."""
    return "-" if target_ms is None else ("yes" if median_ms < target_ms else "NO")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--cold-repeats", type=int, default=3,
                        help="fresh processes per device for the cold profiling plans (default 3)")
    parser.add_argument("--write", action="store_true", help="write bench/results/predict_speed.md")
    args = parser.parse_args(argv)

    rows = read_profile_csv(REFERENCE_DIR / "agx-xavier-published.csv")
    rows = rows[(rows["workload"] == "resnet18-cifar10") & rows["mode"].isin(PROFILED)].reset_index(drop=True)
    t0 = time.perf_counter()
    load_reference(load_device("agx-xavier"))
    first_reference_ms = (time.perf_counter() - t0) * 1e3
    model = fit_workload(rows, load_device("agx-xavier"))
    modes = ModeArrays.of_device(load_device("agx-xavier"))
    clients = _clients(50)

    cases = [
        ("fit_workload (4 ResNet-18 rows, AGX Xavier)", "< 1000",
         lambda: fit_workload(rows, load_device("agx-xavier")), 1000.0),
        ("bundled.predict_modes, all 29,232 AGX Xavier modes", "< 50", lambda: predict_modes(model, modes), 50.0),
        # A copy is a new fitted model to the service: its all-modes prediction is not cached yet.
        ("service.predict(model, 'all') -> DataFrame, first call for a model", "< 50",
         lambda: service.predict(copy.copy(model), "all"), 50.0),
        ("service.predict(model, 'all'), repeated (all-modes prediction cached)", "-",
         lambda: service.predict(model, "all"), None),
        ("service.recommend min-time, max_power_w=20", "-",
         lambda: service.recommend(model, "min-time", max_power_w=20), None),
        ("service.plan_fleet, 50 clients on 3 device types", "-",
         lambda: service.plan_fleet(model, clients, deadline_s=3000), None),
        ("service.plan_profiling agx-xavier, budget 4", "-",
         lambda: service.plan_profiling("agx-xavier", 4), None),
    ]
    lines = ["| operation | median ms | min ms | max ms | median CPU ms | target ms | met (median) |",
             "|---|---|---|---|---|---|---|"]
    ok = True
    for name, target_text, fn, target in cases:
        repeats = max(3, args.repeats // 4) if "plan" in name or "recommend" in name else args.repeats
        med, lo, hi, cpu = timed(fn, repeats)
        met = met_text(med, target)
        ok &= met != "NO"
        lines.append(f"| {name} | {med:.1f} | {lo:.1f} | {hi:.1f} | {cpu:.1f} | {target_text} | {met} |")
    growth = [
        ("bundled.predict_modes", "modes", MODE_COUNTS, lambda n: (lambda: predict_modes(model, modes.take(slice(0, n)))),
         args.repeats),
        ("service.plan_fleet (3 device types)", "clients", CLIENT_COUNTS,
         lambda n: (lambda: service.plan_fleet(model, _clients(n), deadline_s=3000)), max(3, args.repeats // 4)),
        ("service.plan_profiling agx-xavier", "budget", BUDGETS,
         lambda n: (lambda: service.plan_profiling("agx-xavier", n)), max(3, args.repeats // 4)),
    ]
    for name, unit, sizes, make, repeats in growth:
        lines += ["", f"{name} by {unit}:", "", f"| {unit} | median ms | median CPU ms |", "|---|---|---|"]
        points = []
        for n in sizes:
            med, _, _, cpu = timed(make(n), repeats)
            points.append((n, cpu))
            lines.append(f"| {n:,} | {med:.1f} | {cpu:.1f} |")
        b = growth_exponent(points)
        lines += ["", f"CPU time ~ {unit}^{exponent_text(b)} ({unit} {sizes[0]:,}-{sizes[-1]:,})."]
    lines += ["", "service.plan_profiling, budget 4, first call of a fresh process (reference rows read, "
              "reference workloads fitted, scipy.optimize imported for the first fit):", "",
              "| device | median ms | median CPU ms |", "|---|---|---|"]
    for device_id in COLD_DEVICES:
        med, cpu = cold_plan(device_id, args.cold_repeats)
        lines.append(f"| {device_id} | {med:.0f} | {cpu:.0f} |")
    header = [
        "# Predictor speed (bench/predict_speed.py)", "",
        f"Machine: {platform.machine()}, {platform.processor() or 'cpu'}, Python {platform.python_version()}; "
        f"median of {args.repeats} runs after one warm-up (plans and recommendations: fewer runs; cold plans: "
        f"{args.cold_repeats} fresh processes per device).",
        f"First load of the AGX Xavier reference (bundled artifact or in-memory fit): {first_reference_ms:.0f} ms.",
        f"Load average while running: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs.",
        "",
    ]
    text = "\n".join([*header, *lines, ""])
    print(text)
    if args.write:
        write_results("predict_speed", text)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
