"""The Jetson device catalogue: specs, frequency steps, nvpmodel presets and the custom power-mode space.

Each device is one TOML file in ``models/devices/`` (our own format; every number cites its source in a
comment). The full space of custom modes (cores x CPU steps x GPU steps x EMC steps) is never
materialised as objects: :class:`ModeSpace` indexes it by mixed radix and hands out numpy arrays for
vectorised prediction.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import get_type_hints

import numpy as np
from jetpredict.models.device_toml import DeviceFileError, read_device_table
from jetpredict.models.errors import InputError, ModeOutOfRangeError, UnknownDeviceError
from jetpredict.models.numbers import checked_number, unit_hint
from jetpredict.models.paths import data_path

DEVICES_DIR = data_path("devices")

#: The mode sets named by one word (the CLI's ``devices --modes``, the API's ``space`` and ``modes``): a
#: device's nvpmodel presets or its whole custom space; the first is the default.
POWER_MODE_SPACES: tuple[str, ...] = ("presets", "all")
#: Mode knobs in the order used by every table and array in jetpredict.
MODE_FIELDS: tuple[str, ...] = ("cpu_cores", "cpu_mhz", "gpu_mhz", "emc_mhz")

#: Published caps are rounded (CPU "2265" for a 2265.6 MHz step); a knob this close to the range is in.
RANGE_TOLERANCE_MHZ = 1.0

#: Plausible module power, W. The top of a module's range is this multiple of its published module power
#: (``specs.module_power_w``: the largest nvpmodel budget or the module's maximum, from jetson_specs.csv):
#: MAXN is not budget-capped and input rails include conversion losses, so readings somewhat above the
#: budget are real, but twice it is not that module (most often milliwatts written as watts).
POWER_HEADROOM = 2.0
#: The bottom of every module's range, W: the digital twin's lowest Nano modes draw 0.3 W, and no powered
#: Jetson module reads below a tenth of a watt.
MIN_MODULE_POWER_W = 0.1


def knob_unit(field: str) -> str:
    """The unit written after a knob's value in a message: ``" MHz"`` for a clock, none for ``cpu_cores``."""
    return "" if field == "cpu_cores" else " MHz"


def knob_tolerance(field: str) -> float:
    """How far past its range a knob is still taken: :data:`RANGE_TOLERANCE_MHZ` for a clock, 0 for cores."""
    return 0.0 if field == "cpu_cores" else RANGE_TOLERANCE_MHZ


@dataclass(frozen=True)
class PowerMode:
    """One power mode: cores online and CPU/GPU/EMC clocks in MHz."""

    mode: str
    cpu_cores: int
    cpu_mhz: float
    gpu_mhz: float
    emc_mhz: float

    def knobs(self) -> tuple[int, float, float, float]:
        return (self.cpu_cores, self.cpu_mhz, self.gpu_mhz, self.emc_mhz)

    def as_dict(self) -> dict[str, object]:
        return {"mode": self.mode, **dict(zip(MODE_FIELDS, self.knobs(), strict=True))}


@dataclass(frozen=True)
class Preset(PowerMode):
    """An nvpmodel preset: its id in ``/etc/nvpmodel.conf`` and its power budget in W (None = uncapped)."""

    id: int = 0
    power_budget_w: float | None = None
    #: Share of the GPU's SMs the preset keeps powered (its ``TPC_PG_MASK`` gates the rest; 1 = all, as in
    #: every custom mode): the GPU's throughput and switching power at a clock scale with it.
    gpu_share: float = 1.0

    def listing(self) -> dict[str, object]:
        """The preset as ``jetpredict devices`` and ``GET /v1/devices/{id}/power-modes`` list it."""
        return {**self.as_dict(), "nvpmodel_id": self.id, "power_budget_w": self.power_budget_w,
                "gpu_share": self.gpu_share}


