"""Per-mode measurement and its aggregation into one profile row.

:class:`RealTimeRunner` runs one power mode on a :class:`~profiler.backends.TrainingBackend`: settle, idle
power for a few seconds (``base_power_w``), warm-up minibatches, then measured ones, in one measurement
window per meter (:func:`~profiler.metering.metered`: sampled throughout, timed over the measured
minibatches); the digital twin implements the same :class:`ModeRunner` interface in simulated
time. :func:`aggregate_row` turns the measured :class:`MinibatchTiming`\\ s and a
:class:`~profiler.power.PowerTrace` into a profile row; it imports neither torch nor the hardware
modules, so the digital twin reuses it with simulated timings and traces.

Row columns beyond the profile-row fields (all per minibatch unless said otherwise; units in the names):

- ``mb_total_s_{mean,median,p95}``, ``mb_stall_s_*``, ``mb_compute_s_*`` and ``mb_total_cv``,
  ``mb_stall_cv``, ``mb_compute_cv`` (coefficient of variation, sample std / mean) over measured
  minibatches; ``warmup`` and ``minibatches_measured`` say how many of each ran.
- ``power_meter`` (which sensor, ``none: <reason>`` without one), ``power_null_reason`` (why the
  energy cells are empty; empty when they are not), ``power_samples`` (samples inside the window),
  ``cpu_package_energy_j`` (CPU-package energy per epoch, e.g. RAPL; empty when unknown, and
  ``cpu_package_null_reason`` says why).
- Complexity per sample from :mod:`profiler.complexity`: ``macs_fwd``, ``params``, ``flops_train``,
  ``param_bytes``, ``activation_bytes``, ``leaf_modules``, ``kernel_count`` (per minibatch).
- ``cpu_s_per_sample``: CPU seconds of the data pipeline per sample; ``train_flops_per_s`` =
  ``flops_train`` x batch / mean compute time; ``utilisation`` = that / the mode's peak FP32 (catalogue;
  empty on the host, which has no catalogue peak); ``accelerator`` (``cuda``/``cpu``/``sim``).

Epoch figures: ``epoch_time_s`` = mean total per minibatch x ``minibatches_per_epoch``; likewise the
stall and compute shares; ``avg_power_w`` = energy over the measured window (first measured minibatch's
start to the last one's end) / the window's duration; ``epoch_energy_j`` = ``avg_power_w`` x ``epoch_time_s``,
so energy is power x time as every reader takes it (the window's gaps between minibatches, the profiler's own
loop, count in the power's average but not in the epoch's time). ``cpu_package_energy_j`` likewise: its meter's
mean power over the same window x ``epoch_time_s``.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from jetpredict.models.errors import InputError
from jetpredict.models.profiling_protocol import (
    IDLE_S,
    MAX_MINIBATCHES_PER_MODE,
    MAX_WAIT_S,
    MEASURED_MINIBATCHES,
    NOISY_EPOCH_TIME_REL_SE,
    WARMUP_MINIBATCHES,
)
from jetpredict.profiler.backends import MinibatchTiming, TrainingBackend
from jetpredict.profiler.complexity import Complexity
from jetpredict.profiler.flags import check_range
from jetpredict.profiler.metering import meter_label, metered, window_null_reason
from jetpredict.profiler.power_defaults import DEFAULT_SAMPLER_HZ, MAX_SAMPLER_HZ, MIN_SAMPLER_HZ, NO_METER

if TYPE_CHECKING:
    from jetpredict.models.catalogue import PowerMode
    from jetpredict.profiler.power import PowerMeter, PowerTrace


#: Sample intervals idled after the idle window closes (of the sampler, or of the meter where it updates
#: slower, as tegrastats' lines), so that the reading bracketing its end is idle too.
IDLE_GUARD_SAMPLES = 2
#: Statistic columns per component, in output order.
STAT_NAMES = ("mean", "median", "p95")
COMPONENTS = ("total", "stall", "compute")
#: Every complexity column a profiling run writes (a fitted model records three of them:
#: :data:`~predictor.complexity.RECORDED_COMPLEXITY_COLUMNS`; the fit reads flops_train alone).
PROFILE_COMPLEXITY_COLUMNS = tuple(f.name for f in fields(Complexity) if f.name != "null_reason")


@dataclass(frozen=True)
class Stats:
    """Summary of one component over the measured minibatches (s; ``cv`` dimensionless, None if n < 2)."""

    mean: float
    median: float
    p95: float
    cv: float | None


def summarize(values: Sequence[float]) -> Stats:
    """Mean, median, 95th percentile (linear interpolation) and coefficient of variation."""
    if not values:
        raise ValueError("no values to summarize")
    xs = sorted(float(v) for v in values)
    n = len(xs)
    mean = sum(xs) / n

    def quantile(q: float) -> float:
        pos = q * (n - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, n - 1)
        return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)

    cv = None
    if n >= 2 and mean > 0:
        var = sum((x - mean) ** 2 for x in xs) / (n - 1)
        cv = math.sqrt(var) / mean
    return Stats(mean=mean, median=quantile(0.5), p95=quantile(0.95), cv=cv)


@dataclass
class ModeRun:
    """Everything measured at one mode: timings, power traces and the idle window."""

    warmup: list[MinibatchTiming]
    measured: list[MinibatchTiming]
    trace: PowerTrace | None = None
    cpu_trace: PowerTrace | None = None
    power_meter: str = NO_METER
    cpu_power_meter: str = NO_METER
    idle_window_s: tuple[float, float] | None = None
    cpu_s_per_sample: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def base_power_w(self) -> float | None:
        """Mean power over the idle window (W), None when unknown (:attr:`base_power_null_reason` says why)."""
        if self.trace is None or self.idle_window_s is None:
            return None
        t0, t1 = self.idle_window_s
        energy_j = self.trace.energy_j(t0, t1)
        return None if energy_j is None or energy_j <= 0 else energy_j / (t1 - t0)

    @property
    def base_power_null_reason(self) -> str | None:
        """Why :attr:`base_power_w` is empty (the row format has no column for it: the sidecar's notes carry
        it); None when it is not."""
        if self.base_power_w is not None:
            return None
        if self.power_meter.startswith("none"):
            return self.power_meter
        if self.trace is None or self.idle_window_s is None:
            return f"{self.power_meter}: no idle window was measured (idle_s is 0)"
        t0, t1 = self.idle_window_s
        return "idle window: " + (_no_energy_reason(self.power_meter, self.trace, t0, t1, "idle window")
                                  or window_null_reason(self.power_meter, self.trace, t0, t1, " (wait longer idle)"))


@dataclass(frozen=True)
class RunSettings:
    """How each mode is measured: warm-up and measured minibatches, settle and idle waits (s), and the
    power sampler's rate (Hz). The one place these are checked: a bad value raises :class:`InputError`
    naming its field."""

    warmup: int = WARMUP_MINIBATCHES
    minibatches: int = MEASURED_MINIBATCHES
    settle_s: float = 0.0
    idle_s: float = IDLE_S
    hz: float = DEFAULT_SAMPLER_HZ

    def __post_init__(self) -> None:
        rules = (("warmup", self.warmup, 0, MAX_MINIBATCHES_PER_MODE, "minibatches"),
                 ("minibatches", self.minibatches, 1, MAX_MINIBATCHES_PER_MODE, ""),
                 ("settle_s", self.settle_s, 0, MAX_WAIT_S, "s"), ("idle_s", self.idle_s, 0, MAX_WAIT_S, "s"))
        for name, value, low, high, unit in rules:
            check_range(name, value, low, high, unit, per="per mode")
        # The sampler's own limits (checked again when it starts): a bad --hz is refused before any switch.
        check_range("hz", self.hz, MIN_SAMPLER_HZ, MAX_SAMPLER_HZ, "Hz")


def measured_window_hz(warmup: Sequence[MinibatchTiming], minibatches: int, hz: float,
                       update_hz: float | None = None) -> float:
    """Sampling rate (Hz) for the measured window: MLPerf Power asks for >= 60 samples per window, so a
    window that the warm-up's pace shows to be short is sampled faster (up to the sensor-friendly
    maximum of :func:`~profiler.power.sampler.hz_for_window`, and up to ``update_hz``, the meter's own
    update rate in Hz when known); never below ``hz``; without a warm-up, ``hz``.

    The pace is the warm-up's fastest minibatch: warm-up minibatches speed up from the first toward the
    steady pace, so their mean would leave the window short of samples; a guess faster than the steady pace
    only samples more."""
    if not warmup:
        return hz
    from jetpredict.profiler.power.sampler import hz_for_window

    raised = hz_for_window(min(t.total_s for t in warmup) * minibatches, hz)
    if update_hz:
        # Faster than the meter updates would count one reading several times in power_samples.
        raised = min(raised, max(hz, update_hz))
    return raised


#: ``on_minibatch(phase, i, n)``: called after each minibatch (``phase``: :data:`WARMUP_PHASE`,
#: :data:`MEASURE_PHASE`).
MinibatchCallback = Callable[[str, int, int], None]
WARMUP_PHASE, MEASURE_PHASE = "warmup", "measure"


class ModeRunner(ABC):
    """Measures one power mode (already applied by the controller) on its :attr:`backend`, with its
    module power meter: settle, idle power, warm-up, measured minibatches -> :class:`ModeRun`.

    :class:`RealTimeRunner` does it in real time; the digital twin's runner in simulated time. Timings
    and power samples of one runner share the clock of :meth:`now_s`.
    """

    backend: TrainingBackend
    #: ``measured`` or ``simulated``: the ``source`` of the rows made from this runner's measurements.
    source: str = "measured"

    @abstractmethod
    def run_mode(self, mode: PowerMode | None, settings: RunSettings,
                 on_minibatch: MinibatchCallback | None = None) -> ModeRun:
        """Measure ``mode``; ``settings`` says how long."""

    @abstractmethod
    def now_s(self) -> float:
        """Now on the clock that stamps this runner's timings and power samples (s)."""

    def started_utc(self) -> str | None:
        """The wall-clock start of a campaign (ISO 8601), or None where time is simulated."""
        return datetime.now(timezone.utc).isoformat(timespec="seconds")

    def close(self) -> None:  # noqa: B027 - a runner holding nothing (the twin's) has nothing to release
        """Release what the runner holds (its power meters); the campaign calls it on every exit path."""


