"""Refit every bundled device reference from ``models/reference/*.csv``: ``python -m predictor.build_bundled``.

Writes ``models/fitted/<device>-reference.joblib`` + ``.json`` manifest for each catalogue device that has
reference sweeps (published preferred, then measured, then simulated). Devices without sweeps get no
artifact: ``load_reference`` derives theirs through device physics at run time.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from jetpredict.models.catalogue import device_ids
from jetpredict.models.profile_rows import read_profile_csv
from jetpredict.predictor.artifacts import FITTED_DIR, file_sha256, save_bundled_reference
from jetpredict.predictor.reference import (
    build_reference,
    calibrate_interval_scales,
    read_reference_rows,
    reference_csvs,
)


def build_all(out_dir: Path = FITTED_DIR, devices: list[str] | None = None) -> list[Path]:
    """Fit and write the reference artifact of each device that has sweeps; returns the paths written."""
    written = []
    for device_id in devices or device_ids():
        rows = read_reference_rows(device_id)
        if rows is None:
            continue
        ref = build_reference(rows, device_id)
        ref.training_sha256 = file_sha256(reference_csvs(device_id)[0])  # the bundled CSV's own bytes
        # Intervals calibrated on leave-one-workload-out residuals of the same sweeps.
        ref.interval_scale, ref.power_interval_scale, ref.energy_interval_scale = calibrate_interval_scales(rows)
        sims = [p for p in reference_csvs(device_id) if p.name.startswith(f"{device_id}-simulated")]
        if ref.source != "simulated" and sims:
            # Cross-device transfer compares the workloads every device shares: carry those sweeps too.
            ref.transfer = build_reference(read_profile_csv(sims[0]), device_id)
            ref.transfer.rows = None
        path = save_bundled_reference(ref, out_dir)
        print(f"{device_id}: {len(ref.workloads)} workload(s) from {reference_csvs(device_id)[0].name} "
              f"({ref.source}), interval scales time {ref.interval_scale:.2f} power "
              f"{ref.power_interval_scale:.2f} energy {ref.energy_interval_scale:.2f} -> {path}", file=sys.stderr)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=FITTED_DIR)
    parser.add_argument("--device", action="append", help="only this device (repeatable)")
    args = parser.parse_args(argv)
    build_all(args.out_dir, args.device)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