@dataclass(frozen=True)
class DeviceSpecs:
    """Published hardware facts of one Jetson module."""

    name: str
    soc: str
    cpu_type: str
    cpu_cores: int
    gpu_arch: str
    gpu_sms: int
    cuda_cores: int
    tensor_cores: int
    memory_gb: float
    memory_type: str
    memory_bus_bits: int
    peak_bandwidth_gbs: float
    module_power_w: float
    jetpack: str


#: Two clocks within this relative step are one setting: a catalogue step and the published nvpmodel cap of
#: one setting differ by fractions of a percent (2265.6 vs 2265 MHz), while the closest real steps of any
#: Jetson lie 0.58% apart (AGX Orin CPU).
SAME_CLOCK_REL = 1e-3


def _floats(values: object) -> np.ndarray:
    return np.atleast_1d(np.asarray(values, dtype=float))


@dataclass(frozen=True, eq=False)
class ModeArrays:
    """Power modes as aligned float arrays: online cores (count) and CPU/GPU/EMC clocks (MHz).

    Any array-like (or scalar) is accepted and stored as a 1-d float array; all four must broadcast to
    one length.
    """

    cpu_cores: np.ndarray
    cpu_mhz: np.ndarray
    gpu_mhz: np.ndarray
    emc_mhz: np.ndarray
    #: Share of the GPU's SMs powered per mode (:attr:`Preset.gpu_share`; 1 for custom modes). Not a knob:
    #: a preset's own property, which the predictor and the twin read with the GPU clock.
    gpu_share: np.ndarray | float = 1.0

    def __post_init__(self) -> None:
        names = (*MODE_FIELDS, "gpu_share")
        arrays = [_floats(getattr(self, k)) for k in names]
        try:
            n = np.broadcast_shapes(*(a.shape for a in arrays))
        except ValueError:
            lengths = ", ".join(f"{k} {a.size}" for k, a in zip(names, arrays, strict=True))
            raise InputError(f"modes must give one value per mode in every column, or one for all; got {lengths}",
                             "modes") from None
        for k, a in zip(names, arrays, strict=True):
            object.__setattr__(self, k, a if a.shape == n else np.broadcast_to(a, n).copy())

    @classmethod
    def from_frame(cls, frame: Mapping[str, object]) -> ModeArrays:
        """From a table (or mapping) with the columns ``cpu_cores, cpu_mhz, gpu_mhz, emc_mhz``."""
        return cls(*(np.asarray(frame[k], dtype=float) for k in MODE_FIELDS))

    @classmethod
    def from_modes(cls, modes: PowerMode | Sequence[PowerMode]) -> ModeArrays:
        """From one :class:`PowerMode` or a sequence of them (in their order)."""
        listed = [modes] if isinstance(modes, PowerMode) else list(modes)
        knobs = np.array([m.knobs() for m in listed], dtype=float).reshape(-1, len(MODE_FIELDS))
        return cls(*knobs.T, gpu_share=np.array([getattr(m, "gpu_share", 1.0) for m in listed], dtype=float))

    @classmethod
    def of(cls, modes: object) -> ModeArrays:
        """Any form of modes as :class:`ModeArrays`: itself, a :class:`PowerMode` or a sequence of them, a
        :class:`ModeSpace`, or a table/mapping with the four knob columns. InputError (field ``modes``)
        for anything else."""
        if isinstance(modes, ModeArrays):
            return modes
        if isinstance(modes, ModeSpace):
            return modes.arrays()
        if isinstance(modes, PowerMode) or (isinstance(modes, list | tuple) and modes
                                            and all(isinstance(m, PowerMode) for m in modes)):
            return cls.from_modes(modes)
        try:
            return cls.from_frame(modes)  # type: ignore[arg-type]
        except InputError:
            raise
        except (KeyError, TypeError, IndexError, ValueError):
            raise InputError(f"modes must give {', '.join(MODE_FIELDS)}", "modes") from None

    @classmethod
    def of_device(cls, device: Device) -> ModeArrays:
        """Every mode of ``device``'s power-mode space, in ``Device.modes()`` order."""
        return device.modes().arrays()

    def __len__(self) -> int:
        return int(self.cpu_cores.shape[0])

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The knobs in ``MODE_FIELDS`` order."""
        return self.cpu_cores, self.cpu_mhz, self.gpu_mhz, self.emc_mhz

    def as_dict(self) -> dict[str, np.ndarray]:
        """``{knob: float array}`` in ``MODE_FIELDS`` order."""
        return dict(zip(MODE_FIELDS, self.arrays(), strict=True))

    def columns(self) -> dict[str, np.ndarray]:
        """``{knob: array}`` for tables and answers: cores as integers, clocks as floats (MHz)."""
        return {**self.as_dict(), "cpu_cores": self.cpu_cores.astype(int)}

    def take(self, index: np.ndarray | slice) -> ModeArrays:
        """The modes at ``index`` (an index array, boolean mask or slice)."""
        return ModeArrays(*(a[index] for a in self.arrays()), gpu_share=self.gpu_share[index])

    @property
    def gpu_throughput_mhz(self) -> np.ndarray:
        """The GPU clock times its powered share (MHz): what the GPU's compute throughput follows."""
        return self.gpu_mhz * self.gpu_share

    def reach(self) -> dict[str, np.ndarray]:
        """:meth:`as_dict` with the GPU as its throughput clock: how far each mode reaches along each knob
        (a gated preset's GPU reaches less far than its clock), for profiled ranges and extrapolation."""
        return {**self.as_dict(), "gpu_mhz": self.gpu_throughput_mhz}

    @property
    def gated(self) -> np.ndarray:
        """Per mode, True where a preset powers only part of the GPU."""
        return self.gpu_share < 1.0

    def out_of_range(self, device: Device) -> dict[str, str]:
        """``{knob: message}`` for each knob with a value outside ``device``'s range (empty when all fit)."""
        return device.out_of_range(*self.arrays())

    def setting_ids(self) -> tuple[np.ndarray, np.ndarray]:
        """Per mode, the index of its distinct mode and of its distinct clock setting (CPU, GPU and EMC
        clocks equal within :data:`SAME_CLOCK_REL`, any cores): O(n log n), for rows of any number."""
        cached = self.__dict__.get("_setting_ids")
        if cached is None:
            clock_key = np.zeros(len(self), dtype=np.int64)
            # A gated preset and the custom mode at its clocks are two settings.
            for mhz in (self.cpu_mhz, self.gpu_throughput_mhz, self.emc_mhz):
                levels = _clock_levels(mhz)
                clock_key = clock_key * (int(levels.max(initial=0)) + 1) + levels
            _, clock_id = np.unique(clock_key, return_inverse=True)
            cores = np.unique(self.cpu_cores, return_inverse=True)[1]
            _, mode_id = np.unique(clock_id * (int(cores.max(initial=0)) + 1) + cores, return_inverse=True)
            # Cached on the (immutable) value: a fit asks for it once per evidence kind.
            cached = (mode_id.ravel(), clock_id.ravel())
            object.__setattr__(self, "_setting_ids", cached)
        return cached

    def distinct_count(self) -> int:
        """The number of distinct modes."""
        return int(self.setting_ids()[0].max()) + 1 if len(self) else 0


