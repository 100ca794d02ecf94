"""The bundled simulated reference sweeps: complete, honestly labelled, small, and in step with the twin."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from jetpredict.models.catalogue import device_ids, load_device
from jetpredict.models.profile_files import read_profile_csv
from jetpredict.profiler.builtin_workloads import BUILTIN_WORKLOADS
from jetpredict.profiler.sim.kernel_costs import load_complexity
from jetpredict.profiler.sim.physics import DevicePhysics
from jetpredict.profiler.sim.twin import Twin

from tools.make_reference_sweeps import REFERENCE_DIR, main, spread_modes


@pytest.mark.parametrize("device", device_ids())
def test_every_device_has_a_simulated_sweep(device):
    path = REFERENCE_DIR / f"{device}-simulated.csv"
    assert path.stat().st_size < 400 * 1024
    df = read_profile_csv(path)
    assert set(df["source"]) == {"simulated"} and set(df["power_meter"]) == {f"sim:{device}"}
    assert set(df["workload"]) == set(BUILTIN_WORKLOADS)
    per_workload = df.groupby("workload")["mode"].nunique()
    assert (per_workload >= min(300, len(load_device(device).modes()))).all()
    assert df[["epoch_time_s", "avg_power_w", "base_power_w"]].notna().all().all()
    # Presets keep their names; the twin's noise-free epoch time agrees with the stored (noisy) one.
    maxn = load_device(device).maxn
    row = df[(df["mode"] == maxn.mode) & (df["workload"] == "resnet18-cifar10")].iloc[0]
    twin = Twin(DevicePhysics(load_device(device)), load_complexity("resnet18-cifar10"))
    assert row["epoch_time_s"] == pytest.approx(float(twin.epoch(maxn)["epoch_time_s"][0]), rel=0.05)


def test_the_tool_writes_the_committed_sweep_byte_for_byte(tmp_path):
    """``python -m tools.make_reference_sweeps`` reproduces what is committed (Nano, the smallest space):
    a twin or format change that is not followed by a rerun fails here, not in someone's later diff."""
    assert main(["--devices", "nano", "--out-dir", str(tmp_path)]) == 0
    assert (tmp_path / "nano-simulated.csv").read_bytes() == (REFERENCE_DIR / "nano-simulated.csv").read_bytes()


def test_spread_modes_cover_every_knob_range():
    d = load_device("agx-xavier")
    modes = spread_modes(d, 320)
    assert len({m.knobs() for m in modes}) == len(modes) == 320 + len(d.presets)
    knobs = np.array([m.knobs() for m in modes[len(d.presets):]], dtype=float)
    for i, steps in enumerate(((1, 8), d.cpu_steps_mhz, d.gpu_steps_mhz, d.emc_steps_mhz)):
        assert knobs[:, i].min() == min(steps) and knobs[:, i].max() == max(steps)


def test_the_twin_runs_without_torch():
    code = ("import sys; from jetpredict.profiler import sim; "
            "from jetpredict.profiler.runner import RunSettings; "
            "from jetpredict.models.catalogue import load_device; "
            "rig = sim.simulated_rig('nano', 'lenet5-mnist'); "
            "r = rig.runner.run_mode(load_device('nano').maxn, RunSettings(minibatches=3)); "
            "print(len(r.measured), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["3", "False"]
