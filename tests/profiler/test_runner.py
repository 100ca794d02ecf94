"""Runner: statistics, aggregation into profile rows (torch-free), and a real measured mode."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from fakes import CloseCountingMeter
from jetpredict.models.profile_rows import validate_records
from jetpredict.profiler.backends import MinibatchTiming, TrainingBackend
from jetpredict.profiler.power import NullPowerMeter, PowerMeter, PowerTrace, detect_power_meter
from jetpredict.profiler.runner import RealTimeRunner, RunSettings, aggregate_row, summarize


def test_summarize():
    s = summarize([1.0, 2.0, 3.0, 4.0, 10.0])
    assert s.mean == pytest.approx(4.0) and s.median == pytest.approx(3.0)
    assert s.p95 == pytest.approx(4.0 + 0.8 * 6.0)       # linear between the two largest
    assert s.cv == pytest.approx(np.std([1, 2, 3, 4, 10], ddof=1) / 4.0)
    assert summarize([2.0]).cv is None
    with pytest.raises(ValueError):
        summarize([])


def _timings(n: int, stall: float, compute: float, t0: float = 100.0) -> list[MinibatchTiming]:
    out, t = [], t0
    for i in range(n):
        c = compute * (1 + 0.1 * (i % 2))
        out.append(MinibatchTiming(stall, c, stall + c, t, t + stall + c))
        t += stall + c
    return out


MODE = {"mode": "MAXN", "cpu_cores": 8, "cpu_mhz": 2265.6, "gpu_mhz": 1377.0, "emc_mhz": 2133.0}


def test_aggregate_row_with_a_constant_power_trace():
    timings = _timings(10, 0.01, 0.1)
    t0, t1 = timings[0].start_s, timings[-1].end_s
    trace = PowerTrace(np.linspace(t0 - 1, t1 + 1, 200), np.full(200, 12.0), meter_name="ina3221:VDD_IN")
    row = aggregate_row(timings, device="agx-xavier", workload="w", mode=MODE, batch_size=16, num_workers=4,
                        minibatches_per_epoch=1000, warmup=3, trace=trace, power_meter="ina3221:VDD_IN",
                        base_power_w=7.5, complexity={"flops_train": 1e9, "macs_fwd": 1e9 / 6},
                        peak_fp32_flops=1.41e12, cpu_s_per_sample=0.002)
    mean_total = sum(t.total_s for t in timings) / 10
    assert row["epoch_time_s"] == pytest.approx(mean_total * 1000)
    assert row["stall_time_s"] == pytest.approx(10.0) and row["compute_time_s"] == pytest.approx(105.0)
    assert row["avg_power_w"] == pytest.approx(12.0)
    assert row["epoch_energy_j"] == pytest.approx(12.0 * row["epoch_time_s"])
    assert row["power_null_reason"] is None and row["base_power_w"] == 7.5
    assert row["utilisation"] == pytest.approx(1e9 * 16 / 0.105 / 1.41e12)
    assert row["warmup"] == 3 and row["minibatches_measured"] == 10
    assert row["mb_compute_s_median"] == pytest.approx(0.105)
    inside = np.count_nonzero((trace.times_s >= t0) & (trace.times_s <= t1))
    assert row["power_samples"] == inside < len(trace)  # the measured window's, not the lead-in's too
    validate_records([row])  # a valid profile row


def test_epoch_figures_are_the_mean_minibatch_times_per_epoch():
    """Epoch time, stall and compute are the mean per minibatch x minibatches_per_epoch (module docstring):
    one slow minibatch in five counts in full, as it does over an epoch; the median would drop it."""
    stalls, computes = [0.01, 0.01, 0.01, 0.01, 0.21], [0.10, 0.10, 0.10, 0.10, 0.60]
    timings, t = [], 100.0
    for stall, compute in zip(stalls, computes, strict=True):
        timings.append(MinibatchTiming(stall, compute, stall + compute, t, t + stall + compute))
        t += stall + compute
    row = aggregate_row(timings, device="host", workload="w", mode={"mode": "host", "cpu_cores": 2},
                        batch_size=4, num_workers=0, minibatches_per_epoch=300)
    assert row["stall_time_s"] == pytest.approx(0.05 * 300)  # the median, 0.01 s, would give 3 s
    assert row["compute_time_s"] == pytest.approx(0.20 * 300)  # not 30 s
    assert row["epoch_time_s"] == pytest.approx(0.25 * 300)  # not 33 s
    assert (row["mb_stall_s_median"], row["mb_compute_s_median"]) == pytest.approx((0.01, 0.10))
    validate_records([row])


def test_energy_is_empty_with_a_reason_without_a_sensor_or_samples():
    timings = _timings(4, 0.01, 0.02)
    row = aggregate_row(timings, device="host", workload="w", mode={"mode": "host", "cpu_cores": 2},
                        batch_size=4, num_workers=0, minibatches_per_epoch=10)
    assert row["epoch_energy_j"] is None and row["avg_power_w"] is None
    assert row["power_null_reason"] == "none: no sensor found"
    assert row["utilisation"] is None and row["train_flops_per_s"] is None
    sparse = PowerTrace(np.array([0.0, 1.0]), np.array([5.0, 5.0]), meter_name="ina3221:VDD_IN")
    row = aggregate_row(timings, device="host", workload="w", mode={"mode": "host", "cpu_cores": 2},
                        batch_size=4, num_workers=0, minibatches_per_epoch=10, trace=sparse,
                        power_meter="ina3221:VDD_IN")
    assert row["epoch_energy_j"] is None and "power samples" in row["power_null_reason"]
    failed = PowerTrace(np.linspace(99, 101, 50), np.full(50, np.nan), meter_name="m", read_errors=50,
                        last_error="OSError: gone")
    row = aggregate_row(timings, device="host", workload="w", mode={"mode": "host", "cpu_cores": 2},
                        batch_size=4, num_workers=0, minibatches_per_epoch=10, trace=failed, power_meter="m")
    # 3 samples inside the window plus one bracketing each edge; the other 45 failures are outside it.
    assert row["epoch_energy_j"] is None and "5 failed reads" in row["power_null_reason"]
    validate_records([row])


def test_a_sensor_reading_0_w_gives_no_energy_and_no_base_power_but_a_reason():
    """Any powered device draws more than 0 W: a window of 0 J (a rail the sensor does not see) was stored and
    then refused by the row's rules, losing the measured mode. Energy, power and base power are null, saying why."""
    from jetpredict.profiler.runner import ModeRun

    timings = _timings(10, 0.01, 0.1)
    t0, t1 = timings[0].start_s, timings[-1].end_s
    dead = PowerTrace(np.linspace(t0 - 3, t1 + 1, 300), np.zeros(300), meter_name="ina3221:VDD_IN")
    run = ModeRun(warmup=[], measured=timings, trace=dead, power_meter="ina3221:VDD_IN",
                  idle_window_s=(t0 - 2.5, t0 - 0.5))
    assert run.base_power_w is None
    assert run.base_power_null_reason.startswith("idle window: ina3221:VDD_IN: read 0 J over")
    row = aggregate_row(timings, device="agx-xavier", workload="w", mode=MODE, batch_size=16, num_workers=4,
                        minibatches_per_epoch=1000, trace=dead, power_meter="ina3221:VDD_IN",
                        base_power_w=run.base_power_w)
    assert row["epoch_energy_j"] is None and row["avg_power_w"] is None
    assert row["power_null_reason"].startswith("ina3221:VDD_IN: read 0 J over the measured window of")
    assert "draws more than 0 W" in row["power_null_reason"]
    assert row["epoch_time_s"] == pytest.approx(sum(t.total_s for t in timings) / 10 * 1000)
    validate_records([row])