def _clock_levels(mhz: np.ndarray) -> np.ndarray:
    """Level index per clock value: sorted values chained within :data:`SAME_CLOCK_REL` share one level."""
    levels = np.unique(mhz)
    new = np.concatenate([[True], levels[1:] > levels[:-1] * (1.0 + SAME_CLOCK_REL)])
    return (np.cumsum(new) - 1)[np.searchsorted(levels, mhz)]


def mode_label(cpu_cores: int, cpu_mhz: float, gpu_mhz: float, emc_mhz: float) -> str:
    """The label of a custom mode, e.g. ``8c-2265.6-1377-2133`` (cores, CPU/GPU/EMC MHz)."""
    return f"{int(cpu_cores)}c-{float(cpu_mhz):g}-{float(gpu_mhz):g}-{float(emc_mhz):g}"


def nearest_step(steps: Sequence[float], value: float) -> float:
    """The step of ``steps`` nearest ``value`` (same unit): the one a custom mode's clock is pinned at."""
    return min(steps, key=lambda s: abs(s - value))


def step_at_or_below(steps: Sequence[float], cap: float) -> float:
    """The step a max cap runs at (same unit as ``steps``): the highest of ``steps`` at or below ``cap``, the
    lowest when all are above it (cpufreq's CPUFREQ_RELATION_H under scaling_max_freq, devfreq's floor OPP of
    max_freq)."""
    return max((s for s in steps if s <= cap), default=min(steps))


