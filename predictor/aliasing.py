"""How much wider a fit's intervals are because its profiled modes alias two knobs.

Two knobs are aliased when every profiled mode moves them together (:meth:`WorkloadModel.aliased_pairs`):
the fit cannot split their effects, so the split is the prior's and the intervals carry its doubt. The
widening is a counterfactual of one more profiled mode. Refit with a pseudo-row (the model's own
predictions, :func:`jetpredict.predictor.adaptive.pseudo_row`) at the device's mode inside the profiled
ranges that breaks the pair's relation most. The ratio of the fit's interval widths (ln high / low) to the
refit's, over every mode of the device, with the same interval scales, is what the alias costs: what
profiling that one mode would gain. (A pseudo-row at a profiled mode is no control: the fit takes a repeat
of a mode as that mode's evidence, not as one more mode.)
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from jetpredict.models.catalogue import MODE_FIELDS, Device, ModeArrays
from jetpredict.models.errors import InputError
from jetpredict.predictor import service
from jetpredict.predictor.adaptive import pseudo_row
from jetpredict.predictor.bundled import fit_workload, predict_modes
from jetpredict.predictor.constants import OUTSIDE_TOLERANCE_LN
from jetpredict.predictor.model import WorkloadModel
from jetpredict.predictor.reference import DeviceReference

#: Outputs whose interval widening is reported.
WIDENED_OUTPUTS = ("epoch_time_s", "epoch_energy_j")


@dataclass(frozen=True)
class AliasWidening:
    """One aliased pair's cost: ``separating_mode`` (mode columns) would split ``knobs``; per output
    (``WIDENED_OUTPUTS``), the median and largest ratio of interval widths over the device's modes."""

    knobs: tuple[str, str]
    separating_mode: dict[str, object]
    median: dict[str, float]
    largest: dict[str, float]

    def describe(self) -> str:
        m = self.separating_mode
        where = (f"{m['mode']}: {int(m['cpu_cores'])} cores, CPU {m['cpu_mhz']:g}, GPU {m['gpu_mhz']:g}, "
                 f"EMC {m['emc_mhz']:g} MHz")
        return (f"{self.knobs[0]} with {self.knobs[1]}: time intervals {self.median['epoch_time_s']:.2f}x as "
                f"wide (median over the device's modes; up to {self.largest['epoch_time_s']:.2f}x), energy "
                f"{self.median['epoch_energy_j']:.2f}x, as after profiling one mode that separates them ({where})")


def separating_mode(rows: pd.DataFrame, pair: tuple[str, str], candidates: pd.DataFrame,
                    ranges: dict[str, tuple[float, float]]) -> int | None:
    """Position in ``candidates`` of the candidate inside ``ranges`` farthest off the line the profiled modes
    draw between the pair's log knobs (the nearest one to a profiled mode among equals); None when no
    candidate inside the ranges leaves the line."""
    x, y = (np.log(rows[k].to_numpy(dtype=float)) for k in pair)
    slope, intercept = np.polyfit(x, y, 1)
    knobs = np.log(candidates[list(MODE_FIELDS)].to_numpy(dtype=float))
    low = np.log([ranges[k][0] for k in MODE_FIELDS])
    high = np.log([ranges[k][1] for k in MODE_FIELDS])
    inside = np.all((knobs >= low - OUTSIDE_TOLERANCE_LN) & (knobs <= high + OUTSIDE_TOLERANCE_LN), axis=1)
    cx, cy = (knobs[:, MODE_FIELDS.index(k)] for k in pair)
    off = np.where(inside, np.abs(cy - (slope * cx + intercept)), 0.0)
    if off.max() <= OUTSIDE_TOLERANCE_LN:
        return None
    profiled = np.unique(np.log(rows[list(MODE_FIELDS)].to_numpy(dtype=float)), axis=0)
    far = np.flatnonzero(off >= off.max() - 1e-9)
    dist = np.abs(knobs[far, None, :] - profiled[None, :, :]).sum(axis=2)  # (far candidates, modes), log L1
    return int(far[int(np.argmin(dist.min(axis=1)))])


def alias_widening(model: WorkloadModel, rows: pd.DataFrame, device: Device,
                   reference: DeviceReference | pd.DataFrame | None = None) -> list[AliasWidening]:
    """Per aliased knob pair of ``model`` (fitted on ``rows`` with ``reference``), what the alias costs the
    intervals over every mode of ``device`` (see the module docstring); [] when nothing is aliased."""
    pairs = model.aliased_pairs()
    if not pairs or not model.profiled_ranges:
        return []
    rows = rows.reset_index(drop=True)
    modes = service.resolve_modes(device, "all")
    arrays = ModeArrays.from_frame(modes)
    template = rows.iloc[-1].to_dict()
    out: list[AliasWidening] = []
    for pair in pairs:
        sep = separating_mode(rows, pair, modes, dict(model.profiled_ranges))
        if sep is None:
            continue
        chosen = modes.iloc[[sep]]
        at = {k: v[0] for k, v in predict_modes(model, ModeArrays.from_frame(chosen)).columns().items()
              if isinstance(v, np.ndarray)}
        extra = pd.DataFrame([pseudo_row(template, chosen.iloc[0], at)])
        try:
            refit = fit_workload(pd.concat([rows, extra], ignore_index=True), device, reference)
        except InputError:  # a report on a fit that stands: a refit it cannot make leaves the pair out
            continue
        widths = [predict_modes(m, arrays).columns()
                  for m in (model, replace(refit, interval_scales=model.interval_scales))]
        ratio = {o: np.log(widths[0][f"{o}_high"] / widths[0][f"{o}_low"])
                 / np.log(widths[1][f"{o}_high"] / widths[1][f"{o}_low"]) for o in WIDENED_OUTPUTS}
        out.append(AliasWidening(pair, {k: modes.iloc[sep][k] for k in ("mode", *MODE_FIELDS)},
                                 {o: float(np.median(r)) for o, r in ratio.items()},
                                 {o: float(np.max(r)) for o, r in ratio.items()}))
    return out
