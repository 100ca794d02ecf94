"""Per-mode device physics of a Jetson: compute and memory peaks, CPU speed, DataLoader parallelism, power.

Used by the digital twin (``profiler.sim``), which turns a workload's complexity into per-minibatch
timings and power. The predictor does not import it (its own device terms live in ``predictor/``). Pure numpy; every method takes
scalars or arrays and broadcasts, so a whole power-mode space is evaluated at once::

    from jetpredict.profiler.sim.physics import DevicePhysics
    phys = DevicePhysics(load_device("agx-xavier"))
    modes = phys.device.modes().arrays().columns()          # dict of arrays: cpu_cores, cpu_mhz, gpu_mhz, emc_mhz
    phys.peak_fp32_flops(modes["gpu_mhz"])            # FLOP/s
    phys.power_w(modes, gpu_util=0.9, cpu_util=0.3, mem_util=0.4)   # W, module power

Units: clocks in MHz, time in s, power in W, bandwidth in B/s. The few free constants per device
(efficiencies, CPU costs, power coefficients) live in ``profiler/sim/data/twin_calibration.toml``,
written by ``tools/calibrate_twin.py`` from published measurements (or from spec sheets where none exist),
or by hand for a catalogued board it does not fit, which its reruns keep; each device's ``basis`` says which.
"""

from __future__ import annotations

import difflib
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import lru_cache
from pathlib import Path

import numpy as np
from jetpredict.models.catalogue import Device, ModeArrays
from jetpredict.models.errors import InputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CALIBRATION_PATH = Path(__file__).with_name("data") / "twin_calibration.toml"

#: DVFS curve shape (fractions of the domain's top clock / top voltage). Tegra DVFS tables hold the
#: rail at a floor voltage over the low steps and raise it roughly linearly above a knee. The
#: calibration writes both (``dvfs_v_floor`` fitted to low-clock power from this start, ``dvfs_knee``
#: the predictor's ``KNEE_REL``: see ``tools/calibrate_twin.py``); these values are what calibration files
#: made before those keys existed were fitted under, so such files keep their behaviour.
DVFS_V_FLOOR = 0.60
DVFS_KNEE = 0.35

#: Fixed, device-independent constants of the twin (documented in docs/digital-twin.md).
SHARED_KEYS = ("jpeg_decode_s_per_mpix", "worker_contention", "sched_interference", "roofline_sharpness",
               "gpu_stream_b_per_core_cycle", "dvfs_v_floor", "dvfs_knee", "cpu_mem_wait_s_ghz",
               "gpu_latency_power_share")
#: Defaults of shared constants added after the first calibrations (older files lack them): the voltage
#: floor and knee of the DVFS curve, no GPU-side limit on memory streaming, CPU work that never waits on
#: DRAM, and a GPU that draws its busy power through every kernel's fixed latency.
SHARED_DEFAULTS = {"dvfs_v_floor": DVFS_V_FLOOR, "dvfs_knee": DVFS_KNEE,
                   "gpu_stream_b_per_core_cycle": float("inf"), "cpu_mem_wait_s_ghz": 0.0,
                   "gpu_latency_power_share": 1.0}


