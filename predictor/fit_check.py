"""How closely a fitted model reproduces its own profiled rows: evidence that its form misses the workload.

The fit's noise estimate takes the rows' scatter about the model as run-to-run noise, so intervals widen to
match; a user should also hear that the form does not fit, since a prediction far from the profiled modes may
then be off by more than its interval says (twin ResNet-18 on Orin Nano over 40 random modes: the rows
scatter 25% about the model (ad hoc), docs/model-evidence.md E1).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from jetpredict.predictor.constants import LACK_OF_FIT_REL
from jetpredict.predictor.model import WorkloadModel
from jetpredict.predictor.terms import ProfileArrays


@dataclass(frozen=True)
class RowScatter:
    """Epoch times of a model's profiled rows against the model's own predictions there.

    ``rms_rel``: RMS of ln(predicted / measured) over the rows; ``worst_mode``: the row's mode label where
    the prediction misses most, by ``worst_rel`` (predicted / measured - 1); ``rows``: rows compared.
    """

    rms_rel: float
    worst_mode: str
    worst_rel: float
    rows: int

    @property
    def form_misses(self) -> bool:
        """The scatter is more than run-to-run noise explains (:data:`LACK_OF_FIT_REL`)."""
        return self.rms_rel > LACK_OF_FIT_REL

    def describe(self) -> str:
        way = "slow" if self.worst_rel > 0 else "fast"
        return (f"the {self.rows} profiled row(s) scatter {self.rms_rel:.1%} (RMS) about the fitted model, "
                f"{self.worst_mode} predicted {abs(self.worst_rel):.0%} {way}")


def time_scatter(model: WorkloadModel, rows: pd.DataFrame | None = None) -> RowScatter | None:
    """The scatter of ``model``'s profiled epoch times about its predictions (None for a model moved to
    another device, whose rows ran elsewhere, or one without rows). ``rows``: the frame it was fitted on,
    where the caller holds it (an upload), instead of rebuilding one from ``model.training_rows``."""
    if model.cross_device or not model.training_rows:
        return None
    frame = pd.DataFrame(list(model.training_rows)) if rows is None else rows.reset_index(drop=True)
    measured = ProfileArrays.from_frame(frame)
    predicted = model.parts(measured.modes)[0].epoch_s
    ln_ratio = np.log(predicted / measured.epoch_time_s)
    worst = int(np.argmax(np.abs(ln_ratio)))
    return RowScatter(rms_rel=float(np.sqrt(np.mean(ln_ratio ** 2))), worst_mode=str(frame["mode"].iloc[worst]),
                      worst_rel=float(np.expm1(ln_ratio[worst])), rows=len(frame))


def lack_of_fit(model: WorkloadModel) -> RowScatter | None:
    """:func:`time_scatter` when it is more than run-to-run noise explains, else None."""
    scatter = time_scatter(model)
    return scatter if scatter is not None and scatter.form_misses else None


def lack_of_fit_note(model: WorkloadModel) -> str | None:
    """One sentence for people when ``model``'s form misses its own rows (None when it does not)."""
    scatter = lack_of_fit(model)
    if scatter is None:
        return None
    return (f"{scatter.describe()}: more than run-to-run noise explains (> {LACK_OF_FIT_REL:.0%}), so the "
            "model's form misses this workload here; its intervals carry the scatter as noise, and modes far "
            "from the profiled ones may be off by more")


#: :func:`fit_caveats` per model object, held weakly (a refit is a new object): the scatter predicts every
#: profiled row, which an every-mode answer must not pay per request.
_CAVEATS: weakref.WeakKeyDictionary[WorkloadModel, tuple[dict[str, str], float | None]] = weakref.WeakKeyDictionary()
_CAVEATS_LOCK = threading.Lock()


def fit_caveats(model: WorkloadModel, rows: pd.DataFrame | None = None) -> dict[str, object]:
    """What ``jetpredict fit`` says of ``model`` besides its provenance: ``aliased_knobs`` (knob -> why, the
    knobs its profiled modes do not separate) and ``rows_scatter_rel`` (:func:`time_scatter`'s RMS, a ratio;
    None where it has none). Computed once per model object; ``rows``: as :func:`time_scatter`'s."""
    cached = _CAVEATS.get(model)
    if cached is None:
        scatter = time_scatter(model, rows)
        # Six significant digits: a figure every answer form (JSON, CSV, Arrow) and the stored fit say alike.
        cached = (dict(model.aliased_knobs()), None if scatter is None else float(f"{scatter.rms_rel:.6g}"))
        with _CAVEATS_LOCK:
            _CAVEATS[model] = cached
    return {"aliased_knobs": dict(cached[0]), "rows_scatter_rel": cached[1]}


def merged_caveats(parts: Iterable[Mapping[str, object]]) -> dict[str, object]:
    """:func:`fit_caveats` of an answer resting on several fits (a fleet plan's client devices): every knob
    some fit does not separate (with the first such fit's why) and the largest scatter (None where no fit
    states one)."""
    aliased: dict[str, str] = {}
    scatters: list[float] = []
    for part in parts:
        for knob, why in dict(part.get("aliased_knobs") or {}).items():
            aliased.setdefault(str(knob), str(why))
        if part.get("rows_scatter_rel") is not None:
            scatters.append(float(part["rows_scatter_rel"]))  # type: ignore[arg-type]
    return {"aliased_knobs": aliased, "rows_scatter_rel": max(scatters) if scatters else None}
