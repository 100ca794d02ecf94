"""A profiling campaign: each power mode in turn, every finished mode written out at once.

Output files (decided here, documented in ``jetpredict profile --help``):

- ``--out FILE.csv`` (any name not ending in ``.json``): the profile rows as CSV, rewritten atomically with
  every row so far after each finished mode, plus the raw sidecar ``FILE.csv.json``.
- ``--out FILE.json``: one JSON document only. Either way the JSON holds ``rows`` (the same rows, so
  ``models.profile_files.read_profile_rows`` reads it) and ``modes``: per mode the requested and read-back
  clocks, every warm-up and measured minibatch as columns (``warmup`` and ``minibatches`` each map
  ``stall_s``, ``compute_s``, ``total_s``, ``start_s``, ``end_s`` to a list, one value per minibatch) and the
  power samples (``times_s``, ``power_w``); times are seconds since the campaign started on the runner's
  clock (``time.perf_counter()``, or the twin's simulated clock, in which case ``started_utc`` is null so
  that a seeded twin profile is the same bytes in every run). The JSON is compact (no indentation) and
  rewritten atomically after each mode. A ``FILE.json`` is kept within its readers' ``MAX_FILE_BYTES``:
  refused before the first mode when its minibatches alone would pass it, stopped before a mode that would.

Adaptive campaigns (``profile --adaptive``): a :class:`ModeChooser` given by the caller (the command line
passes the predictor's, which the profiler does not import) picks each next mode from the rows measured so
far and says when to stop; the campaign measures and writes each mode exactly as in a fixed list. The JSON's
``adaptive`` is false for a fixed list; for an adaptive run the chooser's record: its settings and, per round, the
mode picked and why or why it stopped (``true`` in sidecars written before it, and from a chooser that keeps none).

A crash loses at most the mode in progress. An existing output file is replaced only when the first mode
has been measured: a campaign that fails before that (another run holds the power modes, the controller
cannot start) leaves it as it was, and a concurrent run never sees a truncated file.
The campaign is given its parts as a typed :class:`CampaignParts` (modes, a
:class:`~profiler.runner.ModeRunner` holding the backend and meters, a controller); real and simulated
devices differ only in those parts.
"""

from __future__ import annotations

import io
import math
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from jetpredict.models.atomic_files import (
    PairWriteError,
    followed,
    is_special_file,
    make_out_folder,
    probe_folder,
    replace_file,
    replace_pair,
)
from jetpredict.models.catalogue import MODE_FIELDS, Device, PowerMode, load_device
from jetpredict.models.errors import InputError, say, say_above_bars
from jetpredict.models.jsonsafe import json_safe
from jetpredict.models.profile_files import (
    JSON_NUMBER_BYTES,
    check_json_size,
    compact_json,
    output_paths,
    rows_to_records,
    write_profile_csv,
)
from jetpredict.models.profile_rows import HOST_DEVICE, validate_records
from jetpredict.models.profiling_protocol import IDLE_S, MEASURED_MINIBATCHES, SETTLE_S, WARMUP_MINIBATCHES
from jetpredict.profiler import runner, upload
from jetpredict.profiler.backends import MinibatchTiming, TrainingBackend
from jetpredict.profiler.complexity import Complexity
from jetpredict.profiler.mode_lists import detect_jetson_device, host_modes, modes_to_profile
from jetpredict.profiler.powermode import base
from jetpredict.profiler.powermode.base import PowerModeController, held_signals, take_mode_lock
from jetpredict.profiler.runner import ModeRun, ModeRunner, RealTimeRunner, RunSettings

if TYPE_CHECKING:
    from jetpredict.profiler.powermode.state import ModeLock

