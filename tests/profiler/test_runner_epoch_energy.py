"""An epoch's energy is its average power x its time: the gaps between measured minibatches (the profiler's own
loop: timers, synchronisation, progress printing) are not training's, so they must not reach epoch_energy_j."""

from __future__ import annotations

import time

import numpy as np
import pytest
from jetpredict.models.catalogue import load_device
from jetpredict.models.profile_rows import validate_records
from jetpredict.profiler import sim
from jetpredict.profiler.backends import MinibatchTiming
from jetpredict.profiler.power import PowerTrace, detect_power_meter
from jetpredict.profiler.runner import RealTimeRunner, RunSettings, aggregate_row

MODE = {"mode": "host", "cpu_cores": 2}


def _gapped(n: int, minibatch_s: float, gap_s: float, t0: float = 100.0) -> list[MinibatchTiming]:
    """``n`` minibatches of ``minibatch_s`` each, ``gap_s`` apart (the loop's time between them)."""
    out, t = [], t0
    for _ in range(n):
        out.append(MinibatchTiming(0.0, minibatch_s, minibatch_s, t, t + minibatch_s))
        t += minibatch_s + gap_s
    return out


def _ratio(row: dict) -> float:
    return row["epoch_energy_j"] / (row["avg_power_w"] * row["epoch_time_s"])


def test_a_constant_draw_gives_power_x_epoch_time_whatever_the_gaps():
    """12 W module, 20 W package, 0.1 s minibatches 0.05 s apart: the window is 1.45 s for 1.0 s of minibatches.
    The old rule (window energy / minibatches x per epoch) read 12 x 1.45 / 10 x 40 = 69.6 J per epoch, 1.45 x
    power x time; an epoch of 40 minibatches of 0.1 s at 12 W draws 48 J."""
    timings = _gapped(10, 0.1, 0.05)
    t0, t1 = timings[0].start_s, timings[-1].end_s
    assert t1 - t0 == pytest.approx(1.45)
    module = PowerTrace(np.linspace(t0 - 1, t1 + 1, 400), np.full(400, 12.0), meter_name="ina3221:VDD_IN")
    package = PowerTrace(np.linspace(t0 - 1, t1 + 1, 400), np.full(400, 20.0), meter_name="rapl:package-0")
    row = aggregate_row(timings, device="host", workload="w", mode=MODE, batch_size=4, num_workers=0,
                        minibatches_per_epoch=40, trace=module, power_meter="ina3221:VDD_IN",
                        cpu_trace=package, cpu_power_meter="rapl:package-0")
    assert row["epoch_time_s"] == pytest.approx(4.0)
    assert row["avg_power_w"] == pytest.approx(12.0)
    assert row["epoch_energy_j"] == pytest.approx(48.0)
    assert row["cpu_package_energy_j"] == pytest.approx(20.0 * 4.0)
    validate_records([row])


def test_a_draw_that_drops_in_the_gaps_is_averaged_over_the_window_then_times_the_epoch():
    """15 W while a minibatch runs, 8 W in the gaps: avg_power_w is the window's energy over its duration (as
    the meter integrates it), and epoch_energy_j is exactly that power x epoch_time_s."""
    timings = _gapped(8, 0.04, 0.01)
    t0, t1 = timings[0].start_s, timings[-1].end_s
    times = np.arange(t0 - 0.5, t1 + 0.5, 0.0005)
    busy = np.zeros(times.shape, dtype=bool)
    for t in timings:
        busy |= (times >= t.start_s) & (times < t.end_s)
    trace = PowerTrace(times, np.where(busy, 15.0, 8.0), meter_name="ina3221:VDD_IN")
    row = aggregate_row(timings, device="host", workload="w", mode=MODE, batch_size=4, num_workers=0,
                        minibatches_per_epoch=100, trace=trace, power_meter="ina3221:VDD_IN")
    assert row["avg_power_w"] == pytest.approx(trace.energy_j(t0, t1) / (t1 - t0))
    assert 8.0 < row["avg_power_w"] < 15.0  # the gaps' idle draw lowers it: 8 busy spans, 7 idle ones
    assert row["epoch_time_s"] == pytest.approx(0.04 * 100)
    assert _ratio(row) == pytest.approx(1.0, rel=1e-12)


def test_a_real_run_with_a_slow_progress_callback_keeps_energy_equal_to_power_x_time(fake_root):
    """The real runner on a fake INA3221 rail (15 W while a minibatch runs, 8 W otherwise), its progress
    callback taking 20 ms after each 50 ms minibatch: the window holds gaps (the old rule's ratio to power x
    time was the window / the minibatches' summed time, ~1.4 here), and the row's energy is power x time."""
    from fakes import BUSY_W, IDLE_W, busy_vdd_in

    backend = busy_vdd_in(fake_root, minibatch_s=0.05)
    run = RealTimeRunner(backend, detect_power_meter("orin-nano")).run_mode(
        None, RunSettings(warmup=1, minibatches=10, idle_s=0.0, hz=100.0),
        on_minibatch=lambda phase, i, n: time.sleep(0.02))
    measured = run.measured
    window_s = measured[-1].end_s - measured[0].start_s
    assert window_s > 1.2 * sum(t.total_s for t in measured)  # the gaps are there
    row = aggregate_row(measured, device="orin-nano", workload=backend.workload, mode=MODE, batch_size=4,
                        num_workers=0, minibatches_per_epoch=100, trace=run.trace, power_meter=run.power_meter)
    assert row["epoch_energy_j"] is not None, row["power_null_reason"]
    assert IDLE_W * 0.99 <= row["avg_power_w"] <= BUSY_W * 1.01
    assert row["avg_power_w"] == pytest.approx(run.trace.energy_j(measured[0].start_s, measured[-1].end_s)
                                               / window_s)
    assert _ratio(row) == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize("device, workload", [("agx-xavier", "lenet5-mnist"), ("orin-agx", "resnet18-cifar10")])
def test_the_twins_minibatches_leave_no_gaps_so_its_rows_keep_their_energy(device, workload):
    """The twin's clock moves only inside a minibatch: each measured one starts where the last ended, so the
    window is the minibatches' summed time and power x time equals the window's energy scaled to the epoch (the
    rule before the gaps were taken out), to rounding: simulated rows and results built on them are unchanged."""
    rig = sim.simulated_rig(device, workload)
    maxn = load_device(device).maxn
    run = rig.runner.run_mode(maxn, RunSettings(warmup=3, minibatches=20))
    measured = run.measured
    assert all(a.end_s == b.start_s for a, b in zip(measured, measured[1:], strict=False))
    row = aggregate_row(measured, device=device, workload=workload, mode=maxn.as_dict(), batch_size=16,
                        num_workers=4, minibatches_per_epoch=1000, trace=run.trace, power_meter=run.power_meter)
    window_j = run.trace.energy_j(measured[0].start_s, measured[-1].end_s)
    assert row["epoch_energy_j"] == pytest.approx(window_j / len(measured) * 1000, rel=1e-12)
    assert _ratio(row) == pytest.approx(1.0, rel=1e-12)