def test_failed_reads_outside_the_window_do_not_explain_its_missing_energy():
    timings = _timings(4, 0.01, 0.02)  # the window is [100, 100.124] s
    t0, t1 = timings[0].start_s, timings[-1].end_s
    # The lead-in's reads failed (a sensor that woke up late); the window itself holds one good sample.
    times = np.array([95.0, 96.0, 97.0, 98.0, 99.0, 100.05, 101.0])
    power = np.array([np.nan, np.nan, np.nan, np.nan, 5.0, 5.0, 5.0])
    trace = PowerTrace(times, power, meter_name="m", read_errors=4, last_error="OSError: not yet")
    assert trace.failed_reads_in(t0, t1) == 0 and trace.failed_reads_in(95.5, 99.5) == 4  # 95 s brackets the edge
    row = aggregate_row(timings, device="host", workload="w", mode={"mode": "host", "cpu_cores": 2},
                        batch_size=4, num_workers=0, minibatches_per_epoch=10, trace=trace, power_meter="m")
    assert row["epoch_energy_j"] is None
    assert "failed reads" not in row["power_null_reason"]
    assert "holds 1 power samples" in row["power_null_reason"]


def test_cpu_package_energy_is_empty_with_a_reason_too():
    timings = _timings(10, 0.01, 0.1)
    t0, t1 = timings[0].start_s, timings[-1].end_s
    # 25 minibatches per epoch, 10 measured: the window's mean power x the epoch's time.
    common = dict(device="host", workload="w", mode={"mode": "host", "cpu_cores": 2}, batch_size=4,
                  num_workers=0, minibatches_per_epoch=25)
    row = aggregate_row(timings, **common, cpu_power_meter="none: no package zone under /sys/class/powercap")
    assert row["cpu_package_energy_j"] is None
    assert row["cpu_package_null_reason"] == "none: no package zone under /sys/class/powercap"
    rapl = PowerTrace(np.linspace(t0 - 1, t1 + 1, 100), np.full(100, 20.0), meter_name="rapl:package-0")
    row = aggregate_row(timings, **common, cpu_trace=rapl, cpu_power_meter="rapl:package-0")
    assert row["cpu_package_energy_j"] == pytest.approx(20.0 * row["epoch_time_s"])
    assert row["cpu_package_null_reason"] is None
    validate_records([row])