class ModeSpace(Sequence[PowerMode]):
    """All custom power modes of a device, indexable without building them.

    Index ``i`` decomposes in mixed radix (cores, CPU step, GPU step, EMC step), EMC fastest.
    """

    def __init__(self, cores: Sequence[int], cpu_mhz: Sequence[float], gpu_mhz: Sequence[float],
                 emc_mhz: Sequence[float]) -> None:
        self._axes = (tuple(cores), tuple(cpu_mhz), tuple(gpu_mhz), tuple(emc_mhz))
        self._radix = tuple(len(a) for a in self._axes)

    def __len__(self) -> int:
        return int(np.prod(self._radix))

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(f"mode index {index} outside 0..{n - 1}")
        digits = []
        for radix in reversed(self._radix):
            index, digit = divmod(index, radix)
            digits.append(digit)
        c, cpu, gpu, emc = (axis[d] for axis, d in zip(self._axes, reversed(digits), strict=True))
        return PowerMode(mode_label(c, cpu, gpu, emc), int(c), float(cpu), float(gpu), float(emc))

    def __iter__(self) -> Iterator[PowerMode]:
        for i in range(len(self)):
            yield self[i]

    def arrays(self) -> ModeArrays:
        """Every mode as :class:`ModeArrays`, in index order."""
        grids = np.meshgrid(*[np.asarray(a, dtype=float) for a in self._axes], indexing="ij")
        return ModeArrays(*(g.ravel() for g in grids))

    def labels(self) -> list[str]:
        a = self.arrays()
        return [mode_label(*k) for k in zip(a.cpu_cores.astype(int), a.cpu_mhz, a.gpu_mhz, a.emc_mhz,
                                            strict=True)]


