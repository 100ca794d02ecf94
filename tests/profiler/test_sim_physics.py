"""The twin's device physics (profiler/sim/physics.py): peaks, CPU speed, loader parallelism, DVFS and the power model (pure numpy)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from jetpredict.models.catalogue import device_ids, load_device
from jetpredict.models.errors import InputError
from jetpredict.profiler.sim.physics import (
    CALIBRATION_PATH,
    DVFS_KNEE,
    DVFS_V_FLOOR,
    SHARED_DEFAULTS,
    DeviceConstants,
    DevicePhysics,
    load_constants,
)


@pytest.fixture(scope="module")
def agx() -> DevicePhysics:
    return DevicePhysics(load_device("agx-xavier"))


def test_peaks_follow_the_spec_sheet(agx):
    # 512 CUDA cores x 2 x 1377 MHz = 1.41 TFLOP/s; 256-bit LPDDR4x at 2133 MHz = 136.5 GB/s.
    assert agx.peak_fp32_flops(1377.0) == pytest.approx(1.41e12, rel=0.01)
    assert agx.bandwidth_bps(2133.0) == pytest.approx(136.5e9, rel=0.01)
    np.testing.assert_allclose(agx.peak_fp32_flops(np.array([670.0, 1340.0])) / agx.peak_fp32_flops(670.0),
                               [1.0, 2.0])


def test_cpu_speed_follows_the_cpu_clock_and_waits_on_the_memory_clock(agx):
    core_only = DevicePhysics(agx.device, agx.constants, {**agx.shared, "cpu_mem_wait_s_ghz": 0.0})
    assert core_only.cpu_speed(2000.0, 2133.0) == pytest.approx(2 * core_only.cpu_speed(1000.0, 2133.0))
    assert core_only.cpu_speed(1000.0, 1066.0) == pytest.approx(agx.constants.cpu_perf_per_ghz)
    # Time per unit of host work = core time + memory stalls at the memory clock's period: doubling the CPU
    # clock gains less than 2x, halving the memory clock loses speed at any CPU clock.
    t = {(f, e): 1.0 / agx.cpu_speed(f, e) for f in (1000.0, 2000.0) for e in (1066.0, 2133.0)}
    wait_s = agx.shared["cpu_mem_wait_s_ghz"] * 1000.0
    assert t[1000.0, 2133.0] - t[2000.0, 2133.0] == pytest.approx(1.0 / agx.constants.cpu_perf_per_ghz / 2)
    assert t[1000.0, 1066.0] - t[1000.0, 2133.0] == pytest.approx(wait_s / 1066.0 - wait_s / 2133.0)
    assert 1.0 < t[1000.0, 2133.0] / t[2000.0, 2133.0] < 2.0


def test_loader_parallelism_is_min_workers_cores_minus_one():
    par = DevicePhysics.loader_parallelism(np.array([8, 4, 2, 1, 8]), np.array([4, 4, 4, 4, 0]))
    np.testing.assert_allclose(par, [4, 3, 1, 0.5, 0])


def test_voltage_rises_along_the_dvfs_curve(agx):
    steps = np.array(load_device("agx-xavier").gpu_steps_mhz)
    v = agx.voltage_frac("gpu", steps)
    floor = agx.shared["dvfs_v_floor"]
    assert np.all(np.diff(v) >= 0) and v[0] == pytest.approx(floor) and v[-1] == pytest.approx(1.0)
    assert np.all(np.diff(agx.dynamic_scale("gpu", steps)) > 0)


def test_power_grows_with_utilisation_and_clocks(agx):
    space = load_device("agx-xavier").modes().arrays().columns()
    base = agx.base_power_w(space)
    busy = agx.power_w(space, 0.9, 0.5, 0.5)
    assert base.shape == busy.shape == (len(load_device("agx-xavier").modes()),)
    assert np.all(busy > base) and np.all(base > 0)
    maxn = load_device("agx-xavier").maxn
    low = {"cpu_cores": 2, "cpu_mhz": 1200.0, "gpu_mhz": 520.0, "emc_mhz": 1065.6}
    assert agx.power_w(maxn, 1.0, 0.5, 0.5) > agx.power_w(low, 1.0, 0.5, 0.5)
    assert agx.power_w(maxn, 1.0, 0.5, 0.5) > agx.power_w(maxn, 0.5, 0.5, 0.5)


def test_maxn_baseload_is_near_the_published_module_baseload(agx):
    # POMACS 2022 §5.6.2: the module idles at 7.5 W at MAXN (DVFS off); the twin: 8.0 W (+7%).
    assert agx.base_power_w(load_device("agx-xavier").maxn).item() == pytest.approx(7.527, rel=0.08)


def test_baseloads_follow_the_idle_ordering_of_devices():
    base = {d: DevicePhysics(load_device(d)).base_power_w(load_device(d).maxn).item() for d in device_ids()}
    assert base["orin-agx"] > base["agx-xavier"] > base["xavier-nx"] > base["nano"]


@pytest.mark.parametrize("field", ["gpu_util", "cpu_util", "mem_util"])
def test_utilisation_outside_0_1_names_the_field(agx, field):
    utils = {"gpu_util": 0.5, "cpu_util": 0.5, "mem_util": 0.5, field: 1.5}
    with pytest.raises(InputError) as err:
        agx.power_w(load_device("agx-xavier").maxn, **utils)
    assert err.value.field == field


def test_modes_without_knobs_are_an_input_error(agx):
    with pytest.raises(InputError) as err:
        agx.base_power_w({"cpu_mhz": [1.0]})
    assert err.value.field == "modes"
    one = agx.base_power_w(load_device("agx-xavier").maxn)
    assert one.shape == (1,) and one[0] > 0


def test_every_device_has_complete_constants():
    for d in device_ids():
        constants, shared = load_constants(d)
        assert isinstance(constants, DeviceConstants) and constants.basis
        assert 0 < constants.gpu_eff_dense <= 1 and 0 < constants.mem_eff <= 1
        assert shared["roofline_sharpness"] >= 1
        assert 0 < shared["dvfs_v_floor"] < 1 and 0 < shared["dvfs_knee"] < 1


def calibration_without(tmp_path, key: str) -> tuple[DeviceConstants, dict[str, float]]:
    """AGX Xavier's constants from the committed calibration file less the shared constant ``key`` (as an
    older file lacks it)."""
    old = tmp_path / "old.toml"
    text = CALIBRATION_PATH.read_text(encoding="utf-8")
    old.write_text("\n".join(line for line in text.splitlines() if not line.startswith(key)), encoding="utf-8")
    return load_constants("agx-xavier", old)


def test_a_calibration_file_without_a_voltage_floor_uses_the_default(tmp_path):
    constants, shared = calibration_without(tmp_path, "dvfs_v_floor")
    assert shared["dvfs_v_floor"] == DVFS_V_FLOOR
    ph = DevicePhysics(load_device("agx-xavier"), constants, shared)
    assert ph.voltage_frac("gpu", 114.75) == pytest.approx(DVFS_V_FLOOR)


def assert_voltage_leaves_its_floor_at(ph: DevicePhysics, knee: float) -> None:
    """Flat at the floor up to ``knee`` (share of the top clock), halfway to the top voltage halfway above it."""
    floor, top = ph.shared["dvfs_v_floor"], ph.gpu_mhz_max
    assert ph.voltage_frac("gpu", knee * top) == pytest.approx(floor)
    assert ph.voltage_frac("gpu", 0.9 * knee * top) == pytest.approx(floor)
    assert ph.voltage_frac("gpu", (knee + 1) / 2 * top) == pytest.approx((floor + 1) / 2)


def test_the_voltage_leaves_its_floor_at_the_calibrated_knee(agx):
    assert_voltage_leaves_its_floor_at(agx, agx.shared["dvfs_knee"])


def test_a_calibration_file_without_a_knee_uses_the_default(tmp_path):
    constants, shared = calibration_without(tmp_path, "dvfs_knee")
    assert shared["dvfs_knee"] == DVFS_KNEE
    assert_voltage_leaves_its_floor_at(DevicePhysics(load_device("agx-xavier"), constants, shared), DVFS_KNEE)


def test_a_calibration_file_without_a_latency_power_share_counts_the_latency_in_full(tmp_path):
    _, shared = calibration_without(tmp_path, "gpu_latency_power_share")
    assert shared["gpu_latency_power_share"] == SHARED_DEFAULTS["gpu_latency_power_share"] == 1.0


def test_physics_imports_no_torch():
    code = "import sys, jetpredict.profiler.sim.physics; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_memory_streams_through_the_narrower_of_dram_and_the_gpu_load_store_path(agx):
    nbytes = 1e9
    _, t_top, _ = agx.roofline_parts_s(0.0, nbytes, 2, 1377.0, 2133.0)
    _, t_low, _ = agx.roofline_parts_s(0.0, nbytes, 2, 114.75, 2133.0)
    dram = agx.dram_time_s(nbytes, 2133.0)
    gpu_side = nbytes / (agx.shared["gpu_stream_b_per_core_cycle"] * agx.device.specs.cuda_cores * 114.75e6)
    assert t_low == pytest.approx(max(dram, gpu_side)) and t_low > t_top >= dram
    # DRAM's own busy time follows the EMC clock only.
    assert agx.dram_time_s(nbytes, 1066.0) == pytest.approx(2 * dram, rel=0.01)
