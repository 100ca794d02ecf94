"""How much wider a fit's intervals are because its profiled modes alias two knobs.

Two knobs are aliased when every profiled mode moves them together (:meth:`WorkloadModel.aliased_pairs`):
the fit cannot split their effects, so the split is the prior's and the intervals carry its doubt. The
widening is a counterfactual of one more profiled mode. Refit once with a pseudo-row (the model's own
predictions, :func:`jetpredict.predictor.adaptive.pseudo_row`) at the device's mode inside the profiled
ranges that breaks the pair's relation most, and once with a pseudo-row at the unprofiled mode on the
pair's line nearest it (one mode more, the alias kept). The ratio of the two refits' interval widths
(ln high / low), over every mode of the device, is what the alias costs; the extra mode and the interval
scales are the same in both. Where no unprofiled mode lies on the line, the fit itself is the control (the
ratio then also counts what any one more mode gains). A pseudo-row at a profiled mode is no control: the
fit takes a repeat as that mode's evidence, not as one more mode.
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
    #: True when the control was a mode on the pair's line; False: the fit itself (no such mode).
    on_line_control: bool = True

    @property
    def pinned(self) -> bool:
        """True when separating the pair would not narrow the median interval of any output (every median
        ratio <= 1): the profiled modes and the prior already pin the split."""
        return all(self.median[o] <= 1.0 for o in WIDENED_OUTPUTS)

    def describe(self) -> str:
        m = self.separating_mode
        where = (f"{m['mode']}: {int(m['cpu_cores'])} cores, CPU {m['cpu_mhz']:g}, GPU {m['gpu_mhz']:g}, "
                 f"EMC {m['emc_mhz']:g} MHz")
        kept = ("one more mode that keeps them together leaves" if self.on_line_control else
                "the fit as it stands has (no unprofiled mode keeps them together, so this also counts what "
                "any one more mode gains)")
        # A ratio <= 1 is no cost: saying the intervals widen would be false.
        verdict = ("the profiled modes already pin the split (no wider intervals at the median): "
                   if self.pinned else "")
        return (f"{self.knobs[0]} with {self.knobs[1]}: {verdict}{kept} time intervals "
                f"{self.median['epoch_time_s']:.2f}x as wide (median over the device's modes; up to "
                f"{self.largest['epoch_time_s']:.2f}x), energy {self.median['epoch_energy_j']:.2f}x, as one mode "
                f"that separates them ({where})")


def _line_geometry(rows: pd.DataFrame, pair: tuple[str, str], candidates: pd.DataFrame,
                   ranges: dict[str, tuple[float, float]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per candidate: its log knobs, whether it lies inside ``ranges``, how far (ln) it lies off the line
    the profiled modes draw between the pair's log knobs (0 outside the ranges); and the profiled modes'
    distinct log knobs."""
    x, y = (np.log(rows[k].to_numpy(dtype=float)) for k in pair)
    slope, intercept = np.polyfit(x, y, 1)
    knobs = np.log(candidates[list(MODE_FIELDS)].to_numpy(dtype=float))
    low = np.log([ranges[k][0] for k in MODE_FIELDS])
    high = np.log([ranges[k][1] for k in MODE_FIELDS])
    inside = np.all((knobs >= low - OUTSIDE_TOLERANCE_LN) & (knobs <= high + OUTSIDE_TOLERANCE_LN), axis=1)
    cx, cy = (knobs[:, MODE_FIELDS.index(k)] for k in pair)
    off = np.where(inside, np.abs(cy - (slope * cx + intercept)), 0.0)
    profiled = np.unique(np.log(rows[list(MODE_FIELDS)].to_numpy(dtype=float)), axis=0)
    return knobs, inside, off, profiled


def separating_mode(rows: pd.DataFrame, pair: tuple[str, str], candidates: pd.DataFrame,
                    ranges: dict[str, tuple[float, float]]) -> int | None:
    """Position in ``candidates`` of the candidate inside ``ranges`` farthest off the line the profiled modes
    draw between the pair's log knobs (the nearest one to a profiled mode among equals); None when no
    candidate inside the ranges leaves the line."""
    knobs, _, off, profiled = _line_geometry(rows, pair, candidates, ranges)
    if off.max() <= OUTSIDE_TOLERANCE_LN:
        return None
    far = np.flatnonzero(off >= off.max() - 1e-9)
    dist = np.abs(knobs[far, None, :] - profiled[None, :, :]).sum(axis=2)  # (far candidates, modes), log L1
    return int(far[int(np.argmin(dist.min(axis=1)))])


def on_line_mode(rows: pd.DataFrame, pair: tuple[str, str], candidates: pd.DataFrame,
                 ranges: dict[str, tuple[float, float]], near: int) -> int | None:
    """Position in ``candidates`` of the unprofiled candidate inside ``ranges`` on the pair's line (the
    alias kept) nearest candidate ``near`` (log L1); None when every such mode was profiled."""
    knobs, inside, off, profiled = _line_geometry(rows, pair, candidates, ranges)
    unprofiled = np.abs(knobs[:, None, :] - profiled[None, :, :]).sum(axis=2).min(axis=1) > OUTSIDE_TOLERANCE_LN
    on = np.flatnonzero(inside & (off <= OUTSIDE_TOLERANCE_LN) & unprofiled)
    if not on.size:
        return None
    return int(on[int(np.argmin(np.abs(knobs[on] - knobs[near]).sum(axis=1)))])


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
        ranges = dict(model.profiled_ranges)
        sep = separating_mode(rows, pair, modes, ranges)
        if sep is None:
            continue
        control = on_line_mode(rows, pair, modes, ranges, sep)
        chosen = modes.iloc[[sep] if control is None else [sep, control]]
        predicted = predict_modes(model, ModeArrays.from_frame(chosen)).columns()
        refits = []
        for i in range(len(chosen)):
            at = {k: v[i] for k, v in predicted.items() if isinstance(v, np.ndarray)}
            extra = pd.DataFrame([pseudo_row(template, chosen.iloc[i], at)])
            try:
                refit = fit_workload(pd.concat([rows, extra], ignore_index=True), device, reference)
            except InputError:  # a report on a fit that stands: a refit it cannot make leaves the pair out
                break
            refits.append(replace(refit, interval_scales=model.interval_scales))
        if len(refits) < len(chosen):
            continue
        separated, kept = refits[0], (model if control is None else refits[1])
        widths = [predict_modes(m, arrays).columns() for m in (kept, separated)]
        ratio = {o: np.log(widths[0][f"{o}_high"] / widths[0][f"{o}_low"])
                 / np.log(widths[1][f"{o}_high"] / widths[1][f"{o}_low"]) for o in WIDENED_OUTPUTS}
        out.append(AliasWidening(pair, {k: modes.iloc[sep][k] for k in ("mode", *MODE_FIELDS)},
                                 {o: float(np.median(r)) for o, r in ratio.items()},
                                 {o: float(np.max(r)) for o, r in ratio.items()}, control is not None))
    return out