class RealTimeRunner(ModeRunner):
    """Real time on the ``time.perf_counter()`` clock, with background power samplers.

    Without an available ``meter`` the idle wait is skipped (nothing to measure).
    """

    def __init__(self, backend: TrainingBackend, meter: PowerMeter | None = None,
                 cpu_meter: PowerMeter | None = None) -> None:
        self.backend = backend
        self.meter = meter
        self.cpu_meter = cpu_meter

    def now_s(self) -> float:
        return time.perf_counter()

    def close(self) -> None:
        """Close both meters (a tegrastats process, an NVML session); each close is idempotent."""
        with ExitStack() as stack:  # one meter's failing close must not leave the other open
            for meter in (self.meter, self.cpu_meter):
                if meter is not None:
                    stack.callback(meter.close)

    def run_mode(self, mode: PowerMode | None, settings: RunSettings,
                 on_minibatch: MinibatchCallback | None = None) -> ModeRun:
        s, backend = settings, self.backend
        run = ModeRun(warmup=[], measured=[], power_meter=meter_label(self.meter),
                      cpu_power_meter=meter_label(self.cpu_meter))
        # One measurement window per meter: sampled from the start (settle, idle power, warm-up), timed
        # from the first measured minibatch. The backend synchronises the GPU inside each minibatch.
        with metered(self.meter, hz=s.hz) as window, metered(self.cpu_meter, hz=s.hz) as cpu_window:
            if s.settle_s > 0:
                time.sleep(s.settle_s)
            if window.sampling and s.idle_s > 0:
                t0 = time.perf_counter()
                time.sleep(s.idle_s)
                run.idle_window_s = (t0, time.perf_counter())
                # The window's end interpolates toward the next sample: let it be an idle one, not training's.
                time.sleep(IDLE_GUARD_SAMPLES / min(s.hz, _update_hz(self.meter) or s.hz))
            try:
                backend.prepare(mode)
                run.cpu_s_per_sample = backend.cpu_s_per_sample()
            except InputError:
                raise
            except Exception as exc:  # the user's dataset or loader, read first here
                raise training_failed(backend, mode, "while getting its data ready", exc) from exc
            run_minibatches(backend, WARMUP_PHASE, s.warmup, run.warmup, on_minibatch, mode=mode)
            rates = [measured_window_hz(run.warmup, s.minibatches, s.hz, _update_hz(m))
                     for m in (self.meter, self.cpu_meter)]
            for w, hz in zip((window, cpu_window), rates, strict=True):
                w.restart(hz)
            run_minibatches(backend, MEASURE_PHASE, s.minibatches, run.measured, on_minibatch, mode=mode)
        run.trace, run.cpu_trace = window.trace, cpu_window.trace
        return run


