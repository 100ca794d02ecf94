"""What one workload on several device types, and canonical rows, cost (issue 20).

1. An upload of 4 rows against the rows already stored for the workload's device (10 ... 5,000): the
   upload reads them, compares the new rows with them in canonical form, checks the modes and refits the
   device's rows; and the same 4 rows uploaded again, reformatted (found stored: nothing is fitted).
2. Serving a workload with rows of k device types (1 ... 5): the cold lookup (one fit per device) and the
   choice of the device to transfer from for a device without rows (one transfer per device).

Printed with the slope b of ``time ~ size^b`` (log-log least squares). The stored rows are synthetic
(``bench/fit_scaling.py``) and the device rows are digital-twin sweeps: cost only, no accuracy claim.
Only ``--write`` writes ``bench/results/mixed_fleet.md`` and ``.json``.

Run: ``python bench/mixed_fleet.py [--sizes 10,100,...] [--repeats N] [--write]``.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
from pathlib import Path

from fit_scaling import DEVICE, cpu_seconds, synthetic_rows
from jetpredict.api.storage import Storage, WorkloadWrite
from jetpredict.api.workloads import WorkloadService, fit_devices
from jetpredict.models.catalogue import load_device
from jetpredict.models.profile_files import read_profile_csv, rows_to_records
from jetpredict.models.profile_rows import validate_records
from jetpredict.predictor.reference import REFERENCE_DIR
from jetpredict.predictor.workload_devices import DeviceModels
from results_io import exponent_text, growth_exponent, growth_exponents, write_results

SIZES = (10, 100, 1_000, 2_500, 5_000)
#: Below this many stored rows an upload is mostly its fixed cost: the per-row growth is read from here on.
LARGE_FROM = 1_000
#: Devices added one by one; the last catalogue device (AGX Xavier) has no rows and is served by transfer.
FLEET = ("orin-nano", "nano", "xavier-nx", "orin-nx", "orin-agx")
TARGET = "agx-xavier"


def _reformatted(records: list[dict]) -> list[dict]:
    """The same rows as a client might resend them: numbers as padded text (17 digits: the same values)."""
    return [{k: (f" {v:.17g} " if isinstance(v, float) else v) for k, v in r.items()} for r in records]


def _upload_cost(n: int, repeats: int) -> dict:
    """CPU seconds of uploads of 4 rows to a workload holding ``n`` rows of the device."""
    rows = synthetic_rows(n + 4, seed=n).to_dict("records")
    stored = rows_to_records(validate_records(rows[:n]))
    new = rows_to_records(validate_records(rows[n:]))
    with tempfile.TemporaryDirectory() as tmp:
        storage = Storage(f"sqlite:///{Path(tmp) / 'bench.sqlite'}")
        storage.create_schema()
        storage.add_uploads([WorkloadWrite("fit-scaling", DEVICE, stored, 0, {})])
        service = WorkloadService(storage)
        answers: list[dict] = []

        def add_new() -> None:
            # Each repeat is a new upload: the rows differ in their label only.
            answers.append(service.upload([{**r, "mode": f"{r['mode']}-{len(answers)}"} for r in new])[0])

        new_s = cpu_seconds(add_new, repeats)
        assert all(a["rows_stored"] == 4 for a in answers)
        again = _reformatted([{**r, "mode": f"{r['mode']}-0"} for r in new])
        turns = iter(range(1, len(again)))

        def add_again() -> None:
            # The stored rows in another order each time: not the same upload (that one is replayed whole
            # by its hash), so every row is compared with the stored ones.
            i = next(turns)
            assert service.upload(again[i:] + again[:i])[0]["rows_stored"] == 0

        dup_s = cpu_seconds(add_again, min(repeats, len(again) - 1))
        storage.dispose()
    return {"stored_rows": n, "upload_4_new_cpu_s": new_s, "upload_4_stored_cpu_s": dup_s}


def upload_slopes(uploads: list[dict], key: str) -> tuple[float | None, float | None]:
    """Growth exponent of ``key`` with the stored rows over all sizes, and from :data:`LARGE_FROM` rows on."""
    return growth_exponents(((r["stored_rows"], r[key]) for r in uploads), LARGE_FROM)


def upload_costs(sizes: list[int], repeats: int) -> list[dict]:
    out = []
    for n in sizes:
        out.append(_upload_cost(n, repeats))
        print(f"{n:>6} stored rows  4 new: {out[-1]['upload_4_new_cpu_s']:.3f} CPU-s  4 already stored "
              f"(reformatted): {out[-1]['upload_4_stored_cpu_s']:.3f} CPU-s", flush=True)
    return out


def _fleet_cost(rows: list[dict], k: int, repeats: int) -> dict:
    """CPU seconds of a cold lookup of a workload with ``rows`` of ``k`` devices, and of the transfer choice."""
    target = load_device(TARGET)
    cold_s = cpu_seconds(lambda: fit_devices(rows, "fleet", "workload.id"), repeats)
    choices = []
    for _ in range(repeats):
        # Freshly fitted models each time: moved models are cached per model (predictor.bundled.on_device).
        models = fit_devices(rows, "fleet", "workload.id")
        t0 = time.process_time()
        source = DeviceModels(models.models, models.primary).source_for(target)
        choices.append(time.process_time() - t0)
    return {"devices": k, "cold_lookup_cpu_s": cold_s, "transfer_choice_cpu_s": statistics.median(choices),
            "source_for_" + TARGET: source}


def fleet_costs(repeats: int) -> list[dict]:
    rows: list[dict] = []
    out = []
    for k, device_id in enumerate(FLEET, start=1):
        sweep = read_profile_csv(REFERENCE_DIR / f"{device_id}-simulated.csv")
        sweep = sweep[sweep["workload"] == "resnet18-cifar10"].iloc[:28:7]
        rows = rows + rows_to_records(sweep.assign(workload="fleet"))
        out.append(_fleet_cost(rows, k, repeats))
        r = out[-1]
        print(f"{k} device(s)  cold lookup {r['cold_lookup_cpu_s']:.3f} CPU-s  choice of the source for "
              f"{TARGET} {r['transfer_choice_cpu_s']:.3f} CPU-s (-> {r['source_for_' + TARGET]})", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="write bench/results/mixed_fleet.md/.json")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]

    t0 = time.perf_counter()
    uploads = upload_costs(sizes, args.repeats)
    b_new, b_new_large = upload_slopes(uploads, "upload_4_new_cpu_s")
    b_dup, b_dup_large = upload_slopes(uploads, "upload_4_stored_cpu_s")
    print(f"slope (time ~ stored rows^b): new rows b = {exponent_text(b_new)} over all sizes, "
          f"{exponent_text(b_new_large)} from {LARGE_FROM:,} rows on; already stored b = {exponent_text(b_dup)}, "
          f"{exponent_text(b_dup_large)} from {LARGE_FROM:,} rows on")
    fleet = fleet_costs(args.repeats)
    b_cold = growth_exponent((r["devices"], r["cold_lookup_cpu_s"]) for r in fleet)
    b_choice = growth_exponent((r["devices"], r["transfer_choice_cpu_s"]) for r in fleet[1:])
    print(f"slope (time ~ devices^b): cold lookup b = {b_cold:.2f}, transfer choice b = {b_choice:.2f} "
          f"(from 2 devices; 1 device needs no choice)")
    print(f"wall {time.perf_counter() - t0:.1f} s")

    lines = ["# One workload on several devices: cost", "",
             f"`python bench/mixed_fleet.py --write` on {platform.machine()}, {platform.python_version()}; "
             f"median CPU seconds of {args.repeats} runs (synthetic and digital-twin rows: cost only).", "",
             "## Upload of 4 rows against the rows stored for the device", "",
             "| stored rows | 4 new rows (CPU-s) | 4 already stored, reformatted (CPU-s) |", "|---:|---:|---:|"]
    lines += [f"| {r['stored_rows']:,} | {r['upload_4_new_cpu_s']:.3f} | {r['upload_4_stored_cpu_s']:.3f} |"
              for r in uploads]
    lines += ["", f"Slope of time ~ stored^b: **{exponent_text(b_new)}** over all sizes, **{exponent_text(b_new_large)}** "
              f"from {LARGE_FROM:,} rows on (new rows: read, compare, check, refit); **{exponent_text(b_dup)}**, "
              f"**{exponent_text(b_dup_large)}** from {LARGE_FROM:,} rows on (rows found stored: read and compare, "
              f"no fit). Below {LARGE_FROM:,} rows an upload is mostly its fixed cost.", "",
              "## Serving a workload with rows of k devices", "",
              f"| devices | cold lookup (CPU-s) | source for {TARGET} (CPU-s) | source |", "|---:|---:|---:|---|"]
    lines += [f"| {r['devices']} | {r['cold_lookup_cpu_s']:.3f} | {r['transfer_choice_cpu_s']:.3f} | "
              f"{r['source_for_' + TARGET]} |" for r in fleet]
    lines += ["", f"Slope of time ~ devices^b: cold lookup **{b_cold:.2f}**, transfer choice **{b_choice:.2f}** "
              "(1 = one fit, or one transfer, per device).", ""]
    if args.write:
        print(write_results("mixed_fleet", "\n".join(lines), {
            "uploads": uploads, "slope_new": b_new, "slope_stored": b_dup, "slope_new_from_1000": b_new_large,
            "slope_stored_from_1000": b_dup_large, "fleet": fleet,
            "slope_cold_lookup": b_cold, "slope_transfer_choice": b_choice}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
