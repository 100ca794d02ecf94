"""Recompute the interval scales of ``predictor.model.INTERVAL_SCALES`` on real data:
``python -m tools.calibrate_intervals``.

Prints the calibrated scales and, per (target, reference, design size) cell, the coverage and median
width of the nominal 90% time / power / energy intervals under them (see :mod:`predictor.calibration`).
Paste the scales into ``INTERVAL_SCALES`` when they change.
"""

from __future__ import annotations

import sys

import numpy as np
from jetpredict.predictor.calibration import OUTPUTS, calibrate, coverage, residual_cells
from jetpredict.predictor.model import Z90


def main() -> int:
    cells = residual_cells()
    scales = calibrate(cells)
    print(f"INTERVAL_SCALES = IntervalScales(time={scales.time}, power={scales.power}, energy={scales.energy})")
    for out in OUTPUTS:
        s = getattr(scales, out)
        pooled = np.vstack([c[out] for c in cells.values()])
        print(f"{out}: pooled coverage {coverage(s, pooled):.3f} (at scale 1: {coverage(1.0, pooled):.3f})")
        for key, c in cells.items():
            width = np.median(2 * Z90 * np.sqrt((s * c[out][:, 1]) ** 2 + c[out][:, 2] ** 2))
            print(f"  {key[0]:20s} {key[1]:16s} {key[2]} modes: coverage {coverage(s, c[out]):.3f} "
                  f"median width {width:.3f}", file=sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