def _update_hz(meter: PowerMeter | None) -> float | None:
    """The meter's own update rate (Hz), None without a meter or when it does not say."""
    return None if meter is None else meter.update_hz


class TrainingFailed(RuntimeError):
    """Training failed while a mode was measured (the workload's own code, or memory; or the digital twin's
    simulation of it): the message names the workload, the mode, the step and, where found, the line of the
    user's code; the cause is chained."""


#: How a failure's step is named: the phase's minibatches.
_PHASE_NAMES = {WARMUP_PHASE: "warm-up", MEASURE_PHASE: "measured"}
#: Words of an out-of-memory error: torch's CUDA ``OutOfMemoryError`` and its CPU allocator's RuntimeError.
_OUT_OF_MEMORY = ("out of memory", "can't allocate memory")


def _out_of_memory(exc: BaseException) -> bool:
    return (isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError"
            or any(words in str(exc).lower() for words in _OUT_OF_MEMORY))


def training_failed(backend: TrainingBackend, mode: PowerMode | None, step: str, exc: BaseException
                    ) -> TrainingFailed:
    """The :class:`TrainingFailed` for ``exc`` raised at ``step`` (``warm-up minibatch 2 of 5``) of ``mode``; an
    out-of-memory error suggests a smaller ``--batch-size``. Raised by the digital twin (its accelerator), which
    runs none of the workload's code, the fault is jetpredict's and is worded so."""
    # Imported here: the row fields load pandas, and `apply`/`restore` reach this module through the host
    # controller without profiling.
    from jetpredict.models.profile_rows import TWIN_ACCELERATOR

    label = "the mode in force" if mode is None else f"mode {mode.mode}"
    error = f"{type(exc).__name__}: {exc}"
    if backend.accelerator() == TWIN_ACCELERATOR:
        return TrainingFailed(f"the digital twin failed simulating workload {backend.workload!r} at {label}, {step}: "
                              f"{error} (jetpredict's own fault: the twin runs none of the workload's code; "
                              "JETPREDICT_DEBUG=1 shows the traceback)")
    where = backend.user_code_line(exc)
    message = f"workload {backend.workload!r} failed at {label}, {step}{f', at {where}' if where else ''}: {error}"
    if _out_of_memory(exc):
        message += f"; the minibatch does not fit in memory: try a smaller --batch-size than {backend.batch_size}"
    return TrainingFailed(message)


