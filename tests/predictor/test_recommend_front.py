"""The Pareto front a recommendation answers holds its ``best``, and no member of it dominates ``best``:
the front is built over the feasible modes the out-of-range rule lets stand, the modes ``best`` is picked
from, so a discarded extrapolated mode never shows on it (brute force over devices, objectives and caps)."""

from __future__ import annotations

import numpy as np
import pytest
from jetpredict.models.catalogue import load_device
from jetpredict.predictor import recommend as rec
from jetpredict.predictor import service
from jetpredict.predictor.bundled import fit_workload
from jetpredict.predictor.limits import OBJECTIVES


@pytest.fixture(scope="module")
def lenet_four(lenet):
    """LeNet-5 fitted on 4 spread published AGX Xavier modes: most of every device's space is extrapolated."""
    four = lenet.iloc[np.linspace(0, len(lenet) - 1, 4).round().astype(int)].reset_index(drop=True)
    return fit_workload(four, load_device("agx-xavier"))


def _point(r: dict) -> tuple[float, float]:
    return r["epoch_time_s"], r["epoch_energy_j"]


@pytest.mark.parametrize("device", ["agx-xavier", "orin-agx", "nano", "orin-nano"])
@pytest.mark.parametrize("objective", list(OBJECTIVES))
def test_best_is_on_the_front_and_no_member_dominates_it(lenet_four, device, objective):
    caps = [None, *load_device(device).power_caps_w()]
    preset_times = service.predict(lenet_four, "presets", device=device)["epoch_time_s_high"]
    time_caps = [None, *(float(t) for t in np.quantile(preset_times, [0.25, 0.5, 1.0]))]
    answered = 0
    for max_power_w in caps:
        for max_epoch_time_s in time_caps:
            out = service.recommend(lenet_four, objective, max_power_w=max_power_w, max_epoch_time_s=max_epoch_time_s,
                                    device=device)
            if out.best is None:
                continue
            answered += 1
            best = _point(out.best)
            keys = [(r["mode"], *_point(r)) for r in out.pareto]
            assert (out.best["mode"], *best) in keys, (max_power_w, max_epoch_time_s, out.best["mode"])
            for r in out.pareto:
                t, e = _point(r)
                assert not (t <= best[0] and e <= best[1] and (t, e) != best), (r["mode"], out.best["mode"])
    assert answered >= 8


def test_the_front_holds_no_mode_the_rule_discards():
    """Mode 1 is extrapolated and looks best on both, but its upper bound is not below the in-range best."""
    import pandas as pd

    df = pd.DataFrame({"mode": ["in", "out", "in2"], "epoch_time_s": [10.0, 5.0, 12.0],
                       "epoch_time_s_high": [11.0, 20.0, 13.0], "epoch_energy_j": [100.0, 50.0, 90.0],
                       "epoch_energy_j_high": [110.0, 200.0, 95.0], "avg_power_w_high": [10.0, 10.0, 8.0],
                       "extrapolated_knobs": ["", "gpu_mhz", ""]})
    choice = rec.choose(df, "min-time", None, None, 0.9)
    assert choice.best == 0 and choice.preferred_in_range
    assert choice.pareto.tolist() == [0, 2]
