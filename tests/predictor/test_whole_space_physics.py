"""Over every mode of every board, for real workloads fitted on four of their published AGX Xavier modes: the
predicted epoch time never rises when one knob (cores online, CPU, GPU or memory clock) rises with the others
fixed, power never falls when the cores or the CPU or GPU clock rise, and energy is power x time. Power may fall
as the memory clock rises from its lowest steps (docs/model-evidence.md, E9): by no more than
EMC_POWER_FALL_MAX_REL in one step."""

from __future__ import annotations

import numpy as np
import pytest
from jetpredict.models.catalogue import MODE_FIELDS, device_ids, load_device
from jetpredict.predictor.bundled import fit_workload
from jetpredict.predictor.bundled import predict_modes as predict_on
from model_sweeps import REF

#: Relative slack for rounding in the comparisons (the predictions are exact functions of the knobs).
ROUNDING_REL = 1e-9
#: The knobs along which power must not fall (the memory clock's effect on power has either sign).
POWER_RISING_KNOBS = ("cpu_cores", "cpu_mhz", "gpu_mhz")
#: How far power may fall in one memory-clock step (a share), as E9 in docs/model-evidence.md states it: the
#: largest fall of these fits is 12.0% (ResNet-18 predicted on AGX Orin; 4.3% on AGX Xavier; LeNet-5's 0.8%, ad hoc,
#: 2026-12-06), a regression past 13% fails.
EMC_POWER_FALL_MAX_REL = 0.13


@pytest.fixture(scope="module", params=["resnet18-cifar10", "lenet5-mnist"])
def real_model(request):
    rows = REF[(REF.workload == request.param) & REF["mode"].isin(list("efij"))]
    return fit_workload(rows.reset_index(drop=True))


def _steps_rel(knobs: dict[str, np.ndarray], values: np.ndarray, along: str) -> np.ndarray:
    """The relative change of ``values`` from each mode to the next as knob ``along`` steps up with the other
    knobs fixed."""
    others = [knobs[k] for k in MODE_FIELDS if k != along]
    order = np.lexsort([knobs[along], *others])  # the last key sorts first: groups of equal other knobs
    same_group = np.all([np.diff(k[order]) == 0 for k in others], axis=0)
    v = values[order]
    return (np.diff(v) / v[:-1])[same_group]


@pytest.mark.parametrize("device_id", device_ids())
def test_time_power_and_energy_follow_the_knobs_on_every_mode(real_model, device_id):
    device = load_device(device_id)
    modes = device.modes().arrays()
    p = predict_on(real_model, modes, device=device)
    knobs = {k: np.asarray(getattr(modes, k), dtype=float) for k in MODE_FIELDS}
    assert len(p.epoch_time_s) == len(modes) > 1000
    for knob in MODE_FIELDS:
        assert _steps_rel(knobs, p.epoch_time_s, knob).max() <= ROUNDING_REL, f"time rises with {knob}"
    for knob in POWER_RISING_KNOBS:
        assert _steps_rel(knobs, p.avg_power_w, knob).min() >= -ROUNDING_REL, f"power falls with {knob}"
    assert _steps_rel(knobs, p.avg_power_w, "emc_mhz").min() >= -EMC_POWER_FALL_MAX_REL
    np.testing.assert_allclose(p.epoch_energy_j, p.avg_power_w * p.epoch_time_s, rtol=1e-6)
    assert np.all(np.isfinite(p.epoch_energy_j_high)) and np.all(p.epoch_time_s_low > 0)
