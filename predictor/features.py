"""Mechanistic per-mode features for the time and power models.

Time terms are work divided by a clock, in seconds-per-epoch x GHz units: a non-negative coefficient on
``1/f`` keeps every prediction monotone in each clock and bounded at any clock inside the device range.
GPU memory traffic is a roofline term: each kernel takes ~max(compute / f_gpu, bytes / f_emc), so the
memory clock only matters for kernels that are memory bound *at this mode* (``mem``, see
:func:`memory_kernels`): slowing the GPU hides the memory clock instead of keeping its full share.
Every memory-clock term runs on the clock left to the workload (:func:`effective_emc_mhz`).
Power terms are per-domain dynamic-power proxies ``f * V(f)^2`` on a generic DVFS voltage curve.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from jetpredict.models.catalogue import Device, ModeArrays
from jetpredict.predictor.constants import (
    CPU_MEM_LOG_MU,
    CPU_MEM_LOG_SIGMA,
    EMC_OVERHEAD_MHZ,
    KNEE_REL,
    MAX_PROGRESS_RATE,
    MEM_LOG_MU,
    MEM_LOG_SIGMA,
    V_MIN_REL,
)
from scipy.special import ndtr

#: Terms of each time component. ``gpu``: GPU kernels without memory traffic (1/f_gpu); ``mem``: kernels
#: that move memory, each max(compute/f_gpu, bytes/f_emc); ``emc``: the data pipeline's memory traffic;
#: ``cpu``: main-thread work (kernel launches, framework, step) per CPU clock x core contention;
#: ``pipe``: data-pipeline work that the main thread waits on (stall), with its own contention;
#: ``one``: clock-independent time.
#: ``cmem`` / ``pmem``: CPU-side work (main thread / data pipeline, each with its own contention) bound by
#: the slower of the core and the shared LPDDR (:func:`cpu_memory`): it follows the memory clock when the
#: CPU is fast and the CPU clock when it is slow, as the real sweeps do [E4].
COMPUTE_TERMS: tuple[str, ...] = ("gpu", "mem", "cpu", "cmem", "one")
STALL_TERMS: tuple[str, ...] = ("pipe", "pmem", "emc", "one")
REST_TERMS: tuple[str, ...] = ("cpu", "cmem", "one")
TOTAL_TERMS: tuple[str, ...] = ("gpu", "mem", "emc", "cpu", "pipe", "cmem", "pmem", "one")
#: CPU-side terms: work on the CPU clock, with core contention (``cpu``, ``cmem``: main thread;
#: ``pipe``, ``pmem``: data pipeline).
CPU_SIDE_TERMS: tuple[str, ...] = ("cpu", "pipe", "cmem", "pmem")
COMPONENT_TERMS: dict[str, tuple[str, ...]] = {
    "compute": COMPUTE_TERMS, "stall": STALL_TERMS, "rest": REST_TERMS, "total": TOTAL_TERMS}

#: Dynamic power terms: GPU busy x phi(f_gpu), memory busy x phi(f_emc), active cores x phi(f_cpu), constant.
POWER_TERMS: tuple[str, ...] = ("gpu", "emc", "cpu", "one")
#: Dynamic power terms drawn in proportion to the epoch's progress rate (see :func:`power_features`).
RATE_POWER_TERMS: tuple[str, ...] = ("emc", "cpu", "one")
#: Base (idle-at-mode) power terms: constant, each domain's phi (clock trees), and the online cores' own
#: idle draw (``cpu_cores``: leakage of the idle cores, which scales with the cores and V, not f) [E7].
BASE_TERMS: tuple[str, ...] = ("one", "gpu", "emc", "cpu", "cpu_cores")
#: The clock domain of each base term (its knob's extrapolation widens the term's share of the power).
BASE_DOMAINS: dict[str, str] = {"one": "one", "gpu": "gpu", "emc": "emc", "cpu": "cpu", "cpu_cores": "cpu"}


def _excess_threads(cpu_cores, num_workers) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(runnable threads beyond the cores online, >= 0; threads = workers + main; cores)."""
    cores = np.asarray(cpu_cores, dtype=float)
    threads = np.asarray(num_workers, dtype=float) + 1.0
    return np.maximum(0.0, threads - cores), threads, cores


def contention(cpu_cores, num_workers, kappa: float) -> np.ndarray:
    """Slow-down factor (>= 1) of the data pipeline's CPU work when fewer cores than runnable threads
    (workers + main) exist.

    ``1 + kappa * max(0, workers + 1 - cores) / cores``: the workers share the cores, so their throughput
    falls with the cores online; ``kappa`` is how busy the competing threads are, learned per device from
    reference sweeps that vary the core count.
    """
    excess, _, cores = _excess_threads(cpu_cores, num_workers)
    return 1.0 + kappa * excess / cores


