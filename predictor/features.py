"""Mechanistic per-mode features for the time and power models.

Time terms are work divided by a clock, in seconds-per-epoch x GHz units: a non-negative coefficient on
``1/f`` keeps every prediction monotone in each clock and bounded at any clock inside the device range.
Power terms are per-domain dynamic-power proxies ``f * V(f)^2`` on a generic DVFS voltage curve.
"""

from __future__ import annotations

import numpy as np

#: Terms of each time component. ``gpu``/``emc``: GPU work and memory traffic (1/f_gpu, 1/f_emc);
#: ``cpu``: main-thread work (kernel launches, framework, step) per CPU clock x core contention;
#: ``pipe``: data-pipeline work that the main thread waits on (stall), with its own contention;
#: ``one``: clock-independent time.
COMPUTE_TERMS: tuple[str, ...] = ("gpu", "emc", "cpu", "one")
STALL_TERMS: tuple[str, ...] = ("pipe", "emc", "one")
REST_TERMS: tuple[str, ...] = ("cpu", "one")
TOTAL_TERMS: tuple[str, ...] = ("gpu", "emc", "cpu", "pipe", "one")
COMPONENT_TERMS: dict[str, tuple[str, ...]] = {
    "compute": COMPUTE_TERMS, "stall": STALL_TERMS, "rest": REST_TERMS, "total": TOTAL_TERMS}

#: Dynamic power terms: GPU busy x phi(f_gpu), memory busy x phi(f_emc), active cores x phi(f_cpu), constant.
POWER_TERMS: tuple[str, ...] = ("gpu", "emc", "cpu", "one")
#: Base (idle-at-mode) power terms: constant plus each domain's phi (leakage and clock trees rise with V).
BASE_TERMS: tuple[str, ...] = ("one", "gpu", "emc", "cpu")

# Generic DVFS curve: voltage flat at V_MIN_REL x V_max below the knee, then linear to V_max at f_max.
# Jetson rails follow this shape (tegra DVFS tables); the exact numbers only set the curvature.
V_MIN_REL = 0.6
KNEE_REL = 0.4


def contention(cpu_cores, num_workers, kappa: float) -> np.ndarray:
    """Slow-down factor (>= 1) of CPU work when fewer cores than runnable threads (workers + main) exist.

    ``1 + kappa * max(0, workers + 1 - cores) / cores``: ``kappa`` is how busy the competing threads are,
    learned per device from reference sweeps that vary the core count.
    """
    cores = np.asarray(cpu_cores, dtype=float)
    threads = np.asarray(num_workers, dtype=float) + 1.0
    return 1.0 + kappa * np.maximum(0.0, threads - cores) / cores


def time_features(cpu_cores, cpu_mhz, gpu_mhz, emc_mhz, num_workers, kappa_cpu: float,
                  kappa_pipe: float) -> dict[str, np.ndarray]:
    """Every time term's feature per mode (1/GHz, contention included); ``one`` is all ones."""
    cpu_ghz = np.asarray(cpu_mhz, dtype=float) / 1000.0
    features = {
        "gpu": 1000.0 / np.asarray(gpu_mhz, dtype=float),
        "emc": 1000.0 / np.asarray(emc_mhz, dtype=float),
        "cpu": contention(cpu_cores, num_workers, kappa_cpu) / cpu_ghz,
        "pipe": contention(cpu_cores, num_workers, kappa_pipe) / cpu_ghz,
    }
    n = np.broadcast_shapes(np.shape(cpu_cores), *(f.shape for f in features.values()))
    # Broadcasting only when shapes differ: prediction calls this on every request (hot path).
    features = {k: f if f.shape == n else np.broadcast_to(f, n) for k, f in features.items()}
    features["one"] = np.ones(n)
    return features


def design(features: dict[str, np.ndarray], terms: tuple[str, ...]) -> np.ndarray:
    """Columns of ``terms`` as an (n_modes, n_terms) matrix."""
    return np.stack([np.asarray(features[t], dtype=float).ravel() for t in terms], axis=1)


def dvfs_phi(f_mhz, f_max_mhz: float) -> np.ndarray:
    """Relative dynamic power ``(f/f_max) * (V(f)/V_max)^2`` of one clock domain (1 at f_max)."""
    r = np.asarray(f_mhz, dtype=float) / float(f_max_mhz)
    v = V_MIN_REL + (1.0 - V_MIN_REL) * np.clip((r - KNEE_REL) / (1.0 - KNEE_REL), 0.0, 1.0)
    return r * v * v


def v_rel(f_mhz, f_max_mhz: float) -> np.ndarray:
    """Rail voltage relative to its value at the top clock, on the generic DVFS curve."""
    r = np.asarray(f_mhz, dtype=float) / float(f_max_mhz)
    return V_MIN_REL + (1.0 - V_MIN_REL) * np.clip((r - KNEE_REL) / (1.0 - KNEE_REL), 0.0, 1.0)


def power_features(cpu_cores, cpu_mhz, gpu_mhz, emc_mhz, num_workers, gpu_busy, maxima: dict[str, float],
                   rate=1.0) -> dict[str, np.ndarray]:
    """Dynamic-power proxies per mode (dimensionless; coefficients are in W).

    ``gpu_busy`` is the predicted GPU-compute share of the epoch; ``rate`` the epoch's progress relative
    to the fastest preset (its epoch time / this one): DRAM traffic per second follows the rate, and each
    byte costs energy ~ V_emc^2, so a slow GPU leaves a fast memory clock mostly idle. CPU activity counts
    the cores the pipeline can keep busy (workers + main thread, capped by the cores online).
    """
    busy = np.clip(np.asarray(gpu_busy, dtype=float), 0.0, 1.0)
    active = np.minimum(np.asarray(cpu_cores, dtype=float), np.asarray(num_workers, dtype=float) + 1.0)
    rate = np.clip(np.asarray(rate, dtype=float), 0.0, 2.0)
    return {
        "gpu": busy * dvfs_phi(gpu_mhz, maxima["gpu_mhz"]),
        "emc": busy * rate * v_rel(emc_mhz, maxima["emc_mhz"]) ** 2,
        "cpu": active / maxima["cpu_cores"] * dvfs_phi(cpu_mhz, maxima["cpu_mhz"]),
        "one": np.ones_like(busy),
    }


def base_features(cpu_cores, cpu_mhz, gpu_mhz, emc_mhz, maxima: dict[str, float]) -> dict[str, np.ndarray]:
    """Idle-at-mode power proxies: constant plus each domain's relative ``f V^2`` (cores online scale CPU)."""
    cores = np.asarray(cpu_cores, dtype=float)
    gpu = dvfs_phi(gpu_mhz, maxima["gpu_mhz"])
    return {
        "one": np.ones_like(gpu),
        "gpu": gpu,
        "emc": dvfs_phi(emc_mhz, maxima["emc_mhz"]),
        "cpu": cores / maxima["cpu_cores"] * dvfs_phi(cpu_mhz, maxima["cpu_mhz"]),
    }


def device_maxima(device) -> dict[str, float]:
    """Top of each knob's range for a catalogue :class:`~models.catalogue.Device`."""
    r = device.knob_ranges()
    return {k: float(v[1]) for k, v in r.items()}