#: /2: a mode's ``warmup`` and ``minibatches`` are columns (one list per field), written without indentation.
JSON_FORMAT = "jetpredict-profile/2"
#: The most bytes a mode's row, clocks and notes (about 2 kB) add to the JSON, with room for long notes.
MODE_RECORD_BYTES = 16 * 1024
TIMING_FIELDS = tuple(f.name for f in fields(MinibatchTiming))  # a minibatch's fields, each a JSON column (s)


class ModeChooser(Protocol):
    """Picks the next mode of an adaptive campaign from the rows measured so far; None stops it."""

    budget: int  # at most this many modes are profiled

    def next_mode(self, rows: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
        """The next mode as ``mode`` plus the knobs (MODE_FIELDS), or None when profiling should stop."""
        ...

    def record(self) -> dict[str, Any]:
        """Its settings and each round's pick and why so far: the sidecar's ``adaptive`` (:func:`_adaptive_record`)."""
        ...


#: Builds the chooser once the device is known: (catalogue id, start modes or None) -> chooser.
ChooserFactory = Callable[[str, list[PowerMode] | None], ModeChooser]


@dataclass
class CampaignConfig:
    """What ``jetpredict profile`` was asked to do (None = the default for the device kind)."""

    device: str
    workload: str
    out: str | Path
    modes: str | None = None
    batch_size: int | None = None
    workers: int | None = None
    warmup: int = WARMUP_MINIBATCHES
    minibatches: int = MEASURED_MINIBATCHES
    settle_s: float | None = None
    idle_s: float = IDLE_S
    hz: float = runner.DEFAULT_SAMPLER_HZ
    data: str | None = None
    upload: str | None = None
    progress: bool = True
    seed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    #: ``profile --adaptive``: builds the chooser of the modes (None = profile ``modes`` as listed).
    adaptive: ChooserFactory | None = None
    #: ``--candidates``: the file the chooser's modes come from (None = every mode), kept in the sidecar.
    candidates: str | None = None
    #: Jetson: pin each mode's clocks at its caps with ``jetson_clocks`` (DVFS off, the POMACS method; stored
    #: and restored around the run); False (``--no-lock-clocks``): measure under the DVFS governors.
    lock_clocks: bool = True


# ---------------------------------------------------------------- output

def _trace_json(trace: Any, t_ref: float) -> dict[str, Any] | None:
    if trace is None:
        return None
    return {"meter": trace.meter_name, "domain": trace.domain, "hz": trace.hz,
            "read_errors": trace.read_errors, "last_error": trace.last_error,
            "times_s": [t - t_ref for t in trace.times_s.tolist()], "power_w": trace.power_w.tolist(),
            "energy_counter_j": None if trace.energy_counter_j is None else trace.energy_counter_j.tolist()}


def _timings_json(timings: list[MinibatchTiming], t_ref: float) -> dict[str, list[float]]:
    """The minibatches as columns, one list per field (s), one value per minibatch in order."""
    shift = {"start_s": t_ref, "end_s": t_ref}  # times since the campaign started; durations as they are
    return {name: [getattr(t, name) - shift.get(name, 0.0) for t in timings] for name in TIMING_FIELDS}


# ---------------------------------------------------------------- progress

class _Progress:
    """A tqdm bar on stderr: mode k of n, phase and minibatch; tqdm adds elapsed time and ETA."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.bar = None
        if enabled:
            try:
                from tqdm import tqdm
            except ImportError:  # tqdm is in the [profiler] extra; the twin runs without it
                say("no progress bar: tqdm is not installed (pip install tqdm)")
                return
            self.bar = tqdm(total=total, file=sys.stderr, unit="mb", dynamic_ncols=True, leave=True)

    def mode(self, k: int, n: int, label: str) -> None:
        self._draw(lambda bar: bar.set_description(f"mode {k}/{n} {label}"))

    def minibatch(self, phase: str, i: int, n: int) -> None:
        def step(bar: Any) -> None:
            bar.set_postfix_str(f"{phase} {i}/{n}", refresh=False)
            bar.update(1)

        self._draw(step)

    def close(self) -> None:
        self._draw(lambda bar: bar.close())
        self.bar = None

    def _draw(self, action: Callable[[Any], object]) -> None:
        """``action(bar)``; once standard error is gone (a hung-up terminal, a closed pipe) the bar is dropped:
        it is for a person, and its failed write would end the run or replace the signal that stops it."""
        if self.bar is None:
            return
        try:
            action(self.bar)
        except OSError:
            self.bar.disable = True  # tqdm's close (also at garbage collection) then writes nothing
            self.bar = None


# ---------------------------------------------------------------- the campaign

@dataclass
class CampaignParts:
    """What a campaign drives: the modes, the runner that measures each (it holds the backend and the
    power meters) and the controller that applies them (None = leave the machine's mode alone)."""

    device_id: str
    catalogue: Device | None
    modes: list[PowerMode]
    runner: ModeRunner
    controller: PowerModeController | None = None
    settle_s: float = 0.0
    notes: list[str] = field(default_factory=list)  # in every mode's sidecar record (how clocks were held)
    #: The power-mode lock taken before the workload was built (``--device jetson``), handed to the controller
    #: as it is entered; released when the campaign ends should it never be (a failure before the first mode).
    mode_lock: ModeLock | None = None

    @property
    def backend(self) -> TrainingBackend:
        return self.runner.backend


def _host_parts(cfg: CampaignConfig) -> CampaignParts:
    from jetpredict.profiler.backends import TorchBackend
    from jetpredict.profiler.power import detect_cpu_package_meter, detect_power_meter
    from jetpredict.profiler.powermode import detect_controller

    modes = host_modes(cfg.modes)
    backend = TorchBackend(cfg.workload, cfg.batch_size, cfg.workers, cfg.data, seed=cfg.seed)
    controller = detect_controller("host")
    # Training on a discrete GPU: its board power (NVML, by the UUID of the torch device that trains). On the
    # CPU, "host" leaves NVML out: an idle GPU's power is not the training device's (CPU package power comes
    # from RAPL below). Meters come last: once opened, nothing here can fail and leave them open.
    meter = detect_power_meter(str(backend.device) if backend.accelerator() == "cuda" else "host")
    runner = RealTimeRunner(backend, meter, detect_cpu_package_meter())
    return CampaignParts(HOST_DEVICE, None, modes, runner, controller, cfg.settle_s or 0.0)


def _jetson_parts(cfg: CampaignConfig) -> CampaignParts:
    from jetpredict.profiler.backends import TorchBackend
    from jetpredict.profiler.power import detect_power_meter
    from jetpredict.profiler.powermode import detect_controller

    device_id = detect_jetson_device()
    device = load_device(device_id)
    modes = modes_to_profile(device, cfg.modes)
    # The power-mode lock before the workload (torch's import, the network: seconds): a second run is refused
    # at once; the campaign hands it to the controller it enters (:func:`_profile`).
    lock = take_mode_lock()
    try:
        backend = TorchBackend(cfg.workload, cfg.batch_size, cfg.workers, cfg.data, seed=cfg.seed)
        controller = detect_controller("jetson", device_id, jetson_clocks=cfg.lock_clocks)  # before a meter
        runner = RealTimeRunner(backend, detect_power_meter(device_id))
    except BaseException:
        lock.release()
        raise
    settle = SETTLE_S if cfg.settle_s is None else cfg.settle_s
    return CampaignParts(device_id, device, modes, runner, controller, settle,
                         [] if cfg.lock_clocks else [UNLOCKED_CLOCKS_NOTE], lock)


#: What a campaign that stops before its first mode is written leaves on disk.
NOTHING_WRITTEN = "no mode was finished: nothing was written (an existing --out is as it was)"


def _sim_parts(cfg: CampaignConfig) -> CampaignParts:
    from jetpredict.profiler.sim import simulated_rig
    from jetpredict.profiler.sim.kernel_costs import TraceFailed

    device = load_device(cfg.device.split(":", 1)[1].strip())
    modes = modes_to_profile(device, cfg.modes)
    try:  # a workload the twin has no cached costs for is traced here, running its model once
        rig = simulated_rig(device, cfg.workload, batch_size=cfg.batch_size, num_workers=cfg.workers,
                            data=cfg.data, seed=cfg.seed)
    except TraceFailed as exc:
        raise runner.TrainingFailed(f"{exc}; {NOTHING_WRITTEN}") from exc.__cause__
    # Simulated time costs nothing: settle as on a real board unless told otherwise.
    settle = SETTLE_S if cfg.settle_s is None else cfg.settle_s
    return CampaignParts(device.id, device, modes, rig.runner, rig.controller, settle)


def build_parts(cfg: CampaignConfig) -> CampaignParts:
    """Runner (backend + meters), controller and modes for ``--device host|jetson|sim:DEVICE``. Jetson parts
    hold the power-mode lock from before the workload is built (``mode_lock``): :func:`run_campaign` releases it."""
    kind = cfg.device.strip().lower()
    if not cfg.lock_clocks and kind != "jetson":  # the host's clocks are never pinned; the twin's always are
        raise InputError(f"--no-lock-clocks applies to --device jetson only; got {cfg.device!r}", "lock_clocks")
    if kind == "host":
        return _host_parts(cfg)
    if kind == "jetson":
        return _jetson_parts(cfg)
    if kind.startswith("sim:"):
        return _sim_parts(cfg)
    raise InputError(f"--device must be host, jetson or sim:DEVICE; got {cfg.device!r}", "device")


def _known(value: float | None) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


#: Every mode's note of a Jetson profile with ``--no-lock-clocks``.
UNLOCKED_CLOCKS_NOTE = ("clocks not locked (--no-lock-clocks): CPU, GPU and EMC ran under their DVFS governors, "
                        "at or below the mode's caps; the row records the caps")
#: A read-back clock further than this from the requested cap is noted in the sidecar, MHz.
READ_BACK_TOLERANCE_MHZ = 1.0


def _mode_fields(requested: PowerMode, in_force: PowerMode | None) -> dict[str, Any]:
    """The row's mode columns: the label and knobs asked for (the mode's caps); NaN -> None.

    A knob the request leaves open (NaN: the host's CPU clock, which the profiler only reads) is taken from
    ``in_force``, the clocks read while training (``PowerModeController.training_clock``). A read-back clock is never a capped
    knob's value: devfreq runs an idle clock below the cap right after a switch (:func:`_read_back_notes`)."""
    fields: dict[str, Any] = {"mode": requested.mode}
    for knob in MODE_FIELDS:
        value = _known(getattr(requested, knob))
        fields[knob] = value if value is not None or in_force is None else _known(getattr(in_force, knob))
    return fields


def _read_back_notes(requested: PowerMode, read_back: PowerMode | None) -> list[str]:
    """Sidecar notes for each knob whose read-back differs from the requested cap (the row keeps the cap)."""
    if read_back is None:
        return []
    notes = []
    for knob in MODE_FIELDS:
        asked, got = _known(getattr(requested, knob)), _known(getattr(read_back, knob))
        if asked is None or got is None:
            continue
        tolerance = 0 if knob == "cpu_cores" else READ_BACK_TOLERANCE_MHZ
        if abs(float(got) - float(asked)) > tolerance:
            notes.append(f"read-back {knob} {got:g} differs from the requested {asked:g} (read once after "
                         f"the switch, possibly at an idle clock below the cap); the row records {asked:g}")
    return notes


class _Outputs:
    """The campaign's files: the CSV and the JSON, each rewritten atomically from every row after each mode.

    Existing files are left alone until the first row is measured: a run that fails before it (another run
    holds the power modes, ``nvpmodel -q`` fails) must not destroy an earlier or concurrent run's outputs.
    """

    def __init__(self, out: str | Path) -> None:
        self.csv_path, self.json_path = output_paths(out)
        self.limited = None if self.csv_path else self.json_path  # a JSON the readers take: not a sidecar
        self.size_bytes = self.largest_mode_bytes = 0  # the JSON's size, and the most one mode added to it
        self.written = 0  # the modes the outputs hold
        for p in self.paths():
            if p.is_dir():
                raise InputError(f"--out {p} is a directory", "out")
            if is_special_file(p):  # a device or FIFO: the outputs are rewritten after every mode
                raise InputError(f"--out {p} is not a regular file: the rows and their sidecar are files "
                                 "rewritten whole after each mode; give a file path", "out")

    def paths(self) -> list[Path]:
        return [p for p in (self.csv_path, self.json_path) if p is not None]

    def start(self, modes: int, settings: RunSettings) -> None:
        """Before the first mode is switched: refuse an ``--out FILE.json`` its minibatches alone would take
        past its readers' limit, create the folders and check that the outputs can be written (untouched).
        After an adaptive run's chooser is made: its budget is the number of modes."""
        check_json_size(self.limited, modes * _mode_bytes_at_most(settings), f"{modes} mode(s) of --warmup "
                        f"{settings.warmup} + --minibatches {settings.minibatches} minibatches would take up to")
        for p in self.paths():
            try:
                make_out_folder(p)
                probe_folder(p)  # the outputs are replaced through a temporary file beside them: probe that
            except OSError as exc:
                raise InputError(f"cannot write --out {p}: {exc.strerror or exc}", "out") from None

    def check_room(self, k: int, n: int) -> None:
        """Before mode ``k`` of ``n``: stop when one as large as the largest so far would not fit (its power
        samples grow with its training time, unknown until it has run)."""
        check_json_size(self.limited, self.size_bytes + self.largest_mode_bytes, f"stopped before mode {k} of "
                        f"{n}: one as large as the largest so far would take it to", kept=k - 1)

    def add(self, rows: Sequence[Mapping[str, Any]], document: dict[str, Any]) -> None:
        """Replace the outputs by every row measured so far (never appended: a file is always whole)."""
        data = compact_json(document)
        check_json_size(self.limited, len(data), f"mode {len(rows)} would take it to", kept=len(rows) - 1)
        with held_signals():  # a stop between the two renames would leave the CSV a mode ahead of its sidecar
            self._write_both(rows, data)
            self.written = len(rows)  # counted before a signal held meanwhile acts
        self.largest_mode_bytes = max(self.largest_mode_bytes, len(data) - self.size_bytes)
        self.size_bytes = len(data)

    def _write_both(self, rows: Sequence[Mapping[str, Any]], data: bytes) -> None:
        """Replace the JSON by ``data`` and the CSV (where there is one) by ``rows``, the two together
        (:func:`replace_pair`): a failure at any step (a full disk, a failed rename) leaves both as they were,
        never the CSV a mode ahead of its sidecar. OSError (exit 1) naming the file and what the outputs hold."""
        path = self.json_path
        try:
            for p in self.paths():
                make_out_folder(p)  # the folder may have been removed since the mode before
            if self.csv_path is None:
                replace_file(followed(path), data)
            else:
                text = io.StringIO(newline="")  # the CSV writer's own "\n" line ends, untranslated everywhere
                write_profile_csv(list(rows), text)
                replace_pair(self.csv_path, text.getvalue().encode("utf-8"), path, data,
                             f"{self.csv_path} and its sidecar {path.name}")
        except OSError as exc:
            modes = len(rows) - 1
            if isinstance(exc, PairWriteError) and not exc.restored:  # the previous CSV could not be put back
                held = f"{self.csv_path} holds mode {len(rows)}, its sidecar the {modes} before it ({exc.strerror})"
            elif modes:
                held = f"{' and '.join(map(str, self.paths()))} hold the {modes} mode(s) measured before it"
            else:
                held = "no mode was written: an existing --out is as it was"
            if isinstance(exc, PairWriteError):  # it names the file of the failed step
                path, reason = exc.filename, exc.reason
            else:  # the JSON alone, or a folder: a temporary file's name would mean nothing to the user
                reason = exc.strerror or str(exc)
            raise OSError(f"cannot write --out {path}: {reason}; {held}") from None


def _mode_bytes_at_most(settings: RunSettings) -> int:
    """The most bytes one mode adds to the JSON but for its power samples: every timing at its longest."""
    return (settings.warmup + settings.minibatches) * len(TIMING_FIELDS) * JSON_NUMBER_BYTES + MODE_RECORD_BYTES


def _adaptive_record(chooser: ModeChooser | None) -> dict[str, Any] | bool:
    """The sidecar's ``adaptive``: False for a fixed list of modes; else the chooser's record (its settings and
    each round's pick and why, so far; sidecars before it said ``true``, which the readers still take)."""
    return False if chooser is None else chooser.record()


def _start_document(cfg: CampaignConfig, parts: CampaignParts, complexity: Complexity | None,
                    rows: list[dict[str, Any]], chooser: ModeChooser | None) -> dict[str, Any]:
    simulated = parts.runner.source == "simulated"
    return {
        "format": JSON_FORMAT, "device": parts.device_id, "workload": parts.backend.workload,
        "started_utc": parts.runner.started_utc(),
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(cfg).items()
                   if k not in ("extra", "adaptive")},
        "adaptive": _adaptive_record(chooser),
        "clock": "simulated seconds since the campaign started" if simulated
        else "seconds since the campaign started (time.perf_counter)",
        "complexity": None if complexity is None else complexity.as_dict(), "rows": rows, "modes": [],
    }


def _caps_notes(asked: PowerMode, caps: PowerMode) -> list[str]:
    """Sidecar notes for each knob the switch set otherwise than asked: a custom clock's step, a preset cap's step
    at or below it, the top EMC step of a configuration that cannot cap it, or a board preset's own cap."""
    return [f"the board set {asked.mode}'s {k} to {getattr(caps, k):g}, not the {getattr(asked, k):g} asked (the "
            f"step of its frequency table it runs at, or its own preset's cap); the row records {getattr(caps, k):g}"
            for k in MODE_FIELDS if _known(getattr(asked, k)) is not None and getattr(caps, k) != getattr(asked, k)]


def _measure_mode(parts: CampaignParts, ctl: PowerModeController | None, mode: PowerMode,
                  settings: RunSettings, progress: _Progress
                  ) -> tuple[ModeRun, PowerMode, PowerMode | None, PowerMode | None]:
    """Apply ``mode`` (when there is a controller), measure it; returns the run, the caps the switch set (a board
    preset's own, clocks at the board's steps, else ``mode``'s), the read-back and the clocks while training."""
    read_back, caps, clock = None, mode, None
    if ctl is not None:
        ctl.apply(mode)
        caps, read_back = ctl.caps_of(mode), ctl.read_back()
        clock = ctl.training_clock(read_back, progress.minibatch)
    run = parts.runner.run_mode(mode, settings, on_minibatch=clock.on_minibatch if clock else progress.minibatch)
    run.notes.extend(parts.notes + _caps_notes(mode, caps) + _read_back_notes(caps, read_back) +
                     ([] if clock is None else [clock.note()]))
    reason = run.base_power_null_reason
    if reason:  # the row format has no column for it
        run.notes.append(f"base_power_w is empty: {reason}")
    if run.trace is not None and len(run.trace):
        warning = run.trace.window_warning(run.measured[0].start_s, run.measured[-1].end_s)
        if warning:
            run.notes.append(warning)
    return run, caps, read_back, read_back if clock is None else clock.in_force()


def _row(parts: CampaignParts, run: ModeRun, fields: dict[str, Any], warmup: int,
         complexity: Complexity | None) -> dict[str, Any]:
    """The validated profile row of one measured mode."""
    backend = parts.backend
    peak = None
    if parts.catalogue is not None and fields.get("gpu_mhz"):
        peak = float(parts.catalogue.peak_fp32_flops(fields["gpu_mhz"]))
    row = runner.aggregate_row(
        run.measured, device=parts.device_id, workload=backend.workload, mode=fields,
        batch_size=backend.batch_size, num_workers=backend.num_workers,
        minibatches_per_epoch=backend.minibatches_per_epoch, warmup=warmup, trace=run.trace,
        power_meter=run.power_meter, base_power_w=run.base_power_w, cpu_trace=run.cpu_trace,
        cpu_power_meter=run.cpu_power_meter,
        complexity=None if complexity is None else complexity.as_dict(),
        cpu_s_per_sample=run.cpu_s_per_sample, peak_fp32_flops=peak, accelerator=backend.accelerator(),
        source=parts.runner.source)
    row["data_source"] = backend.data_source()
    if complexity is not None and complexity.null_reason:
        row["complexity_null_reason"] = complexity.null_reason
    # Check the row against the shared format before it reaches any file.
    return rows_to_records(validate_records([row], what="the measured row"))[0]


def _mode_json(mode: PowerMode, read_back: PowerMode | None, run: ModeRun, t_ref: float) -> dict[str, Any]:
    """The sidecar's record of one mode: clocks asked for and read back, every minibatch, power samples."""
    return {
        "mode": mode.mode, "requested": mode.as_dict(),
        "read_back": None if read_back is None else read_back.as_dict(),
        "idle_window_s": None if run.idle_window_s is None else [t - t_ref for t in run.idle_window_s],
        "warmup": _timings_json(run.warmup, t_ref), "minibatches": _timings_json(run.measured, t_ref),
        "power": _trace_json(run.trace, t_ref), "cpu_power": _trace_json(run.cpu_trace, t_ref),
        "notes": run.notes,
    }


def _chosen_modes(chooser: ModeChooser, rows: list[dict[str, Any]], device: Device | None
                  ) -> Iterator[PowerMode]:
    """The modes an adaptive campaign profiles: asked of ``chooser`` after each measured row."""
    if device is None:
        raise InputError("--adaptive needs Jetson power modes: use --device jetson or sim:DEVICE", "adaptive")
    # The chooser stops at its budget itself, so that it reports the decision the last row leaves.
    while (mode := chooser.next_mode(rows)) is not None:
        if len(rows) >= chooser.budget:
            raise RuntimeError(f"the mode chooser went past its budget of {chooser.budget} modes")
        knobs = [float(mode[k]) for k in MODE_FIELDS]
        device.validate_mode(*knobs)
        yield PowerMode(str(mode["mode"]), int(knobs[0]), knobs[1], knobs[2], knobs[3])


def run_campaign(cfg: CampaignConfig, parts: CampaignParts | None = None) -> list[dict[str, Any]]:
    """Profile every mode (or, with ``cfg.adaptive``, each mode the chooser picks until it stops); returns
    the rows (also written to the output files as each mode ends). The parts are the campaign's: the
    runner's power meters are closed when it ends, on every path (the backend once the modes have run)."""
    settings = RunSettings(warmup=cfg.warmup, minibatches=cfg.minibatches, settle_s=cfg.settle_s or 0.0,
                           idle_s=cfg.idle_s, hz=cfg.hz)
    outputs = _Outputs(cfg.out)
    parts = parts or build_parts(cfg)
    with ExitStack() as owned:
        # The meters hold a tegrastats process or an NVML session: closed however the campaign ends, also
        # when it fails before the first mode (an unwritable --out), and after the mode is restored.
        owned.callback(parts.runner.close)
        if parts.mode_lock is not None:  # a no-op once the controller released it on its way out
            owned.callback(parts.mode_lock.release)
        rows = _profile(cfg, parts, settings, outputs)
    if cfg.upload:
        answer = upload.upload_rows(cfg.upload, json_safe(rows))
        say(f"uploaded {len(rows)} row(s) to {cfg.upload}: {answer}")
    return rows


def _profile(cfg: CampaignConfig, parts: CampaignParts, settings: RunSettings, outputs: _Outputs
             ) -> list[dict[str, Any]]:
    """The campaign proper (:func:`run_campaign`): every mode measured and written out; returns the rows."""
    # Keep the parts' settle time (device-kind default) but every other setting as asked.
    settings = replace(settings, settle_s=parts.settle_s)
    chooser = None
    if cfg.adaptive is not None:
        # Modes given with --modes are profiled first; the chooser picks the rest.
        chooser = cfg.adaptive(parts.device_id, parts.modes if cfg.modes is not None else None)
    n = len(parts.modes) if chooser is None else chooser.budget
    outputs.start(n, settings)
    t_ref = parts.runner.now_s()
    rows: list[dict[str, Any]] = []
    complexity = parts.backend.complexity()
    document = _start_document(cfg, parts, complexity, rows, chooser)
    modes = parts.modes if chooser is None else _chosen_modes(chooser, rows, parts.catalogue)
    progress = _Progress(n * (settings.warmup + settings.minibatches), cfg.progress)
    try:
        with ExitStack() as stack:
            # The controller restores the original mode on every exit; None leaves the mode alone. It claims the
            # modes under the lock taken before the workload was built, and releases it once restored.
            if parts.controller is not None and parts.mode_lock is not None:
                parts.controller.hold_lock(parts.mode_lock)
            ctl = None if parts.controller is None else stack.enter_context(parts.controller)
            stack.callback(parts.backend.close)
            for k, mode in enumerate(modes, start=1):
                outputs.check_room(k, n)
                progress.mode(k, n, mode.mode)
                run, caps, read_back, in_force = _measure_mode(parts, ctl, mode, settings, progress)
                rows.append(_row(parts, run, _mode_fields(caps, in_force), settings.warmup, complexity))
                noisy = runner.noisy_measurement_note(rows[-1])
                if noisy:  # said at once: the mode can be run again while the device is at hand
                    run.notes.append(noisy)
                    say_above_bars(noisy)
                document["modes"].append(_mode_json(mode, read_back, run, t_ref))
                document["adaptive"] = _adaptive_record(chooser)  # up to the round that picked this mode
                outputs.add(rows, document)
            if rows and chooser is not None:  # the round that stopped the loop came after the last write
                document["adaptive"] = _adaptive_record(chooser)
                outputs.add(rows, document)
    except runner.TrainingFailed as exc:
        # Raised once the mode is restored: say what the failed run leaves on disk.
        kept = (f"the {len(rows)} mode(s) profiled before it are in {', '.join(map(str, outputs.paths()))}" if rows
                else NOTHING_WRITTEN)
        raise runner.TrainingFailed(f"{exc}; {kept}") from exc.__cause__
    except KeyboardInterrupt as exc:
        # Also once the mode is restored: the command line's "interrupted" says what the run kept.
        of = "" if chooser is not None else f" of {n}"
        kept = (f"{outputs.written}{of} modes finished, written to {', '.join(map(str, outputs.paths()))}"
                if outputs.written else NOTHING_WRITTEN)
        # Said as SIGTERM's is: a controller that switched put the mode back (a failed restore raises instead).
        if parts.controller is not None and parts.controller.persistent:  # the host's and the twin's switch none
            kept = f"{kept}; {base.RESTORED_CLAUSE}"
        raise KeyboardInterrupt(kept) from exc
    finally:
        progress.close()
    return rows
