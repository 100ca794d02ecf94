"""Recompute the interval scales of ``predictor.constants.INTERVAL_SCALES`` on real data:
``python -m tools.calibrate_intervals``.

Prints the calibrated scales (per stratum of design sizes: 1, 2, 3+ profiled modes) and, per (target,
reference, design size) cell, the coverage and median width of the nominal 90% time / power / energy
intervals under them (see :mod:`predictor.calibration`);
then the check beyond that level: their coverage at 99% and 99.9% (``limits.MAX_CONFIDENCE``), pooled
and in the lowest cell.
Paste the scales into ``INTERVAL_SCALES`` when they change (per stratum; evidence [E11] in
``docs/model-evidence.md``).
"""

from __future__ import annotations

import argparse

import numpy as np
from jetpredict.predictor.calibration import (
    OUTPUTS,
    calibrate,
    coverage,
    half_width,
    residual_cells,
    strata,
    tail_coverage,
)
from jetpredict.predictor.constants import POOLED_FROM_MODES
from jetpredict.predictor.limits import MAX_CONFIDENCE

#: Levels beyond the calibrated 90% at which the calibrated intervals are checked.
TAIL_LEVELS = (0.99, MAX_CONFIDENCE)


def main(argv: list[str] | None = None) -> int:
    # No options: the parser answers --help instead of running the calibration, and refuses stray flags.
    argparse.ArgumentParser(prog="python -m tools.calibrate_intervals",
                            description=__doc__.split("\n\n")[0].replace("\n", " ")).parse_args(argv)
    cells = residual_cells()
    scales = calibrate(cells)
    print("INTERVAL_SCALES = {" + ", ".join(
        f"{n}: IntervalScales({s.time}, {s.power}, {s.energy})" for n, s in scales.items()) + "}")
    for out in OUTPUTS:
        for group, members in strata(cells).items():
            scale = getattr(scales[group], out)
            pooled = np.vstack([c[out] for c in members.values()])
            more = "+" if group == POOLED_FROM_MODES else ""
            print(f"{out}, {group}{more} mode(s): scale {scale}, pooled coverage {coverage(scale, pooled):.3f} "
                  f"(at scale 1: {coverage(1.0, pooled):.3f})")
            for key, c in members.items():
                width = np.median(2 * half_width(scale, c[out]))
                print(f"  {key[0]:20s} {key[1]:16s} {key[2]} mode(s): coverage {coverage(scale, c[out]):.3f} "
                      f"median width {width:.3f}")
    for level in TAIL_LEVELS:
        for out in OUTPUTS:
            pooled, worst, key = tail_coverage(cells, scales, out, level)
            print(f"{out} at {level:g}: pooled coverage {pooled:.4f}, lowest cell {worst:.3f} ({', '.join(map(str, key))})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
