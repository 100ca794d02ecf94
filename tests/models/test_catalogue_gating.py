"""Presets that power only part of the GPU (nvpmodel ``TPC_PG_MASK``): the catalogue's transcription and
how a mode's label and knobs tell a gated preset from the custom mode at its clocks.

Expected shares are read off the L4T nvpmodel files (TPC_PG_MASK: a set bit gates one TPC of two SMs),
not from the catalogue, so a wrong TOML value fails here.
"""

from __future__ import annotations

from typing import get_type_hints

import numpy as np
import pytest
import tomllib
from jetpredict.models.catalogue import (
    DEVICES_DIR,
    DeviceSpecs,
    ModeArrays,
    PowerMode,
    list_devices,
    load_device,
    step_at_or_below,
)
from jetpredict.models.device_toml import DeviceFileError, check_device_table

#: Powered share per gated preset: TPCs left on / TPCs of MAXN (agx-xavier nvpmodel_t194.conf MODE_10W mask
#: 5 of 4 TPCs; orin-agx p3701_0000 MODE_15W 248 and MODE_30W 240 of 8; orin-nx p3767_0000 10W/15W 252
#: against MAXN's 240, 4 TPCs; orin-nano p3767_0003 7W 252 against 240).
GATED = {("agx-xavier", "MODE_10W"): 2 / 4, ("orin-agx", "MODE_15W"): 3 / 8, ("orin-agx", "MODE_30W"): 4 / 8,
         ("orin-nx", "10W"): 2 / 4, ("orin-nx", "15W"): 2 / 4, ("orin-nano", "7W"): 2 / 4}


@pytest.mark.parametrize("device", list_devices(), ids=lambda d: d.id)
def test_every_preset_powers_the_gpu_share_its_mask_leaves(device):
    for preset in device.presets:
        assert preset.gpu_share == pytest.approx(GATED.get((device.id, preset.mode), 1.0)), preset.mode


def test_a_mode_is_a_gated_preset_only_by_its_label_and_knobs():
    d = load_device("orin-nx")
    p = d.preset("15W")
    modes = ModeArrays.from_modes([p, p, p, d.maxn])
    labels = ["15w", "custom", "10W", "MAXN"]  # 10W's label at 15W's clocks is not 10W
    assert d.gpu_shares(labels, modes).tolist() == [0.5, 1.0, 1.0, 1.0]
    table = {**ModeArrays.from_modes([p]).as_dict(), "mode": [" 15W "]}
    assert d.labelled_modes(table).gpu_share.tolist() == [0.5]
    assert d.labelled_modes(ModeArrays.from_modes([p]).as_dict()).gpu_share.tolist() == [1.0]


def test_the_share_travels_with_the_modes_and_makes_another_setting():
    d = load_device("agx-xavier")
    gated = d.preset("MODE_10W")
    modes = ModeArrays(*np.array([gated.knobs()] * 2, dtype=float).T, gpu_share=[gated.gpu_share, 1.0])
    assert modes.take([0]).gpu_share.tolist() == [0.5] and modes.gated.tolist() == [True, False]
    assert modes.gpu_throughput_mhz.tolist() == [260.0, 520.0]
    assert modes.distinct_count() == 2
    assert ModeArrays.from_modes(d.presets).gated.sum() == 1


def test_a_share_beyond_the_gpu_is_refused():
    path = DEVICES_DIR / "orin-nx.toml"
    raw = tomllib.loads(path.read_text())
    raw["presets"][1]["gpu_sms_online"] = 9
    with pytest.raises(DeviceFileError, match=r"presets\[1\]\.gpu_sms_online: preset '10W': 9 must be in 1\.\.8"):
        check_device_table(raw, path, get_type_hints(DeviceSpecs))


@pytest.mark.parametrize("device_id, preset, runs", [
    # GPU cap 408 between the grid's 318.75 and 420.75 steps, but a step of the r35 table its presets apply to
    ("orin-agx", "MODE_15W", (4, 1113.6, 408.0, 2133.0)),
    ("agx-xavier", "MODE_10W", (2, 1190.4, 420.75, 1065.6)),  # caps CPU 1200, GPU 520
    ("agx-xavier", "MODE_15W", (4, 1190.4, 624.75, 1331.2)),  # caps CPU 1200, GPU 670
    ("nano", "5W", (2, 825.6, 614.4, 1600.0)),  # caps CPU 918, GPU 640
    ("orin-nx", "MAXN", (8, 1984.0, 918.0, 3199.0)),  # caps that are steps run at themselves
])
def test_a_preset_runs_each_cpu_and_gpu_cap_at_the_highest_step_at_or_below_it(device_id, preset, runs):
    d = load_device(device_id)
    steps = d.preset_steps(d.preset(preset))
    assert steps.knobs() == runs and steps.mode == preset and steps.gpu_share == d.preset(preset).gpu_share


def test_a_cap_below_every_step_runs_at_the_lowest():
    assert step_at_or_below((306.0, 408.0), 100.0) == 306.0
    assert step_at_or_below((306.0, 408.0), 408.0) == 408.0


def test_a_gated_preset_row_at_the_steps_its_caps_run_at_keeps_its_gating():
    """A real board's MODE_10W row records the CPU at 1190.4 and the GPU at 420.75 MHz (its 1200 and 520 MHz caps
    resolved to the steps below): it is still the gated preset, 2 of 4 TPCs powered; a custom mode at those
    clocks is not."""
    d = load_device("agx-xavier")
    row = PowerMode("MODE_10W", 2, 1190.4, 420.75, 1065.6)
    other = PowerMode("MODE_10W", 2, 1190.4, 522.75, 1065.6)  # the name at clocks no MODE_10W runs
    modes = ModeArrays.from_modes([row, row, other])
    assert d.gpu_shares(["MODE_10W", "custom", "MODE_10W"], modes).tolist() == [0.5, 1.0, 1.0]
    assert d.labelled_modes({**ModeArrays.from_modes([row]).as_dict(), "mode": ["mode_10w"]}).gpu_share == [0.5]
    assert d.as_preset(row) == d.preset("MODE_10W") and d.as_preset(other) == other