@dataclass(frozen=True)
class Device:
    """One Jetson type: specs, DVFS steps, nvpmodel presets and its custom power-mode space."""

    id: str
    specs: DeviceSpecs
    cpu_cores_range: tuple[int, int]
    cpu_steps_mhz: tuple[float, ...]
    gpu_steps_mhz: tuple[float, ...]
    emc_steps_mhz: tuple[float, ...]
    presets: tuple[Preset, ...]
    default_preset: str
    sources: dict[str, str]
    #: The GPU table (MHz) the presets' caps apply to, where the presets come from another software release
    #: than :attr:`gpu_steps_mhz` (AGX Orin); empty: the same table.
    preset_gpu_steps_mhz: tuple[float, ...] = ()

    @property
    def name(self) -> str:
        return self.specs.name

    def modes(self) -> ModeSpace:
        """The full custom power-mode space (lazy; ``len()`` gives its size)."""
        lo, hi = self.cpu_cores_range
        return ModeSpace(range(lo, hi + 1), self.cpu_steps_mhz, self.gpu_steps_mhz, self.emc_steps_mhz)

    def preset(self, name_or_id: str | int) -> Preset:
        """A preset by nvpmodel name (case-insensitive) or numeric id."""
        for p in self.presets:
            if str(name_or_id).upper() in (p.mode.upper(), str(p.id)):
                return p
        valid = ", ".join(f"{p.id}={p.mode}" for p in self.presets)
        raise ModeOutOfRangeError(f"device {self.id!r} has no preset {name_or_id!r}; valid: {valid}", "mode")

    def preset_steps(self, preset: Preset) -> Preset:
        """``preset`` at the clocks (MHz) its caps run at: CPU and GPU each at the highest catalogue step at or
        below its cap (:func:`step_at_or_below`, the kernel's resolution of a max cap; the GPU on the presets'
        own table, :attr:`preset_gpu_steps_mhz`, where they have one), the EMC at its cap (the BPMP resolves
        it, and a preset row records the cap). On the board the profiler resolves the caps against the board's
        own sysfs tables (``profiler.powermode.custom.board_steps(caps=True)``); off the board the
        catalogue's steps stand in for them."""
        return replace(preset, cpu_mhz=step_at_or_below(self.cpu_steps_mhz, preset.cpu_mhz),
                       gpu_mhz=step_at_or_below(self.preset_gpu_steps_mhz or self.gpu_steps_mhz, preset.gpu_mhz))

    def preset_knobs(self, preset: Preset) -> set[tuple[float, ...]]:
        """The knobs a row of ``preset`` may hold: its caps, or the steps they run at (:meth:`preset_steps`,
        what a board's preset row records)."""
        return {preset.knobs(), self.preset_steps(preset).knobs()}

    def _at_preset(self, preset: Preset, labels: Sequence[object], modes: ModeArrays) -> np.ndarray:
        """Per mode, whether it is ``preset``: labelled with its name (case-insensitive) at its knobs, either its
        caps or the steps they run at (:meth:`preset_steps`, what a board's preset row records; clocks within
        :data:`SAME_CLOCK_REL`). The knobs first (vectorised): only the few modes there have their label read."""
        at = np.zeros(len(modes), dtype=bool)
        for knobs in self.preset_knobs(preset):
            here = modes.cpu_cores == knobs[0]
            for mhz, want in zip((modes.cpu_mhz, modes.gpu_mhz, modes.emc_mhz), knobs[1:], strict=True):
                here &= np.abs(mhz - want) <= SAME_CLOCK_REL * want
            at |= here
        for i in np.flatnonzero(at):
            at[i] = str(labels[i]).strip().upper() == preset.mode.upper()
        return at

    def gpu_shares(self, labels: Sequence[object], modes: ModeArrays) -> np.ndarray:
        """Per mode, the powered GPU share (:attr:`Preset.gpu_share`) of the preset it is (:meth:`_at_preset`);
        1 for every other mode (custom modes power the whole GPU)."""
        shares = np.ones(len(modes))
        labels = list(labels)
        for preset in (p for p in self.presets if p.gpu_share < 1.0):
            shares[self._at_preset(preset, labels, modes)] = preset.gpu_share
        return shares

    def as_preset(self, mode: PowerMode) -> PowerMode:
        """The preset ``mode`` is (:meth:`_at_preset`), else ``mode``: as ``nvpmodel -m`` runs a row's preset,
        with its gating, whatever object carries the label."""
        modes = ModeArrays.from_modes(mode)
        return next((p for p in self.presets if self._at_preset(p, [mode.mode], modes)[0]), mode)

    def runs_at(self, mode: PowerMode) -> PowerMode:
        """The mode a board runs for ``mode`` (clocks in MHz): the preset it names at its knobs
        (:meth:`as_preset`: caps and gating), else ``mode`` with each clock at the nearest step
        (:meth:`nearest_mode`, as ``jetpredict apply`` and a custom mode pin them), under the label asked for."""
        preset = self.as_preset(mode)
        if isinstance(preset, Preset):
            return preset
        return PowerMode(mode.mode, *self.nearest_mode(*mode.knobs()).knobs())

    def labelled_modes(self, frame: Mapping[str, object]) -> ModeArrays:
        """The knob columns of a table of modes (profile rows, mode lists) as :class:`ModeArrays`, each mode
        with the GPU share its label and knobs give (:meth:`gpu_shares`; no ``mode`` column: all 1)."""
        modes = ModeArrays.from_frame(frame)
        labels = frame.get("mode")
        return modes if labels is None else replace(modes, gpu_share=self.gpu_shares(list(labels), modes))

    @property
    def maxn(self) -> Preset:
        """The fastest preset (MAXN or its equivalent)."""
        return max(self.presets, key=lambda p: (p.gpu_mhz, p.emc_mhz, p.cpu_mhz * p.cpu_cores))

    def knob_steps(self) -> dict[str, tuple[float, ...]]:
        """Each knob's values: the online core counts, the frequency steps (MHz)."""
        lo_cores, hi_cores = self.cpu_cores_range
        return {"cpu_cores": tuple(float(c) for c in range(lo_cores, hi_cores + 1)),
                "cpu_mhz": tuple(self.cpu_steps_mhz), "gpu_mhz": tuple(self.gpu_steps_mhz),
                "emc_mhz": tuple(self.emc_steps_mhz)}

    def knob_ranges(self) -> dict[str, tuple[float, float]]:
        """Inclusive (min, max) of each knob."""
        return {k: (min(v), max(v)) for k, v in self.knob_steps().items()}

    def validate_mode(self, cpu_cores: float, cpu_mhz: float, gpu_mhz: float, emc_mhz: float) -> None:
        """Raise :class:`ModeOutOfRangeError` naming the first knob outside this device's range."""
        bad = self.out_of_range(np.atleast_1d(cpu_cores), np.atleast_1d(cpu_mhz),
                                np.atleast_1d(gpu_mhz), np.atleast_1d(emc_mhz))
        if bad:
            field, message = next(iter(bad.items()))
            raise ModeOutOfRangeError(message, field)

    def out_of_range(self, cpu_cores: np.ndarray, cpu_mhz: np.ndarray, gpu_mhz: np.ndarray,
                     emc_mhz: np.ndarray) -> dict[str, str]:
        """For arrays of modes: ``{field: message}`` for each knob with a value outside the range."""
        problems: dict[str, str] = {}
        values = dict(zip(MODE_FIELDS, (cpu_cores, cpu_mhz, gpu_mhz, emc_mhz), strict=True))
        for field, (lo, hi) in self.knob_ranges().items():
            v = np.asarray(values[field], dtype=float)
            tol = knob_tolerance(field)
            bad = ~np.isfinite(v) | (v < lo - tol) | (v > hi + tol)
            if bad.any():
                problems[field] = (f"{field}={v[bad][0]:g} is outside device {self.id!r}: "
                                   f"must be in {lo:g}..{hi:g}{knob_unit(field)}")
            elif field == "cpu_cores" and (v != np.round(v)).any():
                # Inside the range but fractional: "outside 1..8" would be false for 4.5; say the rule broken.
                problems[field] = (f"{field}={v[v != np.round(v)][0]:g} must be a whole number of cores "
                                   f"(device {self.id!r}: {lo:g}..{hi:g})")
        return problems

    def nearest_mode(self, cpu_cores: int, cpu_mhz: float, gpu_mhz: float, emc_mhz: float) -> PowerMode:
        """The catalogue mode whose steps are nearest to the given knobs (each knob snapped on its own)."""
        self.validate_mode(cpu_cores, cpu_mhz, gpu_mhz, emc_mhz)

        c = int(round(cpu_cores))
        cpu, gpu, emc = (nearest_step(self.cpu_steps_mhz, cpu_mhz), nearest_step(self.gpu_steps_mhz, gpu_mhz),
                         nearest_step(self.emc_steps_mhz, emc_mhz))
        return PowerMode(mode_label(c, cpu, gpu, emc), c, cpu, gpu, emc)

    def power_caps_w(self) -> list[float]:
        """The power caps this module is run at (W, ascending): each preset's nvpmodel budget and the module's
        published maximum (an uncapped MAXN runs up to it)."""
        return sorted({p.power_budget_w for p in self.presets if p.power_budget_w} | {self.specs.module_power_w})

    @property
    def power_range_w(self) -> tuple[float, float]:
        """Plausible mean module power (W), inclusive: :data:`MIN_MODULE_POWER_W` to
        :data:`POWER_HEADROOM` x the published module power."""
        return MIN_MODULE_POWER_W, POWER_HEADROOM * self.specs.module_power_w

    @property
    def cap_hint_range_w(self) -> tuple[float, float]:
        """Where a refused power cap read in another unit must land (W, inclusive) for the unit hint:
        from the lowest nvpmodel budget over :data:`POWER_HEADROOM` (each device's reference sweep holds
        modes drawing less: some mode meets such a cap, while 100 on AGX Xavier read as 0.1 W is the floor
        none meets) up to the top of :attr:`power_range_w`."""
        return self.power_caps_w()[0] / POWER_HEADROOM, self.power_range_w[1]

    def power_problem(self, field: str, value: float, *, cap: bool = False) -> str | None:
        """Why ``value`` (W, a measured or derived mean power; a power cap when ``cap``) cannot be this
        module's, naming the likely unit mistake; ``None`` when it is plausible. A cap's unit hint names only a
        cap within :attr:`cap_hint_range_w`; a measured power's, any power within :attr:`power_range_w`."""
        lo, hi = self.power_range_w
        if lo <= value <= hi:
            return None
        top = (f"what a {self.name} module draws (at most {hi:g} W: {POWER_HEADROOM:g} x its "
               f"{self.specs.module_power_w:g} W module power)")
        return power_out_of_range(field, value, (lo, hi), top, self.cap_hint_range_w if cap else (lo, hi))

    def check_power_cap(self, value: float | None, field: str = "max_power_w") -> float | None:
        """A power cap (W) for this device: ``None`` (no cap) or a number in :attr:`power_range_w`; a cap
        above everything the module can draw is an error (7000 is not "no cap", it is 7 W in milliwatts),
        and so is one below what any module draws, raised as :class:`InputError` naming ``field``."""
        if value is None:
            return None
        number = checked_number(value, field)
        problem = self.power_problem(field, number, cap=True)
        if problem is not None:
            advice = "; leave the cap out for no cap" if number > self.power_range_w[1] else ""
            raise InputError(f"{problem}{advice}", field)
        return number

    def peak_fp32_flops(self, gpu_mhz):
        """FP32 peak in FLOP/s at a GPU clock: CUDA cores x 2 (FMA) x f. Works on arrays."""
        return self.specs.cuda_cores * 2.0 * np.asarray(gpu_mhz, dtype=float) * 1e6

    def peak_bandwidth(self, emc_mhz):
        """DRAM bandwidth in B/s at an EMC clock: bus bytes x 2 transfers per clock (DDR) x f."""
        return self.specs.memory_bus_bits / 8.0 * 2.0 * np.asarray(emc_mhz, dtype=float) * 1e6