def main_contention(cpu_cores, num_workers, kappa: float) -> np.ndarray:
    """Slow-down factor (>= 1) of the main thread's CPU work: ``1 + kappa * max(0, threads - cores) /
    threads``, the share of the runnable threads without a core (one thread loses time slices to the
    others, it does not share their throughput): real LeNet-5 follows this form, not the pipeline's [E5]."""
    excess, threads, _ = _excess_threads(cpu_cores, num_workers)
    return 1.0 + kappa * excess / threads


def memory_kernels(gpu_mhz, emc_mhz, mu: float | None = None, sigma: float | None = None) -> np.ndarray:
    """Time of the traffic-carrying kernels per unit of memory time, E[max(1/(q r), 1)], r = f_gpu/f_emc.

    Each kernel takes max(C/f_gpu, M/f_emc) = (M/f_emc) max(1/(q r), 1) with q = M/C: averaged over the
    log-normal kernel mix this is ``E[1/q]/r + E[max(0, 1 - 1/(q r))]`` in closed form. Times ``1/f_emc``
    it falls with either clock (so every prediction stays monotone): ~E[1/q]/f_gpu when the GPU is slow
    (every kernel compute bound, the memory clock hidden) and 1/f_emc when the GPU is fast. ``mu``,
    ``sigma``: the log-normal mix, by default the GPU's (fitted to the real sweeps [E3]).
    """
    mu = MEM_LOG_MU if mu is None else mu
    sigma = MEM_LOG_SIGMA if sigma is None else sigma
    log_r = np.log(np.asarray(gpu_mhz, dtype=float) / np.asarray(emc_mhz, dtype=float))
    inv_q_r = np.exp(sigma * sigma / 2.0 - mu - log_r)  # E[1/q] / r
    exposed = ndtr((mu + log_r) / sigma) - inv_q_r * ndtr((mu + log_r - sigma * sigma) / sigma)
    return inv_q_r + np.maximum(exposed, 0.0)


def effective_emc_mhz(emc_mhz) -> np.ndarray:
    """The memory clock (MHz) left to the workload's traffic: ``f - min(EMC_OVERHEAD_MHZ, f / 2)``.

    Every real AGX Xavier sweep, each component too, slows from EMC 2133 to 1066 MHz convexly in 1/f_emc
    (1333 and 1600 MHz lie 2-6% below the chord): a roughly fixed bandwidth goes elsewhere. Capped at half
    the clock so that the lowest EMC steps (204 MHz) stay finite and monotone [E4]."""
    f = np.asarray(emc_mhz, dtype=float)
    return f - np.minimum(EMC_OVERHEAD_MHZ, f / 2.0)


def cpu_memory(cpu_mhz, emc_mhz) -> np.ndarray:
    """CPU-side work bound by the slower of core and memory (1/GHz): ``1/f_emc x E[max(1/(q r), 1)]`` with
    r = f_cpu/f_emc over the CPU's work mix (:func:`memory_kernels` with the CPU's constants); ~1/f_cpu
    when the CPU is slow, ~1/f_emc when it is fast, monotone in both [E4]."""
    return (1000.0 / np.asarray(emc_mhz, dtype=float)) * memory_kernels(cpu_mhz, emc_mhz, CPU_MEM_LOG_MU,
                                                                        CPU_MEM_LOG_SIGMA)


def time_features(modes: ModeArrays, num_workers: float | np.ndarray, kappa_cpu: float,
                  kappa_pipe: float) -> dict[str, np.ndarray]:
    """Every time term's feature per mode (1/GHz, contention included); ``one`` is all ones."""
    emc = effective_emc_mhz(modes.emc_mhz)
    emc_inv = 1000.0 / emc
    features = {
        # A preset that gates part of the GPU runs its kernels as the full GPU would at a lower clock.
        "gpu": 1000.0 / modes.gpu_throughput_mhz,
        "mem": emc_inv * memory_kernels(modes.gpu_throughput_mhz, emc),
        "emc": emc_inv,
        "roof": cpu_memory(modes.cpu_mhz, emc),
        "one": np.ones(len(modes)),
    }
    return with_contention(features, modes, num_workers, kappa_cpu, kappa_pipe)


