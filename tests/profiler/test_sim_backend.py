"""The simulated controller, meter and backend, driven like real ones; rows via the shared aggregation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from jetpredict.models.catalogue import PowerMode, load_device
from jetpredict.models.errors import InputError
from jetpredict.models.profile_rows import validate_records
from jetpredict.profiler import runner, sim
from jetpredict.profiler.sim.backend import WARMUP_EXTRA
from jetpredict.profiler.sim.clock import SimClock
from jetpredict.profiler.sim.runner import SimulatedRunner


def profile(device: str, workload: str, modes, seed: int = 0, **kw):
    rig = sim.simulated_rig(device, workload, seed=seed)
    controller, meter, backend = rig.controller, rig.meter, rig.backend
    rows, runs = [], []
    with controller:
        for mode in modes:
            controller.apply(mode)
            run = rig.runner.run_mode(mode, runner.RunSettings(**kw))
            runs.append(run)
            rows.append(runner.aggregate_row(
                run.measured, device=device, workload=backend.workload,
                mode=controller.read_back().as_dict(), batch_size=backend.batch_size,
                num_workers=backend.num_workers, minibatches_per_epoch=backend.minibatches_per_epoch,
                trace=run.trace, power_meter=run.power_meter, base_power_w=run.base_power_w,
                complexity=backend.complexity().as_dict(), cpu_s_per_sample=run.cpu_s_per_sample,
                accelerator=backend.accelerator(), source="simulated"))
    return rows, runs, (controller, meter, backend)


def test_rows_are_complete_labelled_and_valid():
    d = load_device("orin-agx")
    rows, _, _ = profile("orin-agx", "resnet18-cifar10", d.presets)
    df = validate_records(rows)
    assert list(df["mode"]) == [p.mode for p in d.presets]
    assert set(df["source"]) == {"simulated"} and set(df["power_meter"]) == {"sim:orin-agx"}
    assert set(df["accelerator"]) == {"sim"}  # a twin row stays one even without its meter column
    for col in ("epoch_time_s", "stall_time_s", "compute_time_s", "epoch_energy_j", "avg_power_w",
                "base_power_w"):
        assert df[col].notna().all() and (df[col] > 0).all(), col
    assert (df["avg_power_w"] > df["base_power_w"]).all()
    assert (df["minibatches_per_epoch"] == 3125).all()


@pytest.mark.parametrize(("workload", "power_rel"), [("resnet18-cifar10", 0.03), ("lenet5-mnist", 0.01)])
def test_rows_agree_with_the_noise_free_twin(workload, power_rel):
    """LeNet-5 on AGX Xavier waits on data a third of each step at a lower draw: its row reads the twin's mean
    over stall and compute, not the mean stretched over compute alone nor idle power through the stalls."""
    d = load_device("agx-xavier")
    rows, _, (_, _, backend) = profile("agx-xavier", workload, [d.maxn], minibatches=60)
    mean = backend.twin.epoch(d.maxn)
    mb = backend.twin.minibatch(d.maxn, backend.batch_size, backend.num_workers)
    assert workload != "lenet5-mnist" or mb.stall_s[0] > 0.3 * mb.total_s[0]
    assert rows[0]["epoch_time_s"] == pytest.approx(float(mean["epoch_time_s"][0]), rel=0.02)
    assert rows[0]["avg_power_w"] == pytest.approx(float(mean["avg_power_w"][0]), rel=power_rel)
    assert rows[0]["base_power_w"] == pytest.approx(float(mean["base_power_w"][0]), rel=0.03)


def test_noise_is_seeded_and_about_two_percent():
    d = load_device("agx-xavier")
    a, _, _ = profile("agx-xavier", "resnet18-cifar10", [d.maxn], seed=1)
    b, _, _ = profile("agx-xavier", "resnet18-cifar10", [d.maxn], seed=1)
    c, _, _ = profile("agx-xavier", "resnet18-cifar10", [d.maxn], seed=2)
    assert a[0]["epoch_time_s"] == b[0]["epoch_time_s"] and a[0]["avg_power_w"] == b[0]["avg_power_w"]
    assert a[0]["epoch_time_s"] != c[0]["epoch_time_s"]
    assert 0.005 < a[0]["mb_compute_cv"] < 0.05


def test_warmup_minibatches_are_slower_and_time_is_simulated():
    d = load_device("xavier-nx")
    mode = d.preset("MODE_15W_6CORE")
    _, runs, (_, meter, backend) = profile("xavier-nx", "mobilenetv3-small-gld23k", [mode], warmup=5,
                                           minibatches=10, idle_s=3.0)
    run = runs[0]
    assert run.warmup[0].compute_s > (1 + WARMUP_EXTRA / 2) * run.measured[-1].compute_s
    # The simulated clock moved by the idle window plus every minibatch; each stamp follows the last.
    stamps = [t for mb in run.warmup + run.measured for t in (mb.start_s, mb.end_s)]
    assert np.all(np.diff(stamps) >= 0)
    assert run.idle_window_s[1] - run.idle_window_s[0] == pytest.approx(3.0)
    total = sum(mb.total_s for mb in run.warmup + run.measured)
    assert backend.state.clock.now() - run.idle_window_s[0] == pytest.approx(3.0 + total)
    assert run.trace.times_s[0] <= run.measured[0].start_s and run.trace.times_s[-1] >= run.measured[-1].end_s
    assert meter.read_power_w() > 0


def test_without_a_meter_power_is_unknown_with_a_reason():
    backend = sim.simulated_rig("nano", "lenet5-mnist").backend
    run = SimulatedRunner(backend, None).run_mode(load_device("nano").maxn, runner.RunSettings(minibatches=5))
    row = runner.aggregate_row(run.measured, device="nano", workload=backend.workload,
                               mode=load_device("nano").maxn.as_dict(), batch_size=16, num_workers=4,
                               minibatches_per_epoch=3750, trace=run.trace, power_meter=run.power_meter)
    assert row["avg_power_w"] is None and row["epoch_energy_j"] is None
    assert row["power_null_reason"].startswith("none")


def test_controller_validates_and_restores():
    d = load_device("orin-nano")
    controller = sim.simulated_rig(d, "lenet5-mnist").controller
    with controller:
        controller.apply(d.preset("7W"))
        assert controller.read_back().mode == "7W"
        with pytest.raises(InputError) as err:
            controller.apply(PowerMode("bad", 6, 1510.4, 2000.0, 2133.0))
        assert err.value.field == "gpu_mhz"
    assert controller.current().mode == d.default_preset


def test_custom_modes_inside_the_range_are_simulated_at_the_devices_steps():
    """A clock between steps runs (and is recorded) at the step nearest it, as on a board."""
    mode = PowerMode("custom", 3, 1000.0, 500.0, 2133.0)
    rows, _, _ = profile("orin-nano", "vgg11-cifar10", [mode])
    assert rows[0]["mode"] == "custom" and rows[0]["gpu_mhz"] == 510.0 and rows[0]["cpu_mhz"] == 1036.8
    assert math.isfinite(rows[0]["epoch_time_s"])


def test_bad_arguments_name_their_field():
    with pytest.raises(InputError) as err:
        sim.simulated_rig("orin-agx", "resnet18-cifar10", data="/tmp")
    assert err.value.field == "data"
    with pytest.raises(InputError) as err:
        sim.simulated_rig("orin-agx", "resnet18-cifar10", batch_size=0)
    assert err.value.field == "batch_size"
    with pytest.raises(InputError) as err:
        sim.simulated_rig("toaster", "resnet18-cifar10")
    assert err.value.field == "device"
    with pytest.raises(InputError) as err:
        runner.RunSettings(minibatches=0)
    assert err.value.field == "minibatches"


def test_the_simulated_clock_does_not_read_the_machine_clock():
    """Every rig starts its clock at 0 s: a start taken from time.perf_counter() rounds sample times
    against power segments differently in every process, so one seed gave several avg_power_w."""
    rigs = [sim.simulated_rig("agx-xavier", "resnet18-cifar10", seed=3) for _ in range(2)]
    assert [r.runner.now_s() for r in rigs] == [0.0, 0.0]
    d = load_device("agx-xavier")
    rows = []
    for rig in rigs:
        run = rig.runner.run_mode(d.maxn, runner.RunSettings(warmup=2, minibatches=20))
        rows.append(runner.aggregate_row(
            run.measured, device="agx-xavier", workload="w", mode=d.maxn.as_dict(), batch_size=16,
            num_workers=4, minibatches_per_epoch=3125, trace=run.trace, power_meter=run.power_meter))
    assert rows[0]["avg_power_w"] == rows[1]["avg_power_w"] and rows[0]["power_samples"] >= 20


def test_the_meters_noise_follows_the_seed():
    """One seed gives one power trace, another seed other samples of the same (idle) true power."""
    traces = [sim.simulated_rig("agx-xavier", "resnet18-cifar10", seed=seed).meter.trace(0.0, 1.0, 50.0).power_w
              for seed in (1, 1, 2)]
    assert np.array_equal(traces[0], traces[1]) and not np.array_equal(traces[0], traces[2])
    assert np.mean(traces[2]) == pytest.approx(np.mean(traces[0]), rel=0.01)


def test_simulated_time_cannot_go_back():
    clock = SimClock(2.0)
    with pytest.raises(ValueError, match="cannot go back"):
        clock.advance(-0.5)
    assert clock.now() == 2.0


def test_the_data_cpu_cost_per_sample_waits_on_the_memory_clock():
    """MobileNetV3's JPEG decode per sample, as the row reports it, slows when the EMC clock halves (2133 -> 1066 MHz)."""
    backend = sim.simulated_rig("agx-xavier", "mobilenetv3-small-gld23k").backend
    costs = []
    for emc_mhz in (2133.0, 1066.0):
        backend.prepare(PowerMode("custom", 8, 2265.6, 1377.0, emc_mhz))
        costs.append(backend.cpu_s_per_sample())
    assert costs[1] > 1.3 * costs[0]  # +39% here; the AGX Xavier sweeps g -> h stall +38%
