"""Custom power modes written straight to sysfs, and reading back the clocks in force, per SoC family.

Units in sysfs: CPU ``scaling_*_freq`` in kHz, GPU devfreq ``*_freq`` in Hz, EMC caps and rates in Hz.
Paths are those the L4T nvpmodel configuration files name for each family (T210 Nano, T194 Xavier,
T234 Orin; JetPack 6 "KNEXT" locations listed after JetPack 4/5 ones).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

from jetpredict.models.catalogue import Device, PowerMode, Preset, mode_label, nearest_step, step_at_or_below
from jetpredict.models.errors import InputError
from jetpredict.profiler import sysfs
from jetpredict.profiler.powermode.base import PowerModeController, RestoreIncomplete, held_signals
from jetpredict.profiler.powermode.privileged import PrivilegedCommandError, write_sysfs
from jetpredict.profiler.powermode.state import StateFileError

CPU_DIR = "/sys/devices/system/cpu"
#: What a saved knob may hold: integers (kHz, Hz, 0/1), space-separated where a file lists several.
_KNOB_VALUE = re.compile(r"-?\d{1,20}(?:[ \t]+-?\d{1,20}){0,15}")


@dataclass(frozen=True)
class SocPaths:
    """Where one SoC family keeps its DVFS knobs (device paths; candidates tried in order)."""

    soc: str
    gpu_devfreq: tuple[str, ...]
    emc_cap: tuple[str, ...]
    emc_rate: tuple[str, ...]
    # (file holding 1 to lock, file taking the rate in Hz): pins EMC, which nvpmodel can only cap.
    emc_lock: tuple[str, str] | None


SOC_PATHS: dict[str, SocPaths] = {
    "T210": SocPaths(
        "T210",
        gpu_devfreq=("/sys/devices/gpu.0/devfreq/57000000.gpu",),
        emc_cap=("/sys/kernel/nvpmodel_emc_cap/emc_iso_cap",),
        emc_rate=("/sys/kernel/debug/clk/emc/clk_rate",),
        emc_lock=("/sys/kernel/debug/clk/override.emc/clk_state",
                  "/sys/kernel/debug/clk/override.emc/clk_update_rate"),
    ),
    "T194": SocPaths(
        "T194",
        # devfreq/devfreq0: a gv11b (T194 GPU) node that L4T names only as the FREQ_TABLE_KNEXT of its Nano
        # file (nvpmodel_t210_jetson-nano.conf, as carried by BirdEdge-OS etc/nvpmodel.conf); tried last.
        gpu_devfreq=("/sys/devices/17000000.gv11b/devfreq/17000000.gv11b",
                     "/sys/devices/gpu.0/devfreq/17000000.gv11b", "/sys/devices/17000000.gv11b/devfreq_dev",
                     "/sys/devices/17000000.gv11b/devfreq/devfreq0"),
        emc_cap=("/sys/kernel/nvpmodel_emc_cap/emc_iso_cap",),
        emc_rate=("/sys/kernel/debug/bpmp/debug/clk/emc/rate",),
        emc_lock=("/sys/kernel/debug/bpmp/debug/clk/emc/mrq_rate_locked",
                  "/sys/kernel/debug/bpmp/debug/clk/emc/rate"),
    ),
    "T234": SocPaths(
        "T234",
        # 17000000.ga10b/devfreq_dev: the GPU *_KNEXT paths of the L4T r35 Orin files (nvpmodel_p3701_0000.conf,
        # nvpmodel_p3767_0000.conf, ...); platform/17000000.gpu/devfreq_dev: those of the r36 files.
        gpu_devfreq=("/sys/devices/17000000.ga10b/devfreq/17000000.ga10b",
                     "/sys/devices/17000000.ga10b/devfreq_dev",
                     "/sys/devices/platform/17000000.gpu/devfreq_dev",
                     "/sys/devices/platform/bus@0/17000000.gpu/devfreq/17000000.gpu",
                     "/sys/devices/gpu.0/devfreq/17000000.ga10b"),
        emc_cap=("/sys/kernel/nvpmodel_emc_cap/emc_iso_cap", "/sys/kernel/nvpmodel_clk_cap/emc"),
        emc_rate=("/sys/kernel/debug/bpmp/debug/clk/emc/rate",),
        emc_lock=("/sys/kernel/debug/bpmp/debug/clk/emc/mrq_rate_locked",
                  "/sys/kernel/debug/bpmp/debug/clk/emc/rate"),
    ),
}


def soc_paths(soc: str) -> SocPaths:
    try:
        return SOC_PATHS[soc.upper()]
    except KeyError:
        raise LookupError(f"no sysfs layout for SoC {soc!r}; known: {', '.join(SOC_PATHS)}") from None


def _first_existing(candidates: tuple[str, ...]) -> str | None:
    return next((c for c in candidates if sysfs.exists(c)), None)


def cpu_ids() -> list[int]:
    """CPU numbers present (``cpu0``, ``cpu1``, ...), sorted."""
    ids = []
    for p in sysfs.glob(f"{CPU_DIR}/cpu*"):
        if re.fullmatch(r"cpu\d+", p.name):
            ids.append(int(p.name[3:]))
    return sorted(ids)


def cpu_online(cpu: int) -> bool:
    # cpu0 usually has no "online" file: it cannot be taken offline.
    value = sysfs.read_int(f"{CPU_DIR}/cpu{cpu}/online")
    return True if value is None else value == 1


def gpu_dir(paths: SocPaths) -> str | None:
    return _first_existing(paths.gpu_devfreq)


def _mhz(value: int | None, per_mhz: float) -> float:
    return float("nan") if value is None else value / per_mhz


def read_clocks(paths: SocPaths, label: str = "read-back") -> PowerMode:
    """Cores online and the CPU/GPU/EMC clocks in force now (MHz; NaN where a file is unreadable).

    CPU: the fastest online core's ``scaling_cur_freq``. EMC: the rate from debugfs, NaN when it cannot be
    read (root-only): the nvpmodel cap is only a bound on it (:func:`emc_cap_mhz`, :func:`emc_unknown_reason`).
    """
    online = [c for c in cpu_ids() if cpu_online(c)]
    cpu_khz = [sysfs.read_int(f"{CPU_DIR}/cpu{c}/cpufreq/scaling_cur_freq") for c in online]
    cpu_khz = [k for k in cpu_khz if k is not None]
    gpu = gpu_dir(paths)
    gpu_hz = sysfs.read_int(f"{gpu}/cur_freq") if gpu else None
    emc_hz = next((hz for candidate in paths.emc_rate if (hz := sysfs.read_int(candidate))), None)
    return PowerMode(label, len(online), _mhz(max(cpu_khz) if cpu_khz else None, 1e3),
                     _mhz(gpu_hz, 1e6), _mhz(emc_hz or None, 1e6))


def emc_cap_mhz(paths: SocPaths) -> float | None:
    """The EMC cap nvpmodel set (MHz; world-readable), None when uncapped (0) or not readable."""
    hz = next((hz for candidate in paths.emc_cap if (hz := sysfs.read_int(candidate))), None)
    return None if hz is None else hz / 1e6


def emc_unknown_reason(cap_mhz: float | None) -> str:
    """Why :func:`read_clocks` has no EMC clock: its rate is in root-only debugfs; and nvpmodel's cap
    (:func:`emc_cap_mhz`; None: uncapped)."""
    bound = f"nvpmodel caps it at {cap_mhz:g} MHz" if cap_mhz is not None else "nvpmodel sets no cap"
    return f"EMC rate needs root (debugfs); {bound}"


def _snap(table: list[int] | None, target: int, floor: bool = False) -> int:
    """The available frequency nearest ``target`` (the kernel would round an off-table value anyway); with
    ``floor``, the one a max cap of ``target`` runs at (:func:`~models.catalogue.step_at_or_below`).
    ``target`` itself without a table."""
    if not table:
        return target
    return int((step_at_or_below if floor else nearest_step)(table, target))


def cpu_step_khz(cpu_mhz: float, cpu: int = 0, floor: bool = False) -> int:
    """The step (kHz) of ``cpu``'s ``scaling_available_frequencies`` nearest ``cpu_mhz`` (with ``floor``, the
    one a cap of ``cpu_mhz`` runs at: :func:`_snap`); without that table, ``cpu_mhz`` itself."""
    table = sysfs.read_ints(f"{CPU_DIR}/cpu{cpu}/cpufreq/scaling_available_frequencies")
    return _snap(table, round(cpu_mhz * 1e3), floor)


def gpu_step_hz(gpu: str | None, gpu_mhz: float, floor: bool = False) -> int:
    """The step (Hz) of the ``gpu`` devfreq node's ``available_frequencies`` nearest ``gpu_mhz`` (with ``floor``,
    the one a cap of ``gpu_mhz`` runs at: :func:`_snap`); without a node or table, ``gpu_mhz`` itself."""
    table = sysfs.read_ints(f"{gpu}/available_frequencies") if gpu else None
    return _snap(table, round(gpu_mhz * 1e6), floor)


def board_steps(device: Device, mode: PowerMode, caps: bool = False) -> PowerMode:
    """``mode`` with the clocks (MHz) a custom mode pins for it on this board: CPU and GPU each the step
    nearest it of the board's table (cpu0's, the GPU devfreq node's; as asked where a table is missing).

    With ``caps`` (``mode`` is a preset's max caps, which the kernel resolves): CPU and GPU each at the highest
    step of the board's table at or below the cap, the lowest below them all (the rule
    :meth:`~models.catalogue.Device.preset_steps` applies to the catalogue's steps off the board).

    The EMC: sysfs lists no table of its rates, so the catalogue's EMC steps (the module's DVFS rates) stand in
    for one: a custom mode pins the step nearest it; a preset keeps its cap, which the BPMP resolves itself,
    and the row records the cap."""
    cpus = cpu_ids()
    cpu_khz = cpu_step_khz(mode.cpu_mhz, cpus[0] if cpus else 0, caps)
    gpu_hz = gpu_step_hz(gpu_dir(soc_paths(device.specs.soc)), mode.gpu_mhz, caps)
    emc_mhz = float(mode.emc_mhz) if caps else nearest_step(device.emc_steps_mhz, mode.emc_mhz)
    return replace(mode, cpu_mhz=cpu_khz / 1e3, gpu_mhz=gpu_hz / 1e6, emc_mhz=emc_mhz)


def _same_value(now: str | None, saved: str) -> bool:
    """Whether a knob's text now (None: unreadable) is its saved text, spacing aside."""
    return now is not None and now.split() == saved.split()