def with_contention(features: dict[str, np.ndarray], modes: ModeArrays, num_workers: float | np.ndarray,
                    kappa_cpu: float, kappa_pipe: float) -> dict[str, np.ndarray]:
    """``features`` with the CPU terms (``cpu``, ``pipe``) for these contention constants; the clock
    terms do not depend on them, so model variants share those."""
    cpu_inv = 1000.0 / modes.cpu_mhz
    out = dict(features)
    main = main_contention(modes.cpu_cores, num_workers, kappa_cpu)
    pipe = contention(modes.cpu_cores, num_workers, kappa_pipe)
    out["cpu"], out["cmem"] = main * cpu_inv, main * features["roof"]
    out["pipe"], out["pmem"] = pipe * cpu_inv, pipe * features["roof"]
    return out


def design(features: dict[str, np.ndarray], terms: tuple[str, ...]) -> np.ndarray:
    """Columns of ``terms`` as an (n_modes, n_terms) matrix."""
    return np.stack([np.asarray(features[t], dtype=float).ravel() for t in terms], axis=1)


def dvfs_phi(f_mhz, f_max_mhz: float) -> np.ndarray:
    """Relative dynamic power ``(f/f_max) * (V(f)/V_max)^2`` of one clock domain (1 at f_max)."""
    r = np.asarray(f_mhz, dtype=float) / float(f_max_mhz)
    v = v_rel(f_mhz, f_max_mhz)
    return r * v * v


def v_rel(f_mhz, f_max_mhz: float) -> np.ndarray:
    """Rail voltage relative to its value at the top clock on a generic DVFS curve: flat at V_MIN_REL below
    the knee (KNEE_REL of the top clock), then linear to 1 at the top; the numbers set only its curvature [E2]."""
    r = np.asarray(f_mhz, dtype=float) / float(f_max_mhz)
    return V_MIN_REL + (1.0 - V_MIN_REL) * np.clip((r - KNEE_REL) / (1.0 - KNEE_REL), 0.0, 1.0)


def launch_wait_s(cpu_coef: float, modes: ModeArrays, num_workers: float | np.ndarray, kappa: float,
                cpu_mhz_max: float) -> np.ndarray:
    """Time (s per epoch) the GPU idles waiting on the main thread, beyond its wait at the top CPU clock.

    ``cpu_coef`` (s x GHz) is the compute component's CPU term: at the top clock with no contention the
    CPU launches overlap the kernels, so only the stretch of that work at a slower clock or under core
    contention leaves the GPU without kernels (a CPU-bound workload's GPU busy share falls with f_cpu).
    """
    slow = main_contention(modes.cpu_cores, num_workers, kappa) * (1000.0 / modes.cpu_mhz)
    return cpu_coef * np.maximum(slow - 1000.0 / cpu_mhz_max, 0.0)


def power_features(modes: ModeArrays, num_workers: float | np.ndarray, gpu_busy: np.ndarray,
                   maxima: Mapping[str, float], rate: np.ndarray | float = 1.0,
                   gpu_active: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Dynamic-power proxies per mode (dimensionless; coefficients are in W).

    ``gpu_busy`` is the predicted GPU-compute share of the epoch; ``rate`` the epoch's progress relative
    to the fastest preset (its epoch time / this one). Work that is fixed per minibatch draws power in
    proportion to the rate: DRAM traffic (each byte costs energy ~ V_emc^2, so a slow GPU leaves a fast
    memory clock mostly idle), the CPU's launches and data loading (the cores the pipeline can keep busy,
    workers + main thread capped by the cores online, at the CPU's f V^2) and the clock-independent rest
    (I/O, fabric). A GPU slowed far below the reference modes thus leaves the module near its base power.
    ``gpu_active``: the share of the epoch the GPU runs kernels (default ``gpu_busy``), lower than the
    compute share when the main thread's launches hold the GPU back (see :func:`launch_wait_s`).
    """
    busy = np.clip(np.asarray(gpu_busy, dtype=float), 0.0, 1.0)
    active = busy if gpu_active is None else np.clip(np.asarray(gpu_active, dtype=float), 0.0, 1.0)
    cores = np.minimum(modes.cpu_cores, np.asarray(num_workers, dtype=float) + 1.0)
    rate = np.clip(np.asarray(rate, dtype=float), 0.0, MAX_PROGRESS_RATE)
    return {
        # Only the powered SMs switch, at the voltage of the clock.
        "gpu": active * modes.gpu_share * dvfs_phi(modes.gpu_mhz, maxima["gpu_mhz"]),
        "emc": busy * rate * v_rel(modes.emc_mhz, maxima["emc_mhz"]) ** 2,
        "cpu": rate * cores / maxima["cpu_cores"] * dvfs_phi(modes.cpu_mhz, maxima["cpu_mhz"]),
        "one": rate * np.ones_like(busy),
    }


def base_features(modes: ModeArrays, maxima: Mapping[str, float]) -> dict[str, np.ndarray]:
    """Idle-at-mode power proxies: constant, each domain's relative ``f V^2`` (the CPU cluster's clocks
    whatever the cores online), and the online cores' share times ``V^2`` of the CPU rail (idle cores
    leak; they are clock gated) [E7]. A gated part of the GPU draws nothing: its term scales with the
    powered share."""
    gpu = modes.gpu_share * dvfs_phi(modes.gpu_mhz, maxima["gpu_mhz"])
    return {
        "one": np.ones_like(gpu),
        "gpu": gpu,
        "emc": dvfs_phi(modes.emc_mhz, maxima["emc_mhz"]),
        "cpu": dvfs_phi(modes.cpu_mhz, maxima["cpu_mhz"]),
        "cpu_cores": modes.cpu_cores / maxima["cpu_cores"] * v_rel(modes.cpu_mhz, maxima["cpu_mhz"]) ** 2,
    }


def extrapolation_distances(modes: ModeArrays, ranges: Mapping[str, tuple[float, float]]
                            ) -> dict[str, np.ndarray]:
    """Per knob, how far each mode lies outside the profiled range ``ranges[knob] = (low, high)``, in
    natural-log units of the knob (0 inside): ``max(0, ln(low / x), ln(x / high))``."""
    out = {}
    for knob, x in modes.reach().items():
        low, high = ranges[knob]
        lx = np.log(x)
        out[knob] = np.maximum(np.maximum(np.log(low) - lx, lx - np.log(high)), 0.0)
    return out


def device_maxima(device: Device) -> dict[str, float]:
    """Top of each knob's range for a catalogue :class:`~jetpredict.models.catalogue.Device`."""
    return {k: float(v[1]) for k, v in device.knob_ranges().items()}