@dataclass(frozen=True)
class DeviceConstants:
    """The free constants of one device (time costs in seconds on a core of relative speed 1.0)."""

    gpu_eff_dense: float          # fraction of FP32 peak reached by dense conv / matmul kernels
    gpu_eff_depthwise: float      # fraction of FP32 peak reached by grouped (depthwise) convolutions
    mem_eff: float                # fraction of peak DRAM bandwidth reached by memory-bound kernels
    gpu_kernel_latency_s: float   # fixed time per kernel (launch to completion, clock-independent), s
    cpu_perf_per_ghz: float       # per-core speed per GHz, relative to the host that measured workloads
    launch_s: float               # CPU cost to launch one kernel at relative CPU speed 1, s
    framework_s: float            # per-minibatch framework cost outside the GPU window at speed 1, s
    handoff_s: float              # per-minibatch DataLoader hand-off (queue, collate) at speed 1, s
    handoff_s_per_mb: float       # extra hand-off per MB of batch tensors at speed 1, s/MB
    base_w: float                 # module baseload with every domain at its lowest clock, W
    base_cpu_w: float             # idle CPU power, all cores online at top clock and voltage, W
    base_gpu_w: float             # idle GPU power at top clock and voltage, W
    base_emc_w: float             # idle memory-controller/DRAM power at top EMC clock, W
    cpu_dyn_w: float              # dynamic CPU power, all cores busy at top clock and voltage, W
    gpu_dyn_w: float              # dynamic GPU power, fully busy at top clock and voltage, W
    mem_dyn_w: float              # dynamic DRAM power when streaming at the device's top bandwidth, W
    basis: str = ""               # how the constants were obtained (fitted rows / spec sheet)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, object], where: str = "twin calibration") -> DeviceConstants:
        """The constants of a calibration block ``raw``; :class:`InputError` naming ``where`` (the block and
        its file) and the key for an unknown key, a missing constant or one that is no finite number."""
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(raw) - set(names))
        if unknown:  # a misspelt constant would go unused, the twin running on whatever else the block says
            near = difflib.get_close_matches(unknown[0], names, n=1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            raise InputError(f"{where}: unknown key {unknown[0]!r}{hint}; the constants are {', '.join(names)}",
                             unknown[0])
        missing = [k for k in names if k not in raw and k != "basis"]
        if missing:
            raise InputError(f"{where} lacks {', '.join(missing)}", missing[0])
        for k, v in raw.items():
            # TOML's true, "0.2" and nan would pass float(); none is a constant.
            if k != "basis" and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)):
                raise InputError(f"{where}: {k} = {v!r} must be a finite number", k)
        return cls(**{k: (str(v) if k == "basis" else float(v)) for k, v in raw.items()})


@lru_cache(maxsize=4)
def _load_calibration(path: str) -> dict:
    with open(path, "rb") as f:
        return tomllib.load(f)


def load_constants(device_id: str, path: str | Path | None = None) -> tuple[DeviceConstants, dict[str, float]]:
    """The calibrated constants of ``device_id`` and the shared constants, from the calibration file."""
    raw = _load_calibration(str(path or CALIBRATION_PATH))
    try:
        dev = raw["devices"][device_id]
    except KeyError:
        # tools/calibrate_twin fits only boards with published figures (or the Orin family's spec sheets);
        # another catalogued board needs its block written by hand, which reruns keep.
        keys = ", ".join(f.name for f in fields(DeviceConstants) if f.name != "basis")
        raise InputError(
            f"no twin calibration for device {device_id!r} in {path or CALIBRATION_PATH}: add a "
            f'[devices."{device_id}"] block there with {keys} and a basis saying how they were obtained '
            "(python -m tools.calibrate_twin fits only boards with published figures and keeps such a "
            "block; the file's header says more)", "device") from None
    # Files written before a shared constant existed get its default.
    stored = {**SHARED_DEFAULTS, **raw["shared"]}
    shared = {k: float(stored[k]) for k in SHARED_KEYS}
    return DeviceConstants.from_mapping(dev, f'[devices."{device_id}"] in {path or CALIBRATION_PATH}'), shared