def below_any_module(low_w: float) -> str:
    """The words for a power (W) below :data:`MIN_MODULE_POWER_W` (``low_w``), said of rows and caps alike."""
    return f"below the {low_w:g} W any powered Jetson module draws"


def power_out_of_range(field: str, value: float, range_w: tuple[float, float], top: str,
                       hint_range_w: tuple[float, float]) -> str:
    """``field=value W is above <top>`` or ``... is below the <low> W any powered Jetson module draws``, and
    the unit slip it looks like (milliwatts above, kilowatts below) where the value read so lands inside
    ``hint_range_w`` (W)."""
    low, high = range_w
    where = f"above {top}" if value > high else below_any_module(low)
    hint = unit_hint(value, *hint_range_w, "W", {"milliwatts": 1e-3} if value > high else {"kilowatts": 1e3})
    return f"{field}={value:g} W is {where}{hint}"

def _preset_from_toml(raw: dict, steps: dict[str, tuple[float, ...]], gpu_sms: int) -> Preset:
    # In nvpmodel files -1 / 0 mean "no cap": the preset then runs at the top step.
    def cap(key: str, domain: str) -> float:
        v = raw.get(key, "max")
        return max(steps[domain]) if v == "max" else float(v)

    sms = int(raw.get("gpu_sms_online", gpu_sms))  # in 1..gpu_sms (device_toml)
    return Preset(
        mode=raw["name"], id=int(raw["id"]), cpu_cores=int(raw["cpu_cores"]),
        cpu_mhz=cap("cpu_mhz", "cpu"), gpu_mhz=cap("gpu_mhz", "gpu"), emc_mhz=cap("emc_mhz", "emc"),
        power_budget_w=raw.get("power_budget_w"), gpu_share=sms / gpu_sms,
    )