def total_coefs(fits: Mapping[str, np.ndarray]) -> np.ndarray:
    """Collapse per-component term coefficients (``{component: coef}``) onto :data:`TOTAL_TERMS`."""
    out = dict.fromkeys(TOTAL_TERMS, 0.0)
    for name, coef in fits.items():
        for term, c in zip(COMPONENT_TERMS[name], coef, strict=True):
            out[term] += float(c)
    return np.array([out[t] for t in TOTAL_TERMS])


def extrapolation_units(coef: Mapping[str, float], feats: Mapping[str, np.ndarray], d: Mapping[str, np.ndarray],
                        epoch: np.ndarray) -> np.ndarray:
    """Extrapolation units of epoch time per mode from the total coefficients ``coef`` (s per feature unit),
    the time features and the knobs' ln-distances ``d`` outside the profiled ranges (0 inside).

    A knob's effect outside the profiled range is only as good as the assumed form of its terms, so the
    error grows with the share of the epoch those terms take times the log-distance: GPU clock drives the
    ``gpu`` and ``mem`` terms, memory clock ``mem`` and ``emc``, CPU clock and cores the CPU and pipeline
    terms.
    """
    inv = 1.0 / np.maximum(epoch, 1e-12)
    part = {t: coef[t] * feats[t] for t in TOTAL_TERMS}
    roof = part["cmem"] + part["pmem"]
    s_gpu = (part["gpu"] + part["mem"]) * inv
    s_emc = (part["mem"] + part["emc"] + roof) * inv
    # Clock-independent time counts with the CPU: rows that barely move the CPU clock cannot tell it from
    # CPU work, so it is the share whose response to a far CPU clock is unknown.
    s_cpu = (sum(part[t] for t in CPU_SIDE_TERMS) + part["one"]) * inv
    return np.sqrt((s_gpu * d["gpu_mhz"]) ** 2 + (s_emc * d["emc_mhz"]) ** 2
                   + (s_cpu * d["cpu_mhz"]) ** 2 + (s_cpu * d["cpu_cores"]) ** 2)


def projected_into(modes: ModeArrays, ranges: Mapping[str, tuple[float, float]], raise_low: bool
                   ) -> tuple[ModeArrays, np.ndarray]:
    """``modes`` with each knob below its profiled range ``ranges[knob] = (low, high)`` raised to ``low``
    (``raise_low``), or each knob above it lowered to ``high``, and the mask of the modes that moved.

    A raised mode has every knob at least the mode's own, so no epoch runs faster than it; a lowered one
    runs no faster than the mode. Gated presets (part of the GPU powered) stay where they are: no custom
    mode shares their GPU, so none bounds them.
    """
    knobs = modes.as_dict()
    moved = np.zeros(len(modes), dtype=bool)
    for knob, x in knobs.items():
        low, high = ranges[knob]
        bound = np.maximum(x, low) if raise_low else np.minimum(x, high)
        bound = np.where(modes.gated, x, bound)
        moved |= bound != x
        knobs[knob] = bound
    return ModeArrays(**knobs, gpu_share=modes.gpu_share), moved
