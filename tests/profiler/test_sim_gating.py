"""The twin runs a preset that gates part of the GPU as that share of the GPU: its kernels as the whole
GPU would at that share of the clock, its GPU power (switching and idle) scaled by the share."""

from __future__ import annotations

import pytest
from jetpredict.models.catalogue import PowerMode, load_device
from jetpredict.profiler.sim.kernel_costs import load_complexity
from jetpredict.profiler.sim.twin import DevicePhysics, Twin


def _gated_and_custom(device_id: str, preset: str, workload: str) -> tuple[dict, dict]:
    d = load_device(device_id)
    p = d.preset(preset)
    twin = Twin(DevicePhysics(d), load_complexity(workload))
    return twin.epoch(p), twin.epoch(PowerMode("custom", *p.knobs()))


@pytest.mark.parametrize("device_id, preset", [("orin-nx", "15W"), ("orin-agx", "MODE_15W"),
                                               ("agx-xavier", "MODE_10W")])
def test_a_gated_preset_trains_a_gpu_bound_network_slower_on_less_power(device_id, preset):
    gated, custom = _gated_and_custom(device_id, preset, "resnet18-cifar10")
    assert gated["epoch_time_s"][0] > 1.5 * custom["epoch_time_s"][0]
    assert gated["avg_power_w"][0] < 0.85 * custom["avg_power_w"][0]
    assert gated["base_power_w"][0] < custom["base_power_w"][0]


def test_a_launch_bound_network_hardly_notices_the_gating():
    gated, custom = _gated_and_custom("orin-nx", "15W", "lenet5-mnist")
    assert gated["epoch_time_s"][0] == pytest.approx(custom["epoch_time_s"][0], rel=0.05)


def test_an_ungated_preset_is_the_custom_mode_at_its_clocks():
    gated, custom = _gated_and_custom("orin-nx", "25W", "resnet18-cifar10")
    assert gated["epoch_time_s"][0] == custom["epoch_time_s"][0]
    assert gated["avg_power_w"][0] == custom["avg_power_w"][0]


def test_the_twin_runs_a_mode_named_after_a_preset_at_its_knobs_as_that_preset():
    """A ``--modes`` file row (or an adaptive pick) labelled 15W at 15W's clocks reaches the controller as a
    plain mode: the twin runs it as the preset, as ``nvpmodel -m`` does on a board, since its row is fitted
    as the gated preset it names. Another label at those clocks stays a custom mode."""
    from jetpredict.profiler.sim.controller import SimulatedController, SimulatedDevice

    d = load_device("orin-nx")
    p = d.preset("15W")
    controller = SimulatedController(SimulatedDevice(d))
    controller.apply(PowerMode("15w", *p.knobs()))
    assert controller.current() is p
    controller.apply(PowerMode("custom", *p.knobs()))
    assert controller.current().mode == "custom" and getattr(controller.current(), "gpu_share", 1.0) == 1.0


def test_a_row_named_after_a_gated_preset_is_measured_as_that_preset(tmp_path):
    """The runner hands the backend the mode as given: a ``--modes`` row (or an adaptive pick) named 7W ran
    with the whole GPU (Orin Nano ResNet-18: 514 s, against 974 s for ``--modes 7W``) and was stored under
    the gated preset's name, which the fit reads as half the GPU."""
    from jetpredict.models.profile_files import read_profile_csv

    from jetpredict.cli import main

    rows = tmp_path / "m7.csv"
    rows.write_text("mode,cpu_cores,cpu_mhz,gpu_mhz,emc_mhz\n7W,4,960,408,2133\n")
    got = []
    for modes, out in ((str(rows), tmp_path / "by_row.csv"), ("7W", tmp_path / "by_name.csv")):
        assert main(["profile", "--device", "sim:orin-nano", "--workload", "resnet18-cifar10", "--modes", modes,
                     "--minibatches", "5", "--warmup", "0", "--no-progress", "--out", str(out)]) == 0
        got.append(read_profile_csv(out).iloc[0])
    assert got[0]["epoch_time_s"] == pytest.approx(got[1]["epoch_time_s"], rel=1e-9)
    # The idle power before the run too (it was the whole GPU's: 3.49 W against the preset's 3.35 W).
    assert got[0]["base_power_w"] == pytest.approx(got[1]["base_power_w"], rel=0.01)