class DevicePhysics:
    """Physics of one Jetson type over its power modes (vectorised; see the module docstring)."""

    def __init__(self, device: Device, constants: DeviceConstants | None = None,
                 shared: Mapping[str, float] | None = None) -> None:
        self.device = device
        if constants is None or shared is None:
            loaded, loaded_shared = load_constants(self.device.id)
            constants = constants or loaded
            shared = shared if shared is not None else loaded_shared
        self.constants = constants
        self.shared = dict(shared)
        ranges = self.device.knob_ranges()
        self.cores_max = ranges["cpu_cores"][1]
        self.cpu_mhz_max = ranges["cpu_mhz"][1]
        self.gpu_mhz_max = ranges["gpu_mhz"][1]
        self.emc_mhz_max = ranges["emc_mhz"][1]

    # -- throughput -------------------------------------------------------------------------------
    def peak_fp32_flops(self, gpu_mhz):
        """FP32 peak in FLOP/s: CUDA cores x 2 (FMA) x GPU clock."""
        return self.device.peak_fp32_flops(gpu_mhz)

    def bandwidth_bps(self, emc_mhz):
        """Peak DRAM bandwidth in B/s: bus bytes x 2 (DDR) x EMC clock."""
        return self.device.peak_bandwidth(emc_mhz)

    def cpu_speed(self, cpu_mhz, emc_mhz):
        """Per-core CPU speed relative to the host core that measured workload complexity (1.0 = same).

        CPU work also waits on DRAM: each second of host work adds the shared
        ``cpu_mem_wait_s_ghz`` seconds x (1 GHz / f_emc) of memory stalls (latency-bound: they follow the memory
        clock's period, not the bus width, and add to the core's time), so a slow memory clock slows the data
        pipeline and the main thread as in the real sweeps (AGX Xavier g -> h, EMC 2133 -> 1066 MHz:
        ResNet-18 and MobileNetV3 stall +38%, LeNet-5 epoch +51%).
        """
        core = self.constants.cpu_perf_per_ghz * np.asarray(cpu_mhz, dtype=float) / 1000.0
        wait = self.shared["cpu_mem_wait_s_ghz"] * 1000.0 / np.asarray(emc_mhz, dtype=float)
        return 1.0 / (1.0 / core + wait)

    @staticmethod
    def loader_parallelism(cpu_cores, num_workers):
        """DataLoader workers that really run in parallel: min(workers, cores - 1), the main thread
        keeping one core; with a single core a worker gets about half of it. 0 workers -> 0."""
        cores = np.asarray(cpu_cores, dtype=float)
        workers = np.asarray(num_workers, dtype=float)
        return np.where(workers > 0, np.minimum(workers, np.maximum(cores - 1.0, 0.5)), 0.0)

    def kernel_time_s(self, flops, nbytes, kind, gpu_mhz, emc_mhz):
        """Time of GPU kernels, s: a roofline with a soft corner plus a fixed per-kernel latency.

        t = (t_flop^p + t_mem^p)^(1/p) + latency, with t_flop = FLOPs / (eff x FP32
        peak), t_mem = bytes / (mem_eff x bandwidth) and p the shared ``roofline_sharpness`` (p -> inf is
        the strict roofline max; finite p lets both clocks matter near the ridge, as measured). Memory
        traffic also passes the GPU's load/store path, which runs at the GPU clock: a stream is as fast
        as the narrower of the two pipes, so the bandwidth is min(mem_eff x DRAM peak,
        ``gpu_stream_b_per_core_cycle`` x CUDA cores x f_gpu); at a very low GPU clock even memory-bound
        kernels slow down (AGX Xavier at GPU 114.75 MHz is 10.3x slower than MAXN, POMACS 2022 §5.6). The
        latency (launch to completion of a tiny kernel on the iGPU) does not follow the clocks: LeNet-class
        models hardly slow down with the GPU clock (POMACS 2022).
        ``kind`` 0 = dense (conv/matmul), 1 = depthwise/grouped conv, 2 = elementwise/memory-bound.
        Broadcasts (e.g. kernels as a column against modes as a row).
        """
        p = self.shared["roofline_sharpness"]
        t_flop, t_mem, t_lat = self.roofline_parts_s(flops, nbytes, kind, gpu_mhz, emc_mhz)
        return (t_flop ** p + t_mem ** p) ** (1.0 / p) + t_lat

    def roofline_parts_s(self, flops, nbytes, kind, gpu_mhz, emc_mhz):
        """(compute-bound time, memory-bound time, fixed latency) of kernels, s; see :meth:`kernel_time_s`."""
        c = self.constants
        eff = np.where(np.asarray(kind) == 1, c.gpu_eff_depthwise, c.gpu_eff_dense)
        t_flop = np.asarray(flops, dtype=float) / (eff * self.peak_fp32_flops(gpu_mhz))
        nbytes = np.asarray(nbytes, dtype=float)
        gpu_side_bps = (self.shared["gpu_stream_b_per_core_cycle"] * self.device.specs.cuda_cores
                        * np.asarray(gpu_mhz, dtype=float) * 1e6)
        t_mem = nbytes / np.minimum(c.mem_eff * self.bandwidth_bps(emc_mhz), gpu_side_bps)
        t_lat = np.full(np.broadcast(t_flop, t_mem).shape, c.gpu_kernel_latency_s)
        return t_flop, t_mem, t_lat

    def dram_time_s(self, nbytes, emc_mhz):
        """Time DRAM itself is busy moving ``nbytes`` at its effective bandwidth, s (no GPU-side cap:
        when the GPU's load/store path is the narrower pipe, DRAM idles part of the stream)."""
        return np.asarray(nbytes, dtype=float) / (self.constants.mem_eff * self.bandwidth_bps(emc_mhz))

    # -- DVFS and power ---------------------------------------------------------------------------
    def voltage_frac(self, domain: str, mhz):
        """Rail voltage as a fraction of its top value at a clock (``domain`` cpu | gpu | emc)."""
        top = {"cpu": self.cpu_mhz_max, "gpu": self.gpu_mhz_max, "emc": self.emc_mhz_max}[domain]
        x = np.asarray(mhz, dtype=float) / top
        floor, knee = self.shared["dvfs_v_floor"], self.shared["dvfs_knee"]
        return np.clip(floor + (1 - floor) * (x - knee) / (1 - knee), floor, 1.0)

    def dynamic_scale(self, domain: str, mhz):
        """f x V^2 relative to the domain's top clock: the CMOS switching-power factor."""
        top = {"cpu": self.cpu_mhz_max, "gpu": self.gpu_mhz_max, "emc": self.emc_mhz_max}[domain]
        return np.asarray(mhz, dtype=float) / top * self.voltage_frac(domain, mhz) ** 2

    def base_power_features(self, modes) -> np.ndarray:
        """Columns multiplying (base_w, base_cpu_w, base_gpu_w, base_emc_w): shape (n_modes, 4)."""
        m = ModeArrays.of(modes)
        return np.stack(np.broadcast_arrays(
            np.ones(len(m)), m.cpu_cores / self.cores_max * self.dynamic_scale("cpu", m.cpu_mhz),
            m.gpu_share * self.dynamic_scale("gpu", m.gpu_mhz), m.emc_mhz / self.emc_mhz_max), axis=-1)

    def dynamic_power_features(self, modes, gpu_util, cpu_util, mem_util) -> np.ndarray:
        """Columns multiplying (cpu_dyn_w, gpu_dyn_w, mem_dyn_w): shape (n_modes, 3)."""
        m = ModeArrays.of(modes)
        cpu = np.asarray(cpu_util, dtype=float) * m.cpu_cores / self.cores_max * self.dynamic_scale("cpu", m.cpu_mhz)
        # A gated part of the GPU neither switches nor leaks: GPU power scales with the powered share.
        gpu = np.asarray(gpu_util, dtype=float) * m.gpu_share * self.dynamic_scale("gpu", m.gpu_mhz)
        mem = np.asarray(mem_util, dtype=float) * m.emc_mhz / self.emc_mhz_max
        return np.stack(np.broadcast_arrays(cpu, gpu, mem), axis=-1)

    def base_power_w(self, modes):
        """Module power idle at each mode (clocks locked, as with jetson_clocks), W."""
        c = self.constants
        coef = np.array([c.base_w, c.base_cpu_w, c.base_gpu_w, c.base_emc_w])
        return self.base_power_features(modes) @ coef

    def power_w(self, modes, gpu_util, cpu_util, mem_util):
        """Module power while training, W: baseload + dynamic CPU, GPU and DRAM power.

        ``gpu_util``: fraction of time the GPU runs kernels; ``cpu_util``: fraction of the *online*
        cores busy; ``mem_util``: fraction of the mode's peak DRAM bandwidth in use. Each in 0..1.
        """
        c = self.constants
        for name, u in (("gpu_util", gpu_util), ("cpu_util", cpu_util), ("mem_util", mem_util)):
            u = np.asarray(u, dtype=float)
            if np.any(~np.isfinite(u)) or np.any(u < 0) or np.any(u > 1.0 + 1e-9):
                raise InputError(f"{name} must be a fraction in 0..1", name)
        dyn = self.dynamic_power_features(modes, gpu_util, cpu_util, mem_util) @ np.array(
            [c.cpu_dyn_w, c.gpu_dyn_w, c.mem_dyn_w])
        return self.base_power_w(modes) + dyn