def run_minibatches(backend: TrainingBackend, phase: str, n: int, out: list[MinibatchTiming],
                    on_minibatch: MinibatchCallback | None = None, mode: PowerMode | None = None) -> None:
    """Train ``n`` minibatches, appending each timing to ``out`` (the real and simulated runners share it). A
    minibatch that fails raises :class:`TrainingFailed` naming ``mode`` and its number (bad input as it is;
    the twin's failure worded as the twin's: :func:`training_failed`)."""
    for i in range(n):
        try:
            out.append(backend.next_minibatch())
        except InputError:
            raise
        except Exception as exc:
            raise training_failed(backend, mode, f"{_PHASE_NAMES.get(phase, phase)} minibatch {i + 1} of {n}",
                                  exc) from exc
        if on_minibatch:
            on_minibatch(phase, i + 1, n)


def _no_energy_reason(meter: str, trace: PowerTrace | None, t0: float, t1: float, window: str) -> str | None:
    """Why the ``window`` ``[t0, t1]`` (s) of ``meter`` (its label) has no energy although its samples cover
    it: they add up to 0 J or less, which no powered device draws (a counter that does not advance, a rail the
    sensor does not see); None when they do not (then :func:`window_null_reason` says why)."""
    energy_j = None if trace is None else trace.energy_j(t0, t1)
    if trace is None or energy_j is None or energy_j > 0:
        return None
    what = ("its energy counter did not advance" if trace.energy_counter_j is not None
            else "its readings were 0 W or less")
    return (f"{meter}: read {energy_j:g} J over the {window} of {t1 - t0:.3g} s ({what}); a powered device "
            "draws more than 0 W, so the sensor is not reading it")


