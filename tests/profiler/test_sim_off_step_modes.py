"""The twin runs a custom mode as a board does: each clock at the step of the device's table nearest the one
asked (the rule ``jetpredict apply`` and the real controllers use), and reads back those steps, so a row records
the steps run and the sidecar says where they differ from the mode asked for. Presets and on-step modes as before."""

from __future__ import annotations

import json

import pytest
from jetpredict.models.catalogue import PowerMode, load_device
from jetpredict.models.profile_files import read_profile_csv
from jetpredict.profiler.apply import catalogue_plan, parse_mode
from jetpredict.profiler.sim import simulated_rig

from jetpredict.cli import main


def _profile(tmp_path, device: str, mode: str, name: str = "a") -> tuple[dict, dict]:
    """The row and the sidecar's mode record of one mode profiled on the twin."""
    out = tmp_path / f"{name}.csv"
    assert main(["profile", "--device", f"sim:{device}", "--workload", "lenet5-mnist", "--modes", mode,
                 "--minibatches", "4", "--no-progress", "--out", str(out)]) == 0
    row = read_profile_csv(out).iloc[0].to_dict()
    return row, json.loads((tmp_path / f"{name}.csv.json").read_text())["modes"][0]


@pytest.mark.parametrize("device, asked, runs", [
    ("agx-xavier", "3c-1234-675.75-1065.6", (3, 1267.2, 675.75, 1065.6)),
    ("agx-xavier", "4c-1190-675-1065", (4, 1190.4, 675.75, 1065.6)),
    ("orin-agx", "12c-2201.6-200-3199", (12, 2201.6, 216.75, 3199.0)),
])
def test_an_off_step_mode_runs_and_records_the_steps_the_board_runs(tmp_path, device, asked, runs):
    """It recorded cpu_mhz 1234 (GPU 200 MHz on Orin AGX), read back as asked with no note: clocks no board has."""
    row, record = _profile(tmp_path, device, asked)
    assert (row["cpu_cores"], row["cpu_mhz"], row["gpu_mhz"], row["emc_mhz"]) == runs and row["mode"] == asked
    # The steps `jetpredict apply --board DEVICE --dry-run` says the board runs for that mode.
    mode = parse_mode(load_device(device), asked)
    assert catalogue_plan(load_device(device), mode, "nvpmodel").mode.knobs() == runs
    assert tuple(record["read_back"][k] for k in ("cpu_cores", "cpu_mhz", "gpu_mhz", "emc_mhz")) == runs
    assert record["requested"]["cpu_mhz"] == mode.cpu_mhz and record["requested"]["gpu_mhz"] == mode.gpu_mhz
    moved = {k: got for k, want, got in zip(("cpu_mhz", "gpu_mhz", "emc_mhz"), mode.knobs()[1:], runs[1:], strict=True)
             if want != got}
    assert moved and all(any(f"'s {k} to {got:g}, not the" in n for n in record["notes"])
                         for k, got in moved.items()), record["notes"]


def test_an_off_step_mode_is_simulated_at_its_steps(tmp_path):
    """The twin's physics runs the step, not the clock asked for: same figures as the on-step mode itself."""
    off, _ = _profile(tmp_path, "agx-xavier", "3c-1234-675.75-1065.6", "off")
    on, record = _profile(tmp_path, "agx-xavier", "3c-1267.2-675.75-1065.6", "on")
    for column in ("epoch_time_s", "epoch_energy_j", "avg_power_w"):
        assert off[column] == on[column], column
    assert record["read_back"] == record["requested"]
    assert not [n for n in record["notes"] if "asked" in n or "read-back" in n], record["notes"]


def test_presets_and_on_step_modes_read_back_as_applied():
    """A preset keeps its caps and gating (Orin AGX's MODE_15W at 408 MHz, a step of its presets' own table);
    an on-step custom mode reads back as asked."""
    d = load_device("orin-agx")
    controller = simulated_rig(d, "lenet5-mnist").controller
    preset = d.preset("MODE_15W")
    controller.apply(preset)
    assert controller.read_back() is preset and controller.caps_of(preset) is preset
    on_step = PowerMode("4c-1113.6-420.75-2133", 4, 1113.6, 420.75, 2133.0)
    controller.apply(on_step)
    assert controller.read_back() == on_step == controller.caps_of(on_step)
