"""Refit every bundled device reference from ``models/reference/*.csv``: ``python -m tools.build_bundled``.

Writes ``models/fitted/<device>-reference.json`` (JSON data, schema ``jetpredict-reference/3``) and its
manifest ``<device>-reference.json.json`` for each catalogue device that has reference sweeps (published
preferred, then measured, then simulated). Devices without sweeps get no artifact: ``load_reference``
derives theirs through device physics at run time. Interval widths are constants of
:mod:`jetpredict.predictor.model` calibrated on real data, not per reference.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from jetpredict.models.catalogue import device_ids
from jetpredict.predictor.artifacts import file_sha256
from jetpredict.predictor.bundled import FITTED_DIR, save_bundled_reference
from jetpredict.predictor.reference import (
    build_reference,
    read_reference_rows,
    read_simulated_rows,
    reference_csvs,
)


def build_all(out_dir: Path = FITTED_DIR, devices: list[str] | None = None) -> list[Path]:
    """Fit and write the reference artifact of each device that has sweeps; returns the paths written."""
    written = []
    for device_id in devices or device_ids():
        rows = read_reference_rows(device_id)
        if rows is None:
            continue
        csv = reference_csvs(device_id)[0]
        ref = replace(build_reference(rows, device_id), training_sha256=file_sha256(csv))  # the CSV's own bytes
        sims = read_simulated_rows(device_id)
        if ref.source != "simulated" and sims is not None:
            # Cross-device transfer compares the workloads every device shares: carry those sweeps too.
            ref = replace(ref, transfer=build_reference(sims, device_id))
        path = save_bundled_reference(ref, out_dir)
        print(f"{device_id}: {len(ref.workloads)} workload(s) from {csv.name} ({ref.source}) -> {path}",
              file=sys.stderr)
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