def test_runner_imports_without_torch():
    code = ("import sys; sys.modules['torch'] = None; "
            "import jetpredict.profiler.runner, jetpredict.profiler.backends, "
            "jetpredict.profiler.complexity; "
            "print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"


def test_run_mode_measures_idle_and_training_power_on_a_fake_ina3221(fake_root):
    import torch
    from jetpredict.profiler.backends import TorchBackend

    # 5 V x 2.4 A = 12 W on the module rail of an Orin Nano.
    fake_root.add_ina3221_hwmon("1-0040", 1, [("VDD_IN", 5000, 2400), ("VDD_CPU_GPU_CV", 1000, 500),
                                              ("VDD_SOC", 1000, 300)])
    meter = detect_power_meter("orin-nano")
    assert meter.available and "VDD_IN" in meter.name
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        backend = TorchBackend("lenet5-mnist", batch_size=32, num_workers=0)
        seen = []
        run = RealTimeRunner(backend, meter).run_mode(
            None, RunSettings(warmup=1, minibatches=6, idle_s=0.3, hz=50.0),
            on_minibatch=lambda phase, i, n: seen.append((phase, i, n)))
    finally:
        torch.set_num_threads(before)
    assert seen[0] == ("warmup", 1, 1) and seen[-1] == ("measure", 6, 6)
    assert len(run.warmup) == 1 and len(run.measured) == 6
    assert all(t.stall_s > 0 and t.compute_s > 0 and t.total_s >= t.compute_s for t in run.measured)
    assert run.base_power_w == pytest.approx(12.0)
    assert run.cpu_s_per_sample is not None and run.cpu_s_per_sample > 0
    row = aggregate_row(run.measured, device="host", workload="lenet5-mnist",
                        mode={"mode": "host", "cpu_cores": 1}, batch_size=32, num_workers=0,
                        minibatches_per_epoch=backend.minibatches_per_epoch, trace=run.trace,
                        power_meter=run.power_meter, base_power_w=run.base_power_w)
    if run.trace.samples_in(run.measured[0].start_s, run.measured[-1].end_s) >= 2:
        assert row["avg_power_w"] == pytest.approx(12.0)
        assert row["epoch_energy_j"] == pytest.approx(12.0 * row["epoch_time_s"])  # power x time, not the window's
    else:  # a very fast machine: the window held under two samples, and the row says so
        assert row["epoch_energy_j"] is None and "power samples" in row["power_null_reason"]
    assert math.isfinite(row["epoch_time_s"])


#: A user workload whose time goes either to its samples (the data pipeline: stall) or to its forward (compute).
SPLIT_TRUTH_MODELS = """
import time

import torch
from torch import nn
from torch.utils.data import Dataset


class Samples(Dataset):
    def __init__(self, sleep_s):
        self.sleep_s = sleep_s

    def __len__(self):
        return 64

    def __getitem__(self, i):
        time.sleep(self.sleep_s)
        return torch.zeros(8), i % 2


class Net(nn.Module):
    def __init__(self, sleep_s):
        super().__init__()
        self.fc, self.sleep_s = nn.Linear(8, 2), sleep_s

    def forward(self, x):
        time.sleep(self.sleep_s)
        return self.fc(x)


def slow_samples():
    return {"model": Net(0.0), "dataset": Samples(0.010), "loss": nn.functional.cross_entropy}


def slow_forward():
    return {"model": Net(0.040), "dataset": Samples(0.0), "loss": nn.functional.cross_entropy}
"""


@pytest.mark.parametrize("factory, slow, fast", [("slow_samples", "stall", "compute"),
                                                 ("slow_forward", "compute", "stall")])
def test_the_torch_backend_times_the_data_wait_as_stall_and_the_step_as_compute(tmp_path, monkeypatch,
                                                                                 torch_one_thread, factory, slow, fast):
    """Known truth: 4 samples of 10 ms each (no workers) are >= 40 ms of stall per minibatch; a 40 ms forward is
    >= 40 ms of compute. Lower bounds only: a loaded machine only adds time. Swapping the two in the backend
    passed every other test."""
    from jetpredict.profiler.backends import TorchBackend

    (tmp_path / "split_truth_models.py").write_text(SPLIT_TRUTH_MODELS)
    monkeypatch.syspath_prepend(str(tmp_path))
    backend = TorchBackend(f"split_truth_models:{factory}", batch_size=4, num_workers=0, device="cpu")
    run = RealTimeRunner(backend).run_mode(None, RunSettings(warmup=1, minibatches=5, idle_s=0.0))
    median = {part: summarize([getattr(t, f"{part}_s") for t in run.measured]).median for part in (slow, fast)}
    assert median[slow] >= 0.04 and median[fast] < median[slow], median


@pytest.mark.parametrize("field, value", [("minibatches", 0), ("warmup", -1), ("settle_s", -0.5),
                                          ("idle_s", -1.0), ("hz", 0.0), ("minibatches", 10_001),
                                          ("warmup", 4_000_000), ("settle_s", 601.0), ("idle_s", 1e9),
                                          ("settle_s", float("nan"))])
def test_run_settings_reject_bad_values_naming_the_field(field, value):
    from jetpredict.models.errors import InputError

    with pytest.raises(InputError) as err:
        RunSettings(**{field: value})
    assert err.value.field == field


@pytest.mark.parametrize("hz", [0.5, 5000.0, True, float("nan"), float("inf")])
def test_run_settings_take_the_samplers_limits_on_hz(hz):
    """A rate the sampler would refuse when it starts (mid-campaign) is refused up front, naming --hz."""
    from jetpredict.models.errors import InputError
    from jetpredict.profiler.power.sampler import MAX_SAMPLER_HZ, MIN_SAMPLER_HZ, PowerSampler

    with pytest.raises(InputError, match="--hz") as err:
        RunSettings(hz=hz)
    assert err.value.field == "hz"
    for ok in (MIN_SAMPLER_HZ, MAX_SAMPLER_HZ):  # both ends are the sampler's and the settings' alike
        assert RunSettings(hz=ok).hz == PowerSampler(NullPowerMeter(), ok).hz == ok


class _PacedBackend(TrainingBackend):
    """A training backend whose minibatches take a fixed time (no torch): the runner's timing seam."""

    def __init__(self, minibatch_s: float) -> None:
        self.minibatch_s = minibatch_s

    def prepare(self, mode) -> None:
        pass

    def cpu_s_per_sample(self) -> float:
        return 1e-4

    def next_minibatch(self) -> MinibatchTiming:
        import time

        t0 = time.perf_counter()
        time.sleep(self.minibatch_s)
        t1 = time.perf_counter()
        return MinibatchTiming(stall_s=0.0, compute_s=t1 - t0, total_s=t1 - t0, start_s=t0, end_s=t1)


def test_short_windows_are_sampled_faster_than_the_default_rate(fake_root):
    fake_root.add_ina3221_hwmon("1-0040", 1, [("VDD_IN", 5000, 2000), ("VDD_CPU_GPU_CV", 1000, 500),
                                              ("VDD_SOC", 1000, 300)])
    meter = detect_power_meter("orin-nano")
    # 20 x 25 ms = 0.5 s: 10 Hz would give ~5 samples; the warm-up's pace raises the rate (<= 100 Hz).
    run = RealTimeRunner(_PacedBackend(0.025), meter).run_mode(
        None, RunSettings(warmup=2, minibatches=20, idle_s=0.0))
    window = (run.measured[0].start_s, run.measured[-1].end_s)
    assert run.trace.samples_in(*window) >= 20
    assert run.trace.mean_power_w(*window) == pytest.approx(10.0)


class _SlowSensor(PowerMeter):
    """A meter whose reading changes only ``update_hz`` times a second (tegrastats at its interval)."""

    name = "slow"

    def __init__(self, update_hz: float | None) -> None:
        self._update_hz = update_hz

    @property
    def update_hz(self) -> float | None:
        return self._update_hz

    def read_power_w(self) -> float:
        return 9.0


def test_the_raised_rate_stops_at_the_meters_update_rate():
    from jetpredict.profiler.runner import measured_window_hz

    warmup = _timings(2, 0.0, 0.01)  # 10 ms minibatches: a 0.1 s window of 10 would want 600 Hz
    assert PowerMeter.update_hz.fget(NullPowerMeter()) is None  # unknown unless a meter says
    assert measured_window_hz(warmup, 10, 10.0) == 100.0  # the sensor-friendly maximum alone
    assert measured_window_hz(warmup, 10, 10.0, update_hz=25.0) == 25.0
    assert measured_window_hz(warmup, 10, 10.0, update_hz=5.0) == 10.0  # never below the rate asked
    assert measured_window_hz(warmup, 10, 10.0, update_hz=500.0) == 100.0
    # The fastest warm-up minibatch sets the pace: 20 x 0.05 s is a 1 s window, 60 Hz (the slowest, 10 Hz).
    warmup = [MinibatchTiming(0.0, 1.0, 1.0, 0.0, 1.0), MinibatchTiming(0.0, 0.05, 0.05, 1.0, 1.05)]
    assert measured_window_hz(warmup, 20, 10.0) == pytest.approx(60.0)
    # In a run: the measured window of a meter updating at 25 Hz is sampled at 25 Hz, not 100.
    run = RealTimeRunner(_PacedBackend(0.005), _SlowSensor(25.0), _SlowSensor(None)).run_mode(
        None, RunSettings(warmup=2, minibatches=10, idle_s=0.0))
    assert run.trace.hz == 25.0 and run.cpu_trace.hz == 100.0


@pytest.mark.parametrize("failing", ["module", "cpu"])
def test_the_runner_closes_its_module_and_cpu_meters_also_when_one_close_fails(failing):
    """Whichever meter's close fails, the other is closed too and the failure is raised: a plain loop over the
    meters, stopped by the first failing close, would leave the one after it open."""
    module, cpu = CloseCountingMeter(fails=failing == "module"), CloseCountingMeter(fails=failing == "cpu")
    with pytest.raises(OSError, match="did not stop"):
        RealTimeRunner(_PacedBackend(0.0), module, cpu).close()
    assert (module.closes, cpu.closes) == (1, 1)


def test_loader_defaults_to_at_most_one_worker_per_core_and_checks_its_fields():
    from jetpredict.models.errors import InputError
    from jetpredict.profiler.loader import default_num_workers, loader_settings

    # The POMACS setup's 4 workers, but a 2-core host gets 2 (more workers than cores only contend).
    assert [default_num_workers(c) for c in (1, 2, 4, 12)] == [1, 2, 4, 4]
    assert loader_settings(None, None, default_batch_size=16, cpu_cores=2) == (16, 2)
    assert loader_settings(8, 0, default_batch_size=16) == (8, 0)
    for kw, field in (({"batch_size": 0}, "batch_size"), ({"num_workers": -1}, "workers")):
        with pytest.raises(InputError) as err:
            loader_settings(**{"batch_size": None, "num_workers": None, **kw}, default_batch_size=16)
        assert err.value.field == field


def test_loader_settings_take_the_row_formats_upper_bounds():
    """A worker count or batch size the measured row would fail is refused at once, naming the flag."""
    from jetpredict.models.errors import InputError
    from jetpredict.models.profile_rows import MAX_CORES, MAX_COUNT
    from jetpredict.profiler.loader import loader_settings

    assert loader_settings(MAX_COUNT, MAX_CORES, default_batch_size=16) == (MAX_COUNT, MAX_CORES)
    for kw, field, flag in (({"num_workers": MAX_CORES + 1}, "workers", "--workers"),
                            ({"batch_size": MAX_COUNT + 1}, "batch_size", "--batch-size")):
        with pytest.raises(InputError, match=f"{flag} must be <= ") as err:
            loader_settings(**{"batch_size": None, "num_workers": None, **kw}, default_batch_size=16)
        assert err.value.field == field


def test_without_a_meter_there_is_no_trace_and_no_idle_wait():
    import time

    t0 = time.perf_counter()
    run = RealTimeRunner(_PacedBackend(0.001)).run_mode(None, RunSettings(warmup=1, minibatches=3, idle_s=5.0))
    assert time.perf_counter() - t0 < 5.0  # nothing to measure idle: no wait
    assert run.trace is None and run.cpu_trace is None and run.idle_window_s is None and run.base_power_w is None
    assert run.power_meter == "none: no sensor found" and len(run.measured) == 3


class _FailingBackend(_PacedBackend):
    def next_minibatch(self) -> MinibatchTiming:
        raise RuntimeError("out of memory")


def test_a_failing_minibatch_stops_the_power_sampler(fake_root):
    import threading

    fake_root.add_ina3221_hwmon("1-0040", 1, [("VDD_IN", 5000, 2000), ("VDD_CPU_GPU_CV", 1000, 500),
                                              ("VDD_SOC", 1000, 300)])
    with pytest.raises(RuntimeError, match="out of memory"):
        RealTimeRunner(_FailingBackend(0.0), detect_power_meter("orin-nano")).run_mode(
            None, RunSettings(warmup=1, minibatches=2, idle_s=0.0))
    assert not [t for t in threading.enumerate() if t.name == "jetpredict-power-sampler"]


def test_idle_power_comes_before_training_and_training_power_from_the_minibatches(fake_root):
    """The rail draws more while minibatches run: base_power_w must be the idle draw before any of them (not a
    window reaching into the warm-up), avg_power_w the draw while they run."""
    from fakes import BUSY_W, IDLE_W, busy_vdd_in

    backend = busy_vdd_in(fake_root)
    run = RealTimeRunner(backend, detect_power_meter("orin-nano")).run_mode(
        None, RunSettings(warmup=3, minibatches=20, idle_s=0.3, hz=100.0))
    assert run.base_power_w == pytest.approx(IDLE_W, rel=0.01) and run.base_power_null_reason is None
    assert run.idle_window_s[1] <= run.warmup[0].start_s  # before training, as well as at its draw
    row = aggregate_row(run.measured, device="orin-nano", workload=backend.workload, mode=MODE, batch_size=4,
                        num_workers=0, minibatches_per_epoch=100, trace=run.trace, power_meter=run.power_meter,
                        base_power_w=run.base_power_w)
    assert row["base_power_w"] == run.base_power_w
    # Only the window's two edges interpolate toward an idle sample just outside it; the draw over the window is
    # busy but for the gaps between minibatches, which a loaded run stretches.
    truth = IDLE_W + (BUSY_W - IDLE_W) * backend.busy_share(3, 22)  # the gaps may fall between samples
    assert truth - 0.15 * (BUSY_W - IDLE_W) <= row["avg_power_w"] <= BUSY_W * 1.01, (row["avg_power_w"], truth)


def test_an_empty_base_power_says_why(fake_root):
    from fakes import BusyRailBackend, LateMeter

    backend = BusyRailBackend(fake_root, "/unused/curr1_input", 0, 0, minibatch_s=0.05)  # samples in its window
    run = RealTimeRunner(backend, LateMeter(backend)).run_mode(
        None, RunSettings(warmup=1, minibatches=5, idle_s=0.2, hz=50.0))
    assert run.base_power_w is None
    assert "failed reads" in run.base_power_null_reason and "no line yet" in run.base_power_null_reason
    assert run.base_power_null_reason.startswith("idle window")
    no_idle = RealTimeRunner(_PacedBackend(0.001), _SlowSensor(None)).run_mode(
        None, RunSettings(warmup=0, minibatches=2, idle_s=0.0))
    assert no_idle.base_power_w is None and "idle_s is 0" in no_idle.base_power_null_reason
    no_meter = RealTimeRunner(_PacedBackend(0.001)).run_mode(None, RunSettings(warmup=0, minibatches=2))
    assert no_meter.base_power_null_reason == "none: no sensor found"


class _StepUpMeter(PowerMeter):
    """Reads idle power until ``backend`` starts training (its ``prepare``), the training draw from then on:
    a module whose rail rises the moment the run sets its workload up."""

    name = "step-up:VDD_IN"
    IDLE_W, BUSY_W = 8.0, 15.0

    def __init__(self, backend: _SettingUpBackend) -> None:
        self.backend = backend

    def read_power_w(self) -> float:
        return self.BUSY_W if self.backend.prepared else self.IDLE_W


class _SettingUpBackend(_PacedBackend):
    prepared = False

    def prepare(self, mode) -> None:
        self.prepared = True


def test_the_sample_after_the_idle_window_is_taken_before_training_starts():
    """The idle window's mean interpolates at its end toward the next sample: the runner idles on until that
    sample is taken (IDLE_GUARD_SAMPLES intervals), so it reads idle even where the draw steps up the moment
    training is set up. At 5 Hz the sampler may be late by a whole interval (0.2 s) and still read idle."""
    backend = _SettingUpBackend(0.001)
    run = RealTimeRunner(backend, _StepUpMeter(backend)).run_mode(
        None, RunSettings(warmup=1, minibatches=3, idle_s=0.7, hz=5.0))
    times, power = run.trace.times_s, run.trace.power_w
    end = run.idle_window_s[1]
    assert power[np.flatnonzero(times > end)[0]] == _StepUpMeter.IDLE_W  # training's draw would be 15 W
    assert run.base_power_w == pytest.approx(_StepUpMeter.IDLE_W, rel=1e-9)
    assert power[-1] == _StepUpMeter.BUSY_W  # the meter did step up once training began
