"""nvpmodel: parse ``/etc/nvpmodel.conf`` and ``nvpmodel -q``, switch presets, and apply custom modes.

A custom mode is a new ``POWER_MODEL`` section (cores online, CPU and GPU MIN_FREQ = MAX_FREQ, EMC cap,
and the GPU power gating and control lines of the board's MAXN) appended to a copy of the board's
configuration and applied with ``nvpmodel -f COPY -m ID``; the original preset comes back with
``nvpmodel -m ORIGINAL_ID`` on the board's own file. A preset only caps its clocks (MIN_FREQ 0: the governors
may run lower), and nvpmodel has no EMC minimum: with ``jetson_clocks=True`` (what ``jetpredict profile`` uses
unless ``--no-lock-clocks``) ``jetson_clocks`` pins CPU, GPU and EMC at each mode's caps after every switch
(the POMACS 2022 method: DVFS off), with ``jetson_clocks --store``/``--restore`` around the run.

A run that starts over a custom mode ``jetpredict apply`` set returns to it by writing the apply's
configuration back and switching with it (:class:`AppliedCustomModel`, kept in memory only).

File units: CPU clocks in kHz, GPU and EMC clocks in Hz; -1 (and 0 for EMC or a MAX) means uncapped.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from jetpredict.models.atomic_files import replace_file
from jetpredict.models.catalogue import Device, PowerMode, Preset, mode_label
from jetpredict.models.errors import InputError
from jetpredict.profiler import sysfs
from jetpredict.profiler.powermode import state as state_file
from jetpredict.profiler.powermode.base import PowerModeController, held_signals
from jetpredict.profiler.powermode.custom import board_steps, read_clocks, soc_paths
from jetpredict.profiler.powermode.privileged import PrivilegedCommandError, run_privileged
from jetpredict.profiler.powermode.state import StateFileError

log = logging.getLogger(__name__)

DEFAULT_CONF = "/etc/nvpmodel.conf"
CUSTOM_NAME = "JETPREDICT_CUSTOM"

#: FILE params that set how much of the GPU is powered (TPC/FBP gating masks) and keep it powered while
#: its clocks are written: written before the clocks, as NVIDIA's own modes do ...
GPU_POWER_PARAMS_BEFORE = ("FBP_POWER_GATING", "TPC_POWER_GATING", "GPU_POWER_CONTROL_ENABLE")
#: ... and this one (power control back to ``auto``) right after the GPU clocks.
GPU_POWER_PARAMS_AFTER = ("GPU_POWER_CONTROL_DISABLE",)

_SECTION = re.compile(r"^<\s*(PARAM|POWER_MODEL|PM_CONFIG)\b(.*?)>\s*$")
_ATTR = re.compile(r"(\w+)\s*=\s*(\S+)")


@dataclass
class NvpParam:
    """A ``PARAM`` section: ``type`` FILE or CLOCK, and its argument names → device paths."""

    name: str
    type: str
    args: dict[str, str] = field(default_factory=dict)


@dataclass
class NvpPowerModel:
    """A ``POWER_MODEL`` section: id, name and ``(param, arg, value)`` settings in file order."""

    id: int
    name: str
    settings: list[tuple[str, str, str]] = field(default_factory=list)

    def values(self, param: str, arg: str) -> list[str]:
        return [v for p, a, v in self.settings if p == param and a == arg]


@dataclass
class NvpmodelConf:
    """A parsed nvpmodel configuration file."""

    params: dict[str, NvpParam]
    models: dict[int, NvpPowerModel]
    default_id: int | None
    text: str = ""

    def model(self, name_or_id: str | int) -> NvpPowerModel:
        """A power model by id or name (case-insensitive); ``InputError`` lists the valid ones."""
        for m in self.models.values():
            if str(name_or_id).upper() in (m.name.upper(), str(m.id)):
                return m
        valid = ", ".join(f"{m.id}={m.name}" for m in self.models.values())
        raise InputError(f"no nvpmodel power mode {name_or_id!r}; valid: {valid}", "mode")

    def cpu_clock_params(self) -> list[str]:
        return [n for n, p in self.params.items() if p.type == "CLOCK" and n.startswith("CPU")]

    def core_args(self) -> list[str]:
        """``CORE_0``, ``CORE_1``, ... in CPU number order."""
        args = self.params.get("CPU_ONLINE", NvpParam("CPU_ONLINE", "FILE")).args
        return sorted(args, key=lambda a: int(re.sub(r"\D", "", a) or 0))

    def cores_online(self, model: NvpPowerModel) -> int | None:
        """Cores ``model`` leaves online; None when it sets no CPU_ONLINE line.

        A declared core that no model of the file names is never taken offline (TX2's nvpmodel_t186.conf
        never names CORE_0), so it counts as online when a core numbered above it is named; ones above
        every named core need not exist (AGX Orin 32GB's file declares CORE_0-11, its modes name 0-7)."""
        on = [v for p, _, v in model.settings if p == "CPU_ONLINE"]
        if not on:
            return None
        named = {a for m in self.models.values() for p, a, _ in m.settings if p == "CPU_ONLINE"}
        cores = self.core_args()
        top = max((i for i, a in enumerate(cores) if a in named), default=-1)
        return sum(v.strip() == "1" for v in on) + sum(a not in named for a in cores[:top])

    def cpu_of(self, param: str, arg: str) -> int | None:
        """The CPU number (``cpuN``) that ``param``'s ``arg`` path names, or None."""
        m = re.search(r"/cpu(\d+)/", self.params[param].args.get(arg, "")) if param in self.params else None
        return int(m.group(1)) if m else None

    def _caps_mhz(self, model: NvpPowerModel) -> tuple[float | None, float | None, float | None]:
        """``model``'s CPU, GPU and EMC caps in MHz; None where the knob is uncapped (-1, 0 or absent).

        CPU: the lowest cap over the clusters that have one."""

        def cap(param: str, per_mhz: float) -> float | None:
            caps = [int(v) for v in model.values(param, "MAX_FREQ") if v.lstrip("-").isdigit()]
            caps = [c for c in caps if c > 0]
            return min(caps) / per_mhz if caps else None

        cpu_caps = [c for c in (cap(p, 1e3) for p in self.cpu_clock_params()) if c is not None]
        return (min(cpu_caps) if cpu_caps else None), cap("GPU", 1e6), cap("EMC", 1e6)

    def beyond_catalogue(self, device: Device) -> dict[str, list[str]]:
        """Presets whose caps lie above ``device``'s catalogue range: ``{name: ["gpu_mhz=918 > 625", ...]}``.

        Non-empty for a JetPack or module variant the catalogue does not describe (JetPack 6.2 "Super"
        files: nvpmodel_p3767_0003_super.conf caps 25W at GPU 918 / EMC 3199 MHz, above the JetPack 5
        Orin Nano's 625 / 2133 MHz)."""
        tops = {"cpu_mhz": max(device.cpu_steps_mhz), "gpu_mhz": max(device.gpu_steps_mhz),
                "emc_mhz": max(device.emc_steps_mhz)}
        out: dict[str, list[str]] = {}
        for m in self.models.values():
            over = [f"{knob}={cap:g} > {tops[knob]:g}" for knob, cap in zip(tops, self._caps_mhz(m), strict=True)
                    if cap is not None and cap > tops[knob] + 0.01]  # 0.01 MHz: kHz/Hz rounding only
            if over:
                out[m.name] = over
        return out

    def to_mode(self, model: NvpPowerModel, device: Device | None = None) -> PowerMode:
        """The caps of ``model`` as a :class:`PowerMode` (uncapped knobs = the device's top step).

        With a device, a preset whose caps lie above the catalogue's range, or an uncapped preset on a
        board file with such presets, is an :class:`InputError`: its uncapped knobs run at the board's own
        (higher) top clocks, which the catalogue's top step would misrecord.
        """
        cpu_cap, gpu_cap, emc_cap = self._caps_mhz(model)
        if device is not None:
            self._check_within_catalogue(model, device, (cpu_cap, gpu_cap, emc_cap))
        cores = self.cores_online(model)
        if cores is None:
            cores = device.cpu_cores_range[1] if device else len(self.core_args())

        def or_top(cap: float | None, steps: list[float] | None) -> float:
            if cap is not None:
                return cap
            return float(max(steps)) if steps else float("nan")

        cpu = or_top(cpu_cap, device.cpu_steps_mhz if device else None)
        gpu = or_top(gpu_cap, device.gpu_steps_mhz if device else None)
        emc = or_top(emc_cap, device.emc_steps_mhz if device else None)
        # The GPU share its TPC mask leaves powered, as the catalogue's preset of that name transcribes it.
        share = next((p.gpu_share for p in device.presets if p.mode.upper() == model.name.upper()), 1.0) \
            if device else 1.0
        return Preset(mode=model.name, cpu_cores=int(cores), cpu_mhz=cpu, gpu_mhz=gpu, emc_mhz=emc,
                      id=model.id, gpu_share=share)

    def _check_within_catalogue(self, model: NvpPowerModel, device: Device,
                                caps: tuple[float | None, float | None, float | None]) -> None:
        beyond = self.beyond_catalogue(device)
        if not beyond:
            return
        outside = (f"this board's JetPack release or module variant is outside the catalogue's {device.id!r} "
                   f"({device.specs.name}, {device.specs.jetpack})")
        own = beyond.get(model.name)
        if own:
            raise InputError(f"nvpmodel preset {model.name!r} caps {', '.join(own)} MHz, above the catalogue's "
                             f"range: {outside}", "mode")
        uncapped = [knob for knob, cap in zip(("cpu_mhz", "gpu_mhz", "emc_mhz"), caps, strict=True) if cap is None]
        if uncapped:
            others = "; ".join(f"{name}: {', '.join(over)}" for name, over in beyond.items())
            raise InputError(f"nvpmodel preset {model.name!r} leaves {', '.join(uncapped)} uncapped on a board "
                             f"whose presets exceed the catalogue's range ({others} MHz), so its clocks are not "
                             f"the catalogue's top steps: {outside}", "mode")


def parse_nvpmodel_conf(text: str) -> NvpmodelConf:
    """Parse an nvpmodel configuration (``< PARAM ... >``, ``< POWER_MODEL ... >``, ``< PM_CONFIG ... >``)."""
    params: dict[str, NvpParam] = {}
    models: dict[int, NvpPowerModel] = {}
    default_id: int | None = None
    section: NvpParam | NvpPowerModel | None = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = _SECTION.match(line)
        if m:
            kind, attrs = m.group(1), dict(_ATTR.findall(m.group(2)))
            if kind == "PARAM":
                section = params[attrs["NAME"]] = NvpParam(attrs["NAME"], attrs.get("TYPE", "FILE"))
            elif kind == "POWER_MODEL":
                try:
                    mid = int(attrs["ID"])
                except (KeyError, ValueError):
                    raise InputError(f"nvpmodel.conf line {lineno}: POWER_MODEL without a numeric ID",
                                     "nvpmodel_conf") from None
                section = models[mid] = NvpPowerModel(mid, attrs.get("NAME", str(mid)))
            else:
                default_id = int(attrs["DEFAULT"]) if attrs.get("DEFAULT", "").isdigit() else None
                section = None
            continue
        parts = line.split()
        if isinstance(section, NvpParam) and len(parts) >= 2:
            section.args[parts[0]] = parts[1]
        elif isinstance(section, NvpPowerModel) and len(parts) >= 3:
            section.settings.append((parts[0], parts[1], parts[2]))
    if not models:
        raise InputError("nvpmodel.conf has no POWER_MODEL section", "nvpmodel_conf")
    return NvpmodelConf(params, models, default_id, text)


def parse_nvpmodel_query(output: str) -> tuple[str, int | None]:
    """``nvpmodel -q`` output → ``(mode name, id)``.

    The tool prints ``NV Power Mode: <NAME>`` and the id on the next line (other lines such as
    ``NV Fan Mode:quiet`` or warnings may come before).
    """
    lines = [ln.strip() for ln in output.splitlines()]
    for i, line in enumerate(lines):
        m = re.match(r"NV Power Mode\s*:\s*(\S+)", line)
        if m:
            for following in lines[i + 1:]:
                if following.isdigit():
                    return m.group(1), int(following)
            return m.group(1), None
    raise ValueError(f"unexpected nvpmodel -q output: {output.strip()[:120]!r}")


def _max_freq(model: NvpPowerModel, param: str) -> float:
    """The lowest positive MAX_FREQ of ``param`` in ``model`` (file units); uncapped (-1, 0, absent) = inf."""
    caps = [int(v) for v in model.values(param, "MAX_FREQ") if v.lstrip("-").isdigit()]
    positive = [c for c in caps if c > 0]
    return float(min(positive)) if positive else math.inf


def full_power_model(conf: NvpmodelConf) -> NvpPowerModel:
    """The board's MAXN: the model named MAXN (else MAXN_SUPER, ...), else the one with the highest caps.

    Highest caps: GPU clock first, then cores online, CPU clock, EMC clock; a tie goes to the first in the
    file (Orin Nano 8GB has no MAXN: its 15W, GPU uncapped, wins).
    """
    named = [m for m in conf.models.values() if m.name.upper().startswith("MAXN")]
    if named:
        return min(named, key=lambda m: (m.name.upper() != "MAXN", m.id))

    def caps(m: NvpPowerModel) -> tuple[float, ...]:
        online = conf.cores_online(m)
        cores = math.inf if online is None else online
        cpu = min((_max_freq(m, p) for p in conf.cpu_clock_params()), default=math.inf)
        return (_max_freq(m, "GPU"), cores, cpu, _max_freq(m, "EMC"))

    return max(conf.models.values(), key=caps)


def gpu_power_lines(conf: NvpmodelConf, params: tuple[str, ...]) -> list[str]:
    """The MAXN's settings of ``params`` (GPU gating, power control) in file order; none if absent."""
    return [" ".join(s) for s in full_power_model(conf).settings if s[0] in params and s[0] in conf.params]


def render_custom_model(conf: NvpmodelConf, mode: PowerMode, model_id: int) -> str:
    """A ``POWER_MODEL`` section that pins ``mode``'s clocks (MHz) as given: cores online, CPU/GPU min = max, EMC
    capped (nvpmodel sets no EMC minimum: ``jetson_clocks`` pins it, :attr:`NvpmodelController.jetson_clocks`);
    an :class:`InputError` (field ``cpu_cores``) when ``mode`` has more cores than the file's CPU_ONLINE lists.
    Callers pass the board's steps (:func:`custom_caps`), not values the kernel would settle away from.

    It also carries the MAXN's GPU gating and power-control lines: without them a custom mode keeps the TPCs
    the previous preset gated (Orin NX 10W/15W gate half of them), and the predictor assumes the full GPU.
    """
    cores = conf.core_args()
    if cores and mode.cpu_cores > len(cores):
        # A smaller variant (Orin NX 8GB: 6 cores, nvpmodel_p3767_0001.conf) under the catalogue's larger
        # one (Orin NX 16GB: 8): the extra CPU_ONLINE lines would be silently missing, the mode mislabelled.
        raise InputError(f"cpu_cores={mode.cpu_cores:g} but this board's nvpmodel configuration lists "
                         f"{len(cores)} cores (CPU_ONLINE {', '.join(cores)}): the board is a variant with fewer "
                         "cores than the catalogue's device", "cpu_cores")
    cpu_khz, gpu_hz, emc_hz = round(mode.cpu_mhz * 1e3), round(mode.gpu_mhz * 1e6), round(mode.emc_mhz * 1e6)
    lines = [f"< POWER_MODEL ID={model_id} NAME={CUSTOM_NAME} >"]
    lines += [f"CPU_ONLINE {arg} {1 if i < mode.cpu_cores else 0}" for i, arg in enumerate(cores)]
    offline = {conf.cpu_of("CPU_ONLINE", arg) for arg in cores[int(mode.cpu_cores):]} - {None}
    lines += gpu_power_lines(conf, GPU_POWER_PARAMS_BEFORE)
    for p in conf.cpu_clock_params():
        # A cluster whose CPUs are all offline refuses cpufreq writes (EINVAL): its clocks are not set, as in
        # NVIDIA's own files (a cluster's MAX_FREQ names its first CPU, offline only with all the later ones).
        if conf.cpu_of(p, "MAX_FREQ") not in offline:
            lines += [f"{p} MIN_FREQ {cpu_khz}", f"{p} MAX_FREQ {cpu_khz}"]
    if "GPU" in conf.params:
        lines += [f"GPU MIN_FREQ {gpu_hz}", f"GPU MAX_FREQ {gpu_hz}"]
    lines += gpu_power_lines(conf, GPU_POWER_PARAMS_AFTER)
    if "EMC" in conf.params:
        lines.append(f"EMC MAX_FREQ {emc_hz}")
    return "\n".join(lines) + "\n"


def custom_caps(conf: NvpmodelConf, device: Device, mode: PowerMode) -> PowerMode:
    """The clocks (MHz) a custom POWER_MODEL of ``conf`` pins for ``mode``: the board's steps
    (:func:`custom.board_steps`); on a file with no EMC param (L4T 34.0's concord_nvpmodel.conf) no EMC cap
    can be set, so the EMC runs at its top step, where ``jetson_clocks`` pins it."""
    steps = board_steps(device, mode)
    return steps if "EMC" in conf.params else dataclasses.replace(steps, emc_mhz=float(max(device.emc_steps_mhz)))


@dataclass(frozen=True)
class AppliedCustomModel:
    """A custom mode ``jetpredict apply`` left in force: its snapshot (``{"id", "clocks"}``) and the text of
    the configuration that defines it. In memory only: a state file never carries a configuration that
    would be handed to nvpmodel as root."""

    snapshot: dict[str, object]
    conf_text: str


class NvpmodelController(PowerModeController):
    """Presets with ``nvpmodel -m``, custom modes with a custom POWER_MODEL; restores the original preset."""

    kind = state_file.NVPMODEL_KIND
    persistent = True

    def __init__(self, device: Device, conf_path: str = DEFAULT_CONF, jetson_clocks: bool = False,
                 timeout_s: float = 30.0) -> None:
        super().__init__()
        text = sysfs.read_text(conf_path)
        if text is None:
            raise PrivilegedCommandError(f"{conf_path} not readable: is this a Jetson with L4T installed?")
        self.device = device
        self.conf_path = conf_path
        self.conf = parse_nvpmodel_conf(text)
        self.jetson_clocks = jetson_clocks
        self.timeout_s = timeout_s
        self.paths = soc_paths(device.specs.soc)
        self._applied: PowerMode | None = None
        self._custom_file: str | None = None

    def query(self) -> tuple[str, int | None]:
        """The preset in force, from ``nvpmodel -q``."""
        out = run_privileged(["nvpmodel", "-q"], self.timeout_s).stdout
        try:
            return parse_nvpmodel_query(out)
        except ValueError as err:
            raise PrivilegedCommandError(str(err), ["nvpmodel", "-q"]) from None

    def presets(self) -> list[PowerMode]:
        """The board's presets the catalogue can describe; each other one is logged, not substituted."""
        out: list[PowerMode] = []
        for m in self.conf.models.values():
            try:
                out.append(self.conf.to_mode(m, self.device))
            except InputError as err:
                log.warning("%s", err)
        return out

    def current(self) -> PowerMode:
        if self._applied is not None:
            return self._applied
        name, mid = self.query()
        return self._preset_caps(self.conf.model(mid if mid is not None else name))

    def _switch(self, model_id: int, conf_file: str | None = None) -> None:
        argv = ["nvpmodel"] + (["-f", conf_file] if conf_file else []) + ["-m", str(model_id)]
        with held_signals():  # a switch is never cut halfway; a pending Ctrl-C restores right after it
            proc = run_privileged(argv, self.timeout_s)
        text = proc.stdout + proc.stderr
        if "reboot" in text.lower() and "required" in text.lower():
            raise PrivilegedCommandError(f"{' '.join(argv)}: this switch needs a reboot; not done", argv)
        # nvpmodel goes on past a write the kernel refuses and may still exit 0: its output is the only sign.
        errors = [line.strip() for line in text.splitlines() if "NVPM ERROR" in line]
        if errors:
            raise PrivilegedCommandError(f"{' '.join(argv)} failed: {'; '.join(errors[:3])}", argv,
                                         proc.returncode, proc.stderr)

    def _lock_clocks(self) -> None:
        if self.jetson_clocks:
            with held_signals():  # as a switch: a restore on a signal must not run before the pin lands
                run_privileged(["jetson_clocks"], self.timeout_s)

    def _board_preset(self, mode: PowerMode) -> NvpPowerModel | None:
        """The board's POWER_MODEL that ``mode`` names: a catalogue preset of that name, or a mode with that
        name and exactly its caps; None for any other mode (applied as a custom model)."""
        preset = next((m for m in self.conf.models.values() if m.name.upper() == str(mode.mode).upper()), None)
        if preset is not None and (isinstance(mode, Preset)
                                   or self.conf.to_mode(preset, self.device).knobs() == mode.knobs()):
            return preset
        return None

    def _preset_caps(self, preset: NvpPowerModel) -> PowerMode:
        """``preset``'s caps as this board's nvpmodel.conf defines them (a JetPack release may differ from the
        catalogue), each at the step of the board's table the kernel runs it at (:func:`custom.board_steps`)."""
        return board_steps(self.device, self.conf.to_mode(preset, self.device), caps=True)

    def caps_of(self, mode: PowerMode) -> PowerMode:
        """A preset's caps as the board runs them (:meth:`_preset_caps`); any other mode at the board's steps its
        custom POWER_MODEL pins (:func:`custom.board_steps`)."""
        preset = self._board_preset(mode)
        return custom_caps(self.conf, self.device, mode) if preset is None else self._preset_caps(preset)

    def apply(self, mode: PowerMode) -> None:
        """A preset (by name) through ``nvpmodel -m``; any other mode as a custom POWER_MODEL."""
        preset = self._board_preset(mode)
        if preset is not None:
            self._switch(preset.id)
            self._lock_clocks()
            self._applied = self._preset_caps(preset)
            return
        self.device.validate_mode(*mode.knobs())
        custom_id = max(self.conf.models) + 1
        caps = custom_caps(self.conf, self.device, mode)
        body = self.conf.text.rstrip("\n") + "\n\n" + render_custom_model(self.conf, caps, custom_id)
        self._custom_file = self._write_custom_conf(body)
        self._switch(custom_id, self._custom_file)
        self._lock_clocks()
        self._applied = PowerMode(mode.mode or mode_label(*mode.knobs()), int(mode.cpu_cores),
                                  float(caps.cpu_mhz), float(caps.gpu_mhz), float(caps.emc_mhz))

    @staticmethod
    def _write_custom_conf(text: str) -> str:
        """Write a custom configuration (atomically) and return its path."""
        # Beside the state file, not in /tmp: `jetpredict restore` removes it after a crash.
        path = state_file.state_dir() / state_file.CUSTOM_CONF_NAME
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        replace_file(path, text.encode())
        return str(path)

    def read_back(self) -> PowerMode:
        return read_clocks(self.paths)

    def snapshot(self, store_name: str = state_file.CLOCKS_STORE_NAME) -> dict[str, object]:
        """The preset in force and, with :attr:`jetson_clocks`, its clocks stored under ``store_name``."""
        name, mid = self.query()
        state: dict[str, object] = {"id": mid if mid is not None else self.conf.model(name).id, "clocks": None}
        if self.jetson_clocks:
            state["clocks"] = self._store_clocks(store_name)
        return state

    def _store_clocks(self, store_name: str) -> str:
        """``jetson_clocks --store`` into ``store_name`` in the state directory; its path."""
        path = state_file.state_dir() / store_name
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # jetson_clocks refuses to overwrite a store (it asks on stdin, which we close): one left by a run
        # killed before its state file would block every later run. Safe to drop: no record names this one
        # (snapshot() runs with no state file, snapshot_in_force and claim_record pick a name the record's
        # is not).
        _unlink(str(path))
        run_privileged(["jetson_clocks", "--store", str(path)], self.timeout_s)
        return str(path)

    def claim_record(self, record: state_file.RestoreState, in_force: object) -> state_file.RestoreState:
        """``record`` naming a store of the clocks before this run's first pin, when it pins and the record
        names none (an apply's, an unfinished unlocked run's): else ``jetpredict restore`` after a crash would
        leave the pins. The store is the run's own (``in_force``'s, or one taken now), never the record's."""
        if not self.jetson_clocks or not isinstance(record.snapshot, dict) or record.snapshot.get("clocks"):
            return record
        own = in_force.snapshot if isinstance(in_force, AppliedCustomModel) else in_force
        store = own.get("clocks") if isinstance(own, dict) else None
        store = store or self._store_clocks(state_file.RUN_CLOCKS_STORE_NAME)
        return dataclasses.replace(record, snapshot={**record.snapshot, "clocks": store}, jetson_clocks=True)

    def drop_own_files(self, kept: state_file.RestoreState) -> None:
        """Remove the clocks stores of the state directory but the one ``kept``, written back, names."""
        named = _named_store(kept)
        for name in state_file.CLOCKS_STORE_NAMES:
            path = str(state_file.state_dir() / name)
            if path != named:
                _unlink(path)

    def snapshot_in_force(self, kept: state_file.RestoreState) -> dict[str, object] | AppliedCustomModel | None:
        """The preset in force, or the custom model ``apply`` set with its configuration (which this run's
        own custom modes overwrite); None when a model in force is neither (its configuration is gone). Its
        clocks go to a store ``kept``, the apply's record, does not name (that one keeps what it restores)."""
        run_store = state_file.state_dir() / state_file.RUN_CLOCKS_STORE_NAME
        # The run store by default: claim_record may hand it to a record naming none, as one of another mode.
        taken = state_file.CLOCKS_STORE_NAME if _named_store(kept) == str(run_store) else run_store.name
        snapshot = self.snapshot(taken)
        mid = snapshot["id"]
        if mid in self.conf.models:
            return snapshot
        path = state_file.state_dir() / state_file.CUSTOM_CONF_NAME
        try:
            state_file.check_owner(path, path.stat())  # as root, only root's own file goes to nvpmodel
            text = path.read_text()
            conf = parse_nvpmodel_conf(text)
        except (OSError, UnicodeDecodeError, InputError, StateFileError) as err:
            log.warning("the custom nvpmodel configuration of power mode %s cannot be used: %s", mid, err)
            return None
        model = conf.models.get(mid)  # type: ignore[arg-type]
        if model is None or model.name != CUSTOM_NAME:
            log.warning("power mode %s in force is not in %s nor a jetpredict custom model of %s", mid,
                        self.conf_path, path)
            return None
        return AppliedCustomModel(snapshot, text)

    def restore_state(self, snapshot: dict[str, object]) -> state_file.RestoreState:
        model = self.conf.models.get(int(snapshot["id"]))  # type: ignore[arg-type]
        original = {"mode": model.name if model else str(snapshot["id"]), "nvpmodel_id": snapshot["id"]}
        return state_file.RestoreState(kind=self.kind, device=self.device.id, snapshot=snapshot,
                                       original=original, conf_path=self.conf_path,
                                       jetson_clocks=self.jetson_clocks)

    def check_snapshot(self, snapshot: object, store_dir: Path | None = None) -> tuple[int, str | None]:
        """``(nvpmodel id, jetson_clocks store or None)`` from ``snapshot``, or :class:`StateFileError`.

        The snapshot may come from a state file on disk, and its clocks path is handed to
        ``jetson_clocks --restore`` and then deleted as root: it must be the state directory's own store
        (``store_dir``'s, else any of :func:`state.state_dirs`).
        """
        if not isinstance(snapshot, dict):
            raise StateFileError(f"nvpmodel snapshot is a {type(snapshot).__name__}, not a mapping")
        extra = set(snapshot) - {"id", "clocks"}
        if extra:
            raise StateFileError(f"nvpmodel snapshot has unexpected fields {sorted(map(str, extra))}")
        mid = snapshot.get("id")
        if not isinstance(mid, int) or isinstance(mid, bool) or mid < 0:
            raise StateFileError(f"nvpmodel snapshot id {mid!r} is not a power mode number")
        clocks = snapshot.get("clocks")
        if clocks is None:
            return mid, None
        dirs = [store_dir] if store_dir is not None else state_file.state_dirs()
        stores = {str(d / name) for d in dirs for name in state_file.CLOCKS_STORE_NAMES}
        if not isinstance(clocks, str) or clocks not in stores:
            raise StateFileError(f"nvpmodel snapshot clocks {clocks!r} is not the jetson_clocks store of the "
                                 f"state directory ({' or '.join(sorted(stores))})")
        return mid, clocks

    def restore_snapshot(self, state: dict[str, object], store_dir: Path | None = None) -> None:
        """Switch back to a record's preset and jetson_clocks settings; ``store_dir``: where the state file is.
        A record's store under :data:`state.RUN_CLOCKS_STORE_NAME` was taken in another mode than the one
        restored: its caps must not outlive the switch, so it goes first."""
        self._put_back(state, store_dir, in_force=False)

    def restore_in_force(self, state: dict[str, object] | AppliedCustomModel) -> None:
        """Switch back to the preset (or the custom model ``apply`` set) :meth:`snapshot_in_force` took, then
        its clocks, stored in that mode whatever the store's name."""
        self._put_back(state, None, in_force=True)

    def _put_back(self, state: dict[str, object] | AppliedCustomModel, store_dir: Path | None,
                  in_force: bool) -> None:
        applied = state if isinstance(state, AppliedCustomModel) else None
        mid, clocks = self.check_snapshot(applied.snapshot if applied is not None else state, store_dir)
        # Stores are removed with the state file (clear_state) or by drop_own_files, never here: a record
        # written back may name one.
        first = not in_force and clocks is not None and Path(clocks).name == state_file.RUN_CLOCKS_STORE_NAME
        if first:
            run_privileged(["jetson_clocks", "--restore", clocks], self.timeout_s)
        self._applied = None
        if applied is not None:
            # Its model is in the apply's configuration, which our own custom modes replaced: write it back.
            # It stays beside the apply's record (`jetpredict restore` removes it): not ours to drop.
            self._switch(mid, self._write_custom_conf(applied.conf_text))
            self._custom_file = None
        else:
            self._switch(mid)
        if clocks and not first:
            run_privileged(["jetson_clocks", "--restore", clocks], self.timeout_s)
        self._drop_custom_file()

    def _drop_custom_file(self) -> None:
        if self._custom_file:
            _unlink(self._custom_file)
            self._custom_file = None


def _unlink(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _named_store(record: state_file.RestoreState | None) -> str | None:
    """The jetson_clocks store ``record``'s snapshot names, or None."""
    snapshot = record.snapshot if record is not None else None
    clocks = snapshot.get("clocks") if isinstance(snapshot, dict) else None
    return clocks if isinstance(clocks, str) else None
