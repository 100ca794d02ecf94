"""Query a running jetpredict service from Python, as a power-mode tuning tool would.

It lists the devices, uploads a profile (4 measured modes of a workload) so that the service fits it,
then prints the best power modes under a power cap. It starts nothing itself: run the service first::

    export JETPREDICT_API_KEYS=my-secret-key
    jetpredict serve &
    python3 examples/query_service.py --url http://127.0.0.1:8080 --max-power-w 15

Without ``--profile`` it uploads 4 modes of ResNet-18 on AGX Xavier from the published figures bundled
with the package (``models/reference/agx-xavier-published.csv``), relabelled as workload ``--workload``.
The key comes from ``$JETPREDICT_API_KEY`` (or the first of ``$JETPREDICT_API_KEYS``). Only
:mod:`jetpredict.client` talks to the service: standard library, plain dicts.
"""

from __future__ import annotations

import argparse
import sys

from jetpredict.predictor.limits import OBJECTIVES

from jetpredict.client import DEFAULT_URL, Client, ServiceError, read_rows_csv

BUNDLED_WORKLOAD = "resnet18-cifar10"


def bundled_rows(workload_id: str, n: int = 4) -> list[dict]:
    """``n`` published AGX Xavier rows of ResNet-18 (shipped in the package), as workload ``workload_id``."""
    from jetpredict.models.paths import data_path

    rows = [r for r in read_rows_csv(data_path("reference", "agx-xavier-published.csv"))
            if r["workload"] == BUNDLED_WORKLOAD][:n]
    return [{**r, "workload": workload_id} for r in rows]


def _mode(row: dict) -> str:
    return (f"{row.get('mode') or '?':<26} {row['cpu_cores']:>2} cores {row['cpu_mhz']:>7.1f} / "
            f"{row['gpu_mhz']:>7.2f} / {row['emc_mhz']:>7.1f} MHz  "
            f"{row['epoch_time_s']:>8.1f} s [{row['epoch_time_s_low']:.1f}, {row['epoch_time_s_high']:.1f}]  "
            f"{row['avg_power_w']:>5.2f} W  {row['epoch_energy_j']:>8.0f} J"
            + (f"  (outside the profiled {row['extrapolated_knobs']})" if row.get("extrapolated") else ""))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default=DEFAULT_URL, help=f"the service (default {DEFAULT_URL})")
    p.add_argument("--profile", help="profile rows to upload (CSV); default: 4 bundled published rows")
    p.add_argument("--workload", default="example-resnet18",
                   help="workload id of the bundled rows (ignored with --profile: its rows name it)")
    p.add_argument("--max-power-w", type=float, default=15.0, help="power cap, W (default 15)")
    p.add_argument("--objective", choices=tuple(OBJECTIVES), default="min-energy")
    p.add_argument("--top", type=int, default=5, help="modes of the Pareto front to print (default 5)")
    args = p.parse_args(argv)

    rows = read_rows_csv(args.profile) if args.profile else bundled_rows(args.workload)
    try:
        with Client(args.url) as api:
            health = api.health()
            print(f"service {args.url}: {health['status']}, version {health['version']}")
            for device in api.devices()["devices"]:
                print(f"  {device['id']:<11} {device['name']:<40} {device['power_modes']:>6} power modes")

            uploaded = api.upload_profiles(rows)  # stores the rows and fits the workload
            workload_id, device = uploaded["workload_id"], uploaded["device"]
            print(f"uploaded {uploaded['rows_stored']} new row(s) of {workload_id} on {device} "
                  f"({uploaded['rows_total']} stored); fitted on {uploaded['profiled_modes']} profiled "
                  f"mode(s), model {uploaded['model_version']}, reference {uploaded['reference_source']}")

            answer = api.recommendations(workload_id, args.objective, device=device,
                                         max_power_w=args.max_power_w)
            print(f"{args.objective} under {args.max_power_w:g} W (upper bound at confidence "
                  f"{answer['confidence']:g}), {answer.get('modes_considered', '?')} modes searched:")
            if answer["best"] is None:
                print(f"  no mode meets the cap: {answer.get('reason')}")
                return 1
            print(f"  best  {_mode(answer['best'])}")
            print(f"  label for `jetpredict apply --mode`: {answer['best']['mode']}")
            if answer.get("preferred_in_range"):
                print("  (a mode outside the profiled knob ranges looked better, within its interval: the best "
                      "mode inside the ranges, or better than all of them beyond its interval, is recommended)")
            preset = answer.get("preset_comparison") or {}
            if preset.get("preset") and preset.get("energy_saving_j") is not None:
                print(f"  against the best preset under the cap, {preset['preset']}: "
                      f"{preset['time_saving_s']:+.1f} s and {preset['energy_saving_j']:+.0f} J saved per epoch")
            front = answer["pareto"]
            shown = "" if len(front) <= args.top else f"the first {args.top} of "
            print(f"Pareto front under the cap (fastest first, {shown}{len(front)} modes):")
            for row in front[:args.top]:
                print(f"        {_mode(row)}")
    except ServiceError as exc:
        print(f"query_service: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