def _device_from_toml(raw: dict) -> Device:
    steps = {d: tuple(float(x) for x in raw["steps"][f"{d}_mhz"]) for d in ("cpu", "gpu", "emc")}
    presets = tuple(_preset_from_toml(p, steps, int(raw["specs"]["gpu_sms"])) for p in raw["presets"])
    return Device(
        id=raw["id"],
        specs=DeviceSpecs(**raw["specs"]),
        cpu_cores_range=(int(raw["steps"]["cpu_cores_min"]), int(raw["steps"]["cpu_cores_max"])),
        cpu_steps_mhz=steps["cpu"],
        gpu_steps_mhz=steps["gpu"],
        emc_steps_mhz=steps["emc"],
        presets=presets,
        default_preset=raw.get("default_preset", presets[0].mode),
        sources=dict(raw.get("sources", {})),
        preset_gpu_steps_mhz=tuple(float(x) for x in raw["steps"].get("preset_gpu_mhz", ())),
    )


def load_device_file(path: Path) -> Device:
    """The device of one catalogue file, checked as it is read (:mod:`~jetpredict.models.device_toml`; here,
    each preset's clocks inside the device's range): :class:`DeviceFileError` names the file, field and rule."""
    device = _device_from_toml(read_device_table(path, get_type_hints(DeviceSpecs)))
    for i, preset in enumerate(device.presets):
        for knob, rule in device.out_of_range(*([v] for v in preset.knobs())).items():
            raise DeviceFileError(path, f"presets[{i}].{knob}", f"preset {preset.mode!r}: {rule}")
    return device