def _window_power(meter: str, trace: PowerTrace | None, t0: float, t1: float) -> tuple[float | None, str | None]:
    """Mean power (W) over the measured window ``[t0, t1]`` (s): its energy, integrated over the whole window,
    / its duration; or None with why."""
    energy_j = None if trace is None else trace.energy_j(t0, t1)
    if energy_j is not None and energy_j > 0:  # energy_j needs t1 > t0
        return energy_j / (t1 - t0), None
    return None, (_no_energy_reason(meter, trace, t0, t1, "measured window")
                  or window_null_reason(meter, trace, t0, t1, " (run more --minibatches)"))


def _times(power_w: float | None, epoch_time_s: float) -> float | None:
    """Epoch energy (J) = mean power (W) x epoch time (s); None with the power. Not the window's energy scaled
    by minibatches: the window also holds the gaps between them (the profiler's loop), which the epoch's time
    leaves out."""
    return None if power_w is None else power_w * epoch_time_s


def aggregate_row(measured: Sequence[MinibatchTiming], *, device: str, workload: str,
                  mode: Mapping[str, Any], batch_size: int, num_workers: int, minibatches_per_epoch: int,
                  warmup: int = 0, trace: PowerTrace | None = None,
                  power_meter: str = NO_METER, base_power_w: float | None = None,
                  cpu_trace: PowerTrace | None = None, complexity: Mapping[str, Any] | None = None,
                  cpu_s_per_sample: float | None = None, peak_fp32_flops: float | None = None,
                  accelerator: str = "cpu", source: str = "measured", cpu_power_meter: str = NO_METER
                  ) -> dict[str, Any]:
    """One profile row (profile-row columns + the extras in the module docstring) from measured timings.

    ``mode`` holds ``mode, cpu_cores, cpu_mhz, gpu_mhz, emc_mhz`` (None = unknown). Unknown = None.
    """
    if not measured:
        raise ValueError("aggregate_row needs at least one measured minibatch")
    mpe = int(minibatches_per_epoch)
    stats = {c: summarize([getattr(t, f"{c}_s") for t in measured]) for c in COMPONENTS}
    t0, t1 = measured[0].start_s, measured[-1].end_s
    n = len(measured)

    epoch_time_s = stats["total"].mean * mpe
    avg_power_w, null_reason = _window_power(power_meter, trace, t0, t1)
    cpu_power_w, cpu_null_reason = _window_power(cpu_power_meter, cpu_trace, t0, t1)

    cx = dict(complexity or {})
    flops_train = cx.get("flops_train")
    train_flops_per_s = utilisation = None
    if flops_train and stats["compute"].mean > 0:
        train_flops_per_s = flops_train * batch_size / stats["compute"].mean
        if peak_fp32_flops:
            utilisation = train_flops_per_s / peak_fp32_flops

    row: dict[str, Any] = {
        "device": device, "workload": workload,
        "mode": mode.get("mode"), "cpu_cores": mode.get("cpu_cores"), "cpu_mhz": mode.get("cpu_mhz"),
        "gpu_mhz": mode.get("gpu_mhz"), "emc_mhz": mode.get("emc_mhz"),
        "num_workers": num_workers, "batch_size": batch_size, "minibatches_per_epoch": mpe,
        "epoch_time_s": epoch_time_s,
        "stall_time_s": stats["stall"].mean * mpe,
        "compute_time_s": stats["compute"].mean * mpe,
        "epoch_energy_j": _times(avg_power_w, epoch_time_s), "avg_power_w": avg_power_w,
        "base_power_w": base_power_w, "source": source,
        "power_meter": power_meter, "power_null_reason": null_reason,
        "power_samples": None if trace is None else trace.samples_in(t0, t1),
        "cpu_package_energy_j": _times(cpu_power_w, epoch_time_s),
        "cpu_package_null_reason": cpu_null_reason,
    }
    for c in COMPONENTS:
        for s in STAT_NAMES:
            row[f"mb_{c}_s_{s}"] = getattr(stats[c], s)
        row[f"mb_{c}_cv"] = stats[c].cv
    for key in PROFILE_COMPLEXITY_COLUMNS:
        row[key] = cx.get(key)
    row.update({
        "cpu_s_per_sample": cpu_s_per_sample, "train_flops_per_s": train_flops_per_s,
        "utilisation": utilisation, "accelerator": accelerator,
        "warmup": warmup, "minibatches_measured": n,
    })
    return row