def _set_min_max(directory: str, min_name: str, max_name: str, value: int) -> None:
    # The kernel refuses min > max, so widen first (min down, max up), then pin both.
    lo = sysfs.read_int(f"{directory}/{min_name}")
    if lo is not None and lo > value:
        write_sysfs(f"{directory}/{min_name}", value)
    write_sysfs(f"{directory}/{max_name}", value)
    write_sysfs(f"{directory}/{min_name}", value)


class SysfsController(PowerModeController):
    """Custom modes by writing cores online and CPU/GPU min = max, EMC cap (and lock) directly."""

    kind = "jetson-sysfs"
    persistent = True

    def __init__(self, device: Device) -> None:
        super().__init__()
        self.device = device
        self.paths = soc_paths(device.specs.soc)
        self._applied: PowerMode | None = None

    def _candidate_files(self) -> list[str]:
        """Every knob this controller may write, present or not (an offline CPU may hide its cpufreq files)."""
        files = [f"{CPU_DIR}/cpu{c}/online" for c in cpu_ids() if c != 0]
        for c in cpu_ids():
            files += [f"{CPU_DIR}/cpu{c}/cpufreq/scaling_min_freq", f"{CPU_DIR}/cpu{c}/cpufreq/scaling_max_freq"]
        gpu = gpu_dir(self.paths)
        if gpu:
            files += [f"{gpu}/min_freq", f"{gpu}/max_freq"]
        files += list(self.paths.emc_cap)
        if self.paths.emc_lock:
            files += list(self.paths.emc_lock)
        return files

    def _files(self) -> list[str]:
        """Every knob this controller may write that exists now, in the order they are restored."""
        return [f for f in self._candidate_files() if sysfs.exists(f)]

    def check_snapshot(self, snapshot: object) -> dict[str, str]:
        """``snapshot`` as ``{knob: value}`` when it only names this controller's knobs with integer values.

        The snapshot may come from a state file on disk: anything else (another path, text that is not
        clock numbers, another shape) raises :class:`StateFileError` instead of being written as root.
        """
        if not isinstance(snapshot, dict):
            raise StateFileError(f"sysfs snapshot is a {type(snapshot).__name__}, not a mapping of knobs to values")
        allowed = set(self._candidate_files())
        checked: dict[str, str] = {}
        for key, value in snapshot.items():
            if key not in allowed:
                raise StateFileError(f"sysfs snapshot names {key!r}, which is not a knob of {self.device.id}")
            if isinstance(value, int) and not isinstance(value, bool):
                value = str(value)
            if not isinstance(value, str) or not _KNOB_VALUE.fullmatch(value):
                raise StateFileError(f"sysfs snapshot value {value!r} for {key} is not a clock/knob number")
            checked[key] = value
        return checked

    def snapshot(self) -> dict[str, str]:
        return {f: text for f in self._files() if (text := sysfs.read_text(f)) is not None}

    def restore_state(self, snapshot: dict[str, str]):
        from jetpredict.profiler.powermode.state import RestoreState

        return RestoreState(kind=self.kind, device=self.device.id, snapshot=snapshot,
                            original={"mode": f"sysfs settings of {len(snapshot)} knobs"})

    def differences(self, snapshot: object) -> dict[str, tuple[str | None, str]]:
        """The knobs of ``snapshot`` (checked: :meth:`check_snapshot`) that hold another value now: each
        with (its text now, None when unreadable; the saved text). Empty: the board is as saved."""
        return {f: (now, saved) for f, saved in self.check_snapshot(snapshot).items()
                if not _same_value(now := sysfs.read_text(f), saved)}

    def restore_snapshot(self, state: dict[str, str], store_dir: Path | None = None) -> None:
        """Write back every knob of ``state`` that holds another value now (cores first, each min/max pair in
        the order the kernel takes); :class:`RestoreIncomplete` naming the knobs still away from their saved
        values when writes fail. A knob already at its value is not rewritten: a file the kernel keeps
        read-only (which no switch could change either) does not fail a restore with nothing to do."""
        state = self.check_snapshot(state)
        errors: list[str] = []

        def put(f: str) -> None:
            if _same_value(sysfs.read_text(f), state[f]):
                return
            try:
                write_sysfs(f, state[f])
            except PrivilegedCommandError as err:
                errors.append(str(err))

        done: set[str] = set()
        for f in state:  # cores first: a CPU's cpufreq files only take writes while it is online
            if f.endswith("/online"):
                put(f)
                done.add(f)
        for f in state:
            name = f.rsplit("/", 1)[-1]
            if f in done or "min_freq" not in name:
                continue
            partner = f[: -len(name)] + name.replace("min_freq", "max_freq")
            # The kernel refuses min > max: lower the min first when the saved max is below it.
            current_min = sysfs.read_int(f) or 0
            saved_max = int(state.get(partner, "0").split()[0] or 0)
            order = [f, partner] if partner in state and saved_max < current_min else [partner, f]
            for g in order:
                if g in state:
                    put(g)
                    done.add(g)
        for f in state:
            if f not in done:
                put(f)
        self._applied = None
        if not errors:
            return
        differ = self.differences(state)
        if not differ:  # a refused write of a value the knob holds all the same: the board is as saved
            return
        held = "; ".join(f"{f} holds {'?' if now is None else now}, saved {saved}"
                         for f, (now, saved) in differ.items())
        raise RestoreIncomplete(f"restoring the original mode failed: {'; '.join(errors[:3])}; "
                                f"{len(differ)} knob(s) differ from the original: {held}", differ)

    def current(self) -> PowerMode:
        if self._applied is not None:
            return self._applied
        online = [c for c in cpu_ids() if cpu_online(c)]
        cpu_max = sysfs.read_int(f"{CPU_DIR}/cpu0/cpufreq/scaling_max_freq")
        gpu = gpu_dir(self.paths)
        gpu_max = sysfs.read_int(f"{gpu}/max_freq") if gpu else None
        cap = emc_cap_mhz(self.paths)
        emc = max(self.device.emc_steps_mhz) if cap is None else cap
        return PowerMode("current", len(online), _mhz(cpu_max, 1e3), _mhz(gpu_max, 1e6), emc)

    def apply(self, mode: PowerMode) -> None:
        """Pin ``mode`` (validated against the device's range; clocks snap to available steps); an
        :class:`InputError` (field ``cpu_cores``) when the board has fewer CPUs than ``mode`` asks for."""
        self.device.validate_mode(*mode.knobs())
        present = cpu_ids()
        if present and mode.cpu_cores > len(present):
            # A smaller module variant than the catalogue's (Orin NX 8GB: 6 cores, not 8): never pin fewer
            # cores than the mode's label says.
            raise InputError(f"cpu_cores={mode.cpu_cores:g} but this board has {len(present)} CPUs "
                             f"(cpu{present[0]}..cpu{present[-1]}): a variant with fewer cores than "
                             f"the catalogue's {self.device.id!r}", "cpu_cores")
        with held_signals():  # all knobs or none: a Ctrl-C waits until the mode is whole, then restores
            self._apply(mode)

    def _apply(self, mode: PowerMode) -> None:
        cores, preset = int(mode.cpu_cores), isinstance(mode, Preset)
        caps = self.caps_of(mode)
        for c in cpu_ids():
            if c != 0 and sysfs.exists(f"{CPU_DIR}/cpu{c}/online"):
                write_sysfs(f"{CPU_DIR}/cpu{c}/online", 1 if c < cores else 0)
        for c in cpu_ids():
            d = f"{CPU_DIR}/cpu{c}/cpufreq"
            # Each CPU pins a step of its own cluster's table; the record (caps_of) holds one clock, cpu0's:
            # cpu0 is the one CPU always online (it has no online file).
            if cpu_online(c) and sysfs.exists(f"{d}/scaling_max_freq"):
                _set_min_max(d, "scaling_min_freq", "scaling_max_freq", cpu_step_khz(mode.cpu_mhz, c, preset))
        gpu = gpu_dir(self.paths)
        if gpu is None:
            raise PrivilegedCommandError(f"{self.device.id}: no GPU devfreq node among {self.paths.gpu_devfreq}")
        _set_min_max(gpu, "min_freq", "max_freq", round(caps.gpu_mhz * 1e6))
        emc_hz = round(caps.emc_mhz * 1e6)
        cap = _first_existing(self.paths.emc_cap)
        if cap:
            write_sysfs(cap, emc_hz)
        if self.paths.emc_lock and all(sysfs.exists(p) for p in self.paths.emc_lock):
            write_sysfs(self.paths.emc_lock[0], 1)
            write_sysfs(self.paths.emc_lock[1], emc_hz)
        label = mode.mode or mode_label(*mode.knobs())
        self._applied = PowerMode(label, cores, float(caps.cpu_mhz), float(caps.gpu_mhz), float(caps.emc_mhz))

    def caps_of(self, mode: PowerMode) -> PowerMode:
        """``mode`` with the clocks (MHz) :meth:`apply` pins for it (:func:`board_steps`): a preset's caps each
        at the step it runs at (at or below it, as ``nvpmodel -m`` would), any other mode at the nearest."""
        return board_steps(self.device, mode, caps=isinstance(mode, Preset))

    def read_back(self) -> PowerMode:
        return read_clocks(self.paths)