@cache
def _load_all() -> dict[str, Device]:
    # Every id is its file's name (device_toml): no file replaces another's device, and sorting the names
    # sorts the ids ("nano" before "nano-2", where the whole file names sort "nano-2.toml" first).
    files = sorted(DEVICES_DIR.glob("*.toml"), key=lambda path: path.stem)
    return {device.id: device for device in map(load_device_file, files)}


def list_devices() -> list[Device]:
    """Every device in the catalogue, sorted by id."""
    return list(_load_all().values())


def device_ids() -> list[str]:
    return list(_load_all())


def load_device(device_id: str) -> Device:
    """The catalogue entry for ``device_id``; :class:`UnknownDeviceError` names the valid ids."""
    devices = _load_all()
    try:
        return devices[device_id]
    except KeyError:
        raise UnknownDeviceError(
            f"unknown device {device_id!r}; valid devices: {', '.join(devices)}", "device") from None


def resolve_device(device: Device | str) -> Device:
    """The catalogue :class:`Device` for an id, or ``device`` as given: called once at each entry point
    (CLI, HTTP route, public Python call), so that everything below takes a :class:`Device`."""
    if isinstance(device, Device):
        return device
    if not isinstance(device, str) or not device:
        raise InputError(f"device must be a catalogue id, got {device!r}", "device")
    return load_device(device)