def noisy_measurement_note(row: Mapping[str, Any]) -> str | None:
    """A warning for a profile ``row`` whose timed minibatches varied so much that its ``epoch_time_s`` is
    known to worse than ``NOISY_EPOCH_TIME_REL_SE`` (one relative standard error of their mean,
    ``mb_total_cv / sqrt(minibatches_measured)``), with the minibatch count that would meet it; None otherwise."""
    cv, n = row.get("mb_total_cv"), row.get("minibatches_measured")
    if cv is None or not n or not math.isfinite(cv):
        return None
    rel_se = cv / math.sqrt(n)
    if rel_se <= NOISY_EPOCH_TIME_REL_SE:
        return None
    bar = f"{NOISY_EPOCH_TIME_REL_SE:.0%}"
    # The standard error falls as 1/sqrt(minibatches): this many bring it to the bar, if the spread stays.
    needed = math.ceil(n * (rel_se / NOISY_EPOCH_TIME_REL_SE) ** 2)
    advice = (f", or with --minibatches {needed}" if needed <= MAX_MINIBATCHES_PER_MODE else
              f" (--minibatches {MAX_MINIBATCHES_PER_MODE:,} would not bring it to {bar})")
    return (f"mode {row.get('mode')}: its minibatch times varied (cv {cv:.2f} over {n} minibatches), so its "
            f"epoch_time_s is known to about \u00b1{rel_se * 100:.2g}% (one standard error, above {bar}): something "
            f"else may have shared the device or its clocks moved; profile it again on a quiet device{advice}")
