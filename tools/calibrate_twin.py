"""Calibrate the digital twin's free constants against published Jetson measurements (build time).

    python -m tools.calibrate_twin [--no-holdout]   # fit, write profiler/sim/data/twin_calibration.toml
                                                    # and the generated tables docs/twin-calibration.md

It reads only data in the repository: the published AGX Xavier sweeps bundled as a reference
(``models/reference/agx-xavier-published.csv``) and the published figures transcribed, each row with its
citation, in ``tools/data/`` (see ``tools/data/README.md``): ``calibration_rows.csv`` (the epochs-1+ rows
of the DataLoader-worker and storage-media figures, the ResNet-18 and MobileNetV3 batch-size rows, the
DVFS-off rows and the one Orin AGX MAXN epoch), ``ratio_facts.csv`` (POMACS 2022 §5.6: ResNet-18/CIFAR-10
on AGX Xavier, MAXN vs the same mode with the GPU at 114.75 MHz, 10.3x speed-up and 3.6x power ratio, the
only published point at a very low GPU clock, which pins the roofline sharpness and the low-clock power)
and ``socket_idle_power.csv`` (wall-socket idle power, used only to order and scale device baselines).
The published MobileNetV3 runs are matched with our built-in ``mobilenetv3-small-gld23k`` (same dataset
and batch; the efficiencies absorb the difference in variant). The method is described in
``docs/digital-twin.md`` (hand-written); this script writes only the tables of figures. The rows, facts
and constants' file are in ``tools/twin_calibration_data.py``, the tables in
``tools/twin_calibration_report.py``; this module fits.

Fitting, in two stages:

1. Time constants by non-linear least squares (log epoch time, log compute, stall as a share of the
   epoch): Volta/Carmel constants shared by AGX Xavier and Xavier NX, a CPU speed per device, and
   device-independent constants (JPEG decode cost, worker contention, scheduler interference, roofline
   sharpness, the GPU's stream limit, and the memory stalls of CPU work, which the real LeNet-5 sweep's
   memory-clock modes set). Nano
   (Maxwell GPU, A57 CPU) and the Orin family (Ampere, A78AE) reuse the Volta GPU efficiencies. Nano gets
   its own CPU speed from its LeNet rows; Orin, with no CPU-bound row, Carmel's speed per GHz times the
   per-clock ratio the predictor's cross-device physics uses (``predictor.constants.CPU_PER_CLOCK``), and
   one GPU speed factor fitted on its one MobileNetV3 row.
2. Power coefficients by bounded linear least squares: the four baseload coefficients on the AGX Xavier
   base-power rows (idle at the mode) alone, then the dynamic ones on its power rows, with the DVFS voltage
   floor and the power share of the GPU's kernel latency chosen by grid (:func:`fit_power_shape`), on the
   predictor's DVFS knee (``predictor.constants.KNEE_REL``). Other
   devices scale them by spec ratios (CUDA cores, memory bus, CPU cores; baseload by the wall-socket idle
   ordering), then NX and Nano fit one or two scale factors on their few power rows; Orin devices
   have no published power, so their dynamic power is scaled to each module's power budget (spec sheet).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import replace
from itertools import product
from pathlib import Path

import numpy as np
import pandas as pd
from jetpredict.models.catalogue import device_ids, list_devices, load_device
from jetpredict.models.errors import InputError
from jetpredict.predictor.constants import KNEE_REL
from jetpredict.predictor.transfer import cpu_per_clock
from jetpredict.profiler.sim.physics import (
    CALIBRATION_PATH,
    SHARED_DEFAULTS,
    SHARED_KEYS,
    DeviceConstants,
    DevicePhysics,
    tomllib,
)

from tools.twin_calibration_data import (
    DATA_DIR,
    Calibration,
    CalibrationRow,
    RatioFact,
    criteria,
    load_calibration_rows,
    load_ratio_facts,
    preset_knobs,
    row_groups,
    simulate_facts,
    simulate_rows,
    socket_idle_w,
    twin_for,
)
from tools.twin_calibration_report import RESULTS_PATH, write_results

#: Lower bound of the lowest-clock baseload of AGX Xavier in the power fit, W.
MIN_BASE_W = 1.0
#: Weights of a ratio fact: on log speed-up in the time fit (an epoch row weighs 1 on its log time) and
#: on the low-mode power error in W in the power fit (a power row weighs 1 on its error in W). One
#: fact against ~70 rows: weighted like a handful of rows, as it is the only low-GPU-clock point
#: (weight 6 brings the speed-up within 10%).
FACT_TIME_WEIGHT = 6.0
FACT_POWER_WEIGHT = 3.0
#: Voltage floors (fraction of top voltage) the power fit chooses from. The power rows only weakly
#: identify the floor (it trades against DRAM power; lower is slightly better down to 0.4), so the grid
#: stops at 0.5: Tegra rails do not drop below about half their top voltage (~0.6 V of ~1.0-1.1 V).
V_FLOOR_GRID = tuple(np.round(np.arange(0.50, 0.851, 0.025), 3))
#: Shares of the busy GPU's dynamic power drawn over a kernel's fixed latency that the power fit chooses from
#: (0: the SMs idle through it; 1: as busy as in its roofline time). Only LeNet-class rows, whose kernels
#: are ~90% latency, identify it.
LATENCY_SHARE_GRID = tuple(np.round(np.arange(0.0, 1.001, 0.1), 2))
#: The shared constants of the power model's shape, fitted by grid with the power coefficients.
POWER_SHAPE_KEYS = ("dvfs_v_floor", "gpu_latency_power_share")


# ------------------------------------------------------------------ fitting

#: Initial values of the time constants (log-space fit); power fields are filled in stage 2. The fit has
#: local minima: start near a plain-sum roofline (p ~ 1) with a GPU-side stream limit that does not bind
#: at MAXN, else it settles where the EMC sweep is lost (mode h -18%).
_TIME_FIELDS = ("gpu_eff_dense", "gpu_eff_depthwise", "mem_eff", "gpu_kernel_latency_s", "launch_s",
                "framework_s", "handoff_s", "handoff_s_per_mb")
_POWER_FIELDS = ("base_w", "base_cpu_w", "base_gpu_w", "base_emc_w", "cpu_dyn_w", "gpu_dyn_w", "mem_dyn_w")
_START = {"gpu_eff_dense": 0.5, "gpu_eff_depthwise": 0.01, "mem_eff": 0.3, "gpu_kernel_latency_s": 1e-4,
          "launch_s": 1e-4, "framework_s": 1e-3, "handoff_s": 3e-3, "handoff_s_per_mb": 1e-3,
          "cpu_perf_agx": 0.6, "cpu_perf_nx": 0.6, "cpu_perf_nano": 0.3,
          "jpeg_decode_s_per_mpix": 0.02, "worker_contention": 0.3, "sched_interference": 0.2,
          "roofline_sharpness": 1.2, "gpu_stream_b_per_core_cycle": 0.3, "cpu_mem_wait_s_ghz": 1.0}
_BOUNDS = {"gpu_eff_dense": (0.02, 0.9), "gpu_eff_depthwise": (1e-3, 0.9), "mem_eff": (0.05, 0.95),
           "gpu_kernel_latency_s": (1e-6, 1e-3), "launch_s": (1e-6, 1e-3), "framework_s": (1e-5, 0.05),
           "handoff_s": (1e-5, 0.05), "handoff_s_per_mb": (1e-6, 0.05), "cpu_perf_agx": (0.05, 5),
           "cpu_perf_nx": (0.05, 5), "cpu_perf_nano": (0.02, 5), "jpeg_decode_s_per_mpix": (1e-4, 1.0),
           "worker_contention": (0.0, 2.0), "sched_interference": (0.0, 10.0),
           "roofline_sharpness": (1.0, 8.0), "gpu_stream_b_per_core_cycle": (0.01, 1e3),
           "cpu_mem_wait_s_ghz": (1e-3, 1e3)}
_ZERO_POWER = dict.fromkeys(_POWER_FIELDS, 0.0)
#: The boards fitted on their own published rows (each its own CPU speed), in the constants file's order.
_PERF_KEY = {"agx-xavier": "cpu_perf_agx", "xavier-nx": "cpu_perf_nx", "nano": "cpu_perf_nano"}
#: The Orin board with the one published Orin row; its family shares its CPU core and GPU architecture.
ORIN_REF = "orin-agx"


def orin_family() -> tuple[str, ...]:
    """Every catalogued board with ``ORIN_REF``'s CPU core and GPU architecture, largest module first: fitted
    by :func:`_orin_family` (Xavier's constants moved by per-clock ratios, power from spec sheets)."""
    ref = load_device(ORIN_REF).specs
    same = [d for d in list_devices() if (d.specs.cpu_type, d.specs.gpu_arch) == (ref.cpu_type, ref.gpu_arch)]
    return tuple(d.id for d in sorted(same, key=lambda d: -d.specs.module_power_w))


def fitted_devices() -> tuple[str, ...]:
    """The devices a run fits, in the order it writes them; other catalogued ones keep hand-written blocks."""
    return (*_PERF_KEY, *orin_family())


def _calibration_from(theta: dict[str, float], power: dict[str, dict[str, float]] | None = None,
                      power_shape: Mapping[str, float] | None = None) -> Calibration:
    """The calibration of time constants ``theta``, power coefficients ``power`` (per device; none: 0) and
    the shared constants of the power model's shape ``power_shape`` (see :func:`fit_power_shape`)."""
    base = {k: theta[k] for k in _TIME_FIELDS}
    devices = {}
    for dev, key in _PERF_KEY.items():
        devices[dev] = DeviceConstants(**base, cpu_perf_per_ghz=theta[key],
                                       **(power or {}).get(dev, _ZERO_POWER))
    # The predictor's DVFS knee, so that the simulated reference sweeps carry the power shape its features
    # assume; the power rows prefer it to the hand-set 0.35, their optimum 0.6 costs out-of-sample coverage.
    shape = {k: SHARED_DEFAULTS[k] for k in POWER_SHAPE_KEYS} | {"dvfs_knee": KNEE_REL} | dict(power_shape or {})
    return Calibration(devices, {k: theta[k] if k in theta else shape[k] for k in SHARED_KEYS})


def _time_residuals(df: pd.DataFrame) -> np.ndarray:
    res = [np.log(df["sim_epoch_time_s"] / df["pub_epoch_time_s"]).to_numpy()]
    c = df.dropna(subset=["pub_compute_time_s"])
    res.append(0.7 * np.log(c["sim_compute_time_s"] / c["pub_compute_time_s"]).to_numpy())
    s = df.dropna(subset=["pub_stall_time_s"])
    res.append(1.5 * ((s["sim_stall_time_s"] - s["pub_stall_time_s"]) / s["pub_epoch_time_s"]).to_numpy())
    res.append(0.15 * np.log(np.maximum(s["sim_stall_time_s"], 1e-3) / s["pub_stall_time_s"]).to_numpy())
    return np.concatenate(res)


def fit_time(rows: list[CalibrationRow], verbose: bool = False,
             facts: list[RatioFact] | None = None) -> dict[str, float]:
    """Stage 1: the time constants of the Xavier/Nano family and the shared constants."""
    from scipy.optimize import least_squares

    names = list(_START)
    lo = np.array([_BOUNDS[n][0] for n in names])
    hi = np.array([_BOUNDS[n][1] for n in names])
    # Bounded parameters that may be 0 are fitted linearly, the rest in log space.
    linear = np.array([lo_ == 0.0 for lo_ in lo])
    x0 = np.array([_START[n] if lin else math.log(_START[n]) for n, lin in zip(names, linear, strict=True)])
    lo_x = np.where(linear, lo, np.log(np.maximum(lo, 1e-300)))
    hi_x = np.where(linear, hi, np.log(hi))
    fit_rows = [r for r in rows if r.device in _PERF_KEY]

    def theta_of(x: np.ndarray) -> dict[str, float]:
        return {n: float(v if lin else math.exp(v)) for n, v, lin in zip(names, x, linear, strict=True)}

    def residuals(x: np.ndarray) -> np.ndarray:
        cal = _calibration_from(theta_of(x))
        res = _time_residuals(simulate_rows(cal, fit_rows))
        if not facts:
            return res
        f = simulate_facts(cal, facts)
        return np.concatenate([res, FACT_TIME_WEIGHT * np.log(f["sim_speedup"] / f["pub_speedup"]).to_numpy()])

    sol = least_squares(residuals, x0, bounds=(lo_x, hi_x), x_scale="jac", max_nfev=300,
                        verbose=2 if verbose else 0)
    return theta_of(sol.x)


def _power_design(cal: Calibration, rows: list[CalibrationRow]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Linear system in the 7 power coefficients: avg-power rows and base-power rows, and which of its rows
    are base readings (idle at the mode)."""
    base_of, dyn_of = {}, {}
    for (device, workload, batch), idx, modes, workers in row_groups(rows):
        ph = cal.physics(device)
        mb = twin_for(cal, device, workload).minibatch(modes, batch, workers)
        base = ph.base_power_features(modes)
        dyn = ph.dynamic_power_features(modes, mb.gpu_util, mb.cpu_util, mb.mem_util)
        for j, i in enumerate(idx):
            base_of[i], dyn_of[i] = base[j], dyn[j]
    a, y, is_base = [], [], []
    for i, r in enumerate(rows):
        base = base_of[i]
        if r.targets.get("avg_power_w") is not None:
            a.append(np.concatenate([base, dyn_of[i]]))
            y.append(r.targets["avg_power_w"])
            is_base.append(False)
        if r.targets.get("base_power_w") is not None:
            a.append(np.concatenate([base, np.zeros(3)]))
            y.append(r.targets["base_power_w"])
            is_base.append(True)
    return np.array(a), np.array(y), np.array(is_base, dtype=bool)


def _spec_ratios(device: str, ref: str = "agx-xavier") -> np.ndarray:
    """Spec-sheet multipliers of the 7 power coefficients from ``ref`` to ``device``."""
    s, r = load_device(device).specs, load_device(ref).specs
    socket = socket_idle_w()
    idle = socket.get(device, socket[ref] * s.module_power_w / r.module_power_w) / socket[ref]
    cores, cuda, bus = s.cpu_cores / r.cpu_cores, s.cuda_cores / r.cuda_cores, s.memory_bus_bits / r.memory_bus_bits
    return np.array([idle, cores, cuda, bus, cores, cuda, bus])


def _fact_power_design(cal: Calibration, facts: list[RatioFact]) -> tuple[np.ndarray, np.ndarray]:
    """Rows of the power system for ratio facts: P_fast / R - P_slow = 0 (an error in W of the slow
    mode's power), linear in the 7 coefficients."""
    a = []
    for f in facts:
        ph = cal.physics(f.device)
        feats = []
        for mode in (f.fast_mode, f.slow_mode):
            mb = twin_for(cal, f.device, f.workload).minibatch(mode, f.batch_size, f.num_workers)
            m = {k: np.atleast_1d(v) for k, v in mode.items()}
            feats.append(np.concatenate([ph.base_power_features(m)[0],
                                         ph.dynamic_power_features(m, mb.gpu_util, mb.cpu_util, mb.mem_util)[0]]))
        a.append(FACT_POWER_WEIGHT * (feats[0] / f.power_ratio - feats[1]))
    return np.array(a).reshape(len(a), 7), np.zeros(len(a))


def _fit_agx_power(cal: Calibration, rows: list[CalibrationRow],
                   facts: list[RatioFact]) -> tuple[np.ndarray, float]:
    """AGX Xavier's 7 coefficients by bounded least squares, and the residual sum of squares."""
    from scipy.optimize import lsq_linear

    a, y, is_base = _power_design(cal, [r for r in rows if r.device == "agx-xavier"])
    fa, fy = _fact_power_design(cal, [f for f in facts if f.device == "agx-xavier"])
    # The base readings (idle at the mode) measure the four base coefficients alone; fitted jointly, the
    # training rows' residuals bent them (base_w at its bound, the memory clock's term 1.5x too steep).
    # A powered module never idles below ~1 W at its lowest clocks.
    base = lsq_linear(a[is_base, :4], y[is_base], bounds=(np.array([MIN_BASE_W, 0, 0, 0]), np.inf)).x
    dyn_a, dyn_y = np.vstack([a[~is_base], fa]), np.concatenate([y[~is_base], fy])
    dyn = lsq_linear(dyn_a[:, 4:], dyn_y - dyn_a[:, :4] @ base, bounds=(0.0, np.inf)).x
    coef = np.concatenate([base, dyn])
    a, y = np.vstack([a, fa]), np.concatenate([y, fy])
    return coef, float(np.sum((a @ coef - y) ** 2))


def fit_power_shape(theta: dict[str, float], rows: list[CalibrationRow], facts: list[RatioFact]
                    ) -> dict[str, float]:
    """The DVFS voltage floor (fraction of top voltage) and the power share of the GPU's kernel latency
    that best explain AGX Xavier's power rows and the low-clock facts: power is linear in the coefficients
    for a given pair, so a grid search (``POWER_SHAPE_KEYS``)."""
    grid = [dict(zip(POWER_SHAPE_KEYS, pair, strict=True)) for pair in product(V_FLOOR_GRID, LATENCY_SHARE_GRID)]
    sse = [_fit_agx_power(_calibration_from(theta, power_shape=shape), rows, facts)[1] for shape in grid]
    return {k: float(v) for k, v in grid[int(np.argmin(sse))].items()}


def fit_power(cal: Calibration, rows: list[CalibrationRow],
              facts: list[RatioFact] | None = None) -> dict[str, dict[str, float]]:
    """Stage 2: AGX Xavier coefficients by bounded least squares; NX and Nano by spec ratio + scales."""
    from scipy.optimize import lsq_linear

    agx, _ = _fit_agx_power(cal, rows, facts or [])
    out = {"agx-xavier": agx}
    for dev in (d for d in _PERF_KEY if d != "agx-xavier"):
        prior = agx * _spec_ratios(dev)
        a, y, _ = _power_design(cal, [r for r in rows if r.device == dev])
        if not len(y):
            out[dev] = prior
            continue
        base_part, dyn_part = a[:, :4] @ prior[:4], a[:, 4:] @ prior[4:]
        # Two scales (baseload, dynamic) when the rows span light and heavy workloads, else one.
        spread = np.ptp(dyn_part / (base_part + dyn_part)) > 0.1
        design = np.column_stack([base_part, dyn_part]) if spread else (base_part + dyn_part)[:, None]
        k = lsq_linear(design, y, bounds=(0.05, 20.0)).x
        scale = np.concatenate([np.full(4, k[0]), np.full(3, k[-1])])
        out[dev] = prior * scale
    return {dev: dict(zip(_POWER_FIELDS, map(float, v), strict=True)) for dev, v in out.items()}


def _orin_family(cal: Calibration, rows: list[CalibrationRow]) -> None:
    """Orin AGX / NX / Nano: Xavier-fitted constants, the CPU's speed per GHz times the per-clock ratio
    of its core to Carmel's that the predictor's cross-device physics uses (no published CPU-bound Orin
    row measures it), and one GPU speed factor (Ampere vs Volta per clock) fitted on the Orin AGX MAXN row;
    baseload from the socket-idle ordering, dynamic power scaled to each module's budget."""
    from scipy.optimize import brentq

    xavier = cal.devices["agx-xavier"]
    # One ratio serves the family: orin_family() holds the boards with ORIN_REF's core.
    per_clock = cpu_per_clock(load_device(ORIN_REF)) / cpu_per_clock(load_device("agx-xavier"))
    orin = replace(xavier, cpu_perf_per_ghz=xavier.cpu_perf_per_ghz * per_clock)
    orin_rows = [r for r in rows if r.device == ORIN_REF]

    def faster_gpu(consts: DeviceConstants, k: float) -> DeviceConstants:
        return replace(consts, gpu_eff_dense=min(consts.gpu_eff_dense * k, 0.98),
                       gpu_eff_depthwise=consts.gpu_eff_depthwise * k, mem_eff=min(consts.mem_eff * k, 0.98),
                       gpu_kernel_latency_s=consts.gpu_kernel_latency_s / k)

    def err(log_k: float) -> float:
        devs = dict(cal.devices)
        devs[ORIN_REF] = faster_gpu(orin, math.exp(log_k))
        df = simulate_rows(Calibration(devs, cal.shared), orin_rows)
        return float(np.log(df["sim_epoch_time_s"] / df["pub_epoch_time_s"]).mean())

    try:
        k = math.exp(brentq(err, math.log(0.3), math.log(10.0)))
        k_basis = (f"GPU efficiencies x {k:.3g} (Ampere vs Volta per clock), fitted on the one published "
                   "Orin AGX epoch (MobileNetV3, MAXN): that row matches by construction")
    except ValueError:  # no factor in range matches: keep Volta's
        k, k_basis = 1.0, "GPU efficiencies as Volta (the Orin row could not be matched)"
    agx_power = np.array([getattr(xavier, f) for f in _POWER_FIELDS])
    phys_agx = cal.physics("agx-xavier")
    maxn_agx = preset_knobs("agx-xavier", "MAXN")
    full_agx = (phys_agx.power_w(maxn_agx, 1.0, 1.0, 1.0) - phys_agx.base_power_w(maxn_agx)).item()
    for dev in orin_family():
        prior = agx_power * _spec_ratios(dev)
        device = load_device(dev)
        consts = replace(faster_gpu(orin, k), **dict(zip(_POWER_FIELDS, prior, strict=True)))
        ph = DevicePhysics(device, consts, cal.shared)
        top = {"cpu_cores": device.cpu_cores_range[1], "cpu_mhz": max(device.cpu_steps_mhz),
               "gpu_mhz": max(device.gpu_steps_mhz), "emc_mhz": max(device.emc_steps_mhz)}
        base_top = ph.base_power_w(top).item()
        dyn_top = ph.power_w(top, 1.0, 1.0, 1.0).item() - base_top
        # Everything busy at the top clocks draws the module's maximum power (spec sheet).
        scale = max(device.specs.module_power_w - base_top, 0.1 * full_agx) / dyn_top
        dyn = {f: getattr(consts, f) * scale for f in ("cpu_dyn_w", "gpu_dyn_w", "mem_dyn_w")}
        cal.devices[dev] = replace(consts, **dyn, basis=(
            f"time: Xavier-fitted constants, CPU speed per GHz x {per_clock:.3g} (A78AE vs Carmel per clock, "
            f"predictor.constants.CPU_PER_CLOCK), {k_basis}. "
            f"power: spec sheet only (no published module power): AGX Xavier coefficients x spec ratios, "
            f"baseload by wall-socket idle ordering, dynamic power scaled so that all-busy at top clocks "
            f"= {device.specs.module_power_w:g} W module maximum"))


def calibrate(rows: list[CalibrationRow], facts: list[RatioFact], verbose: bool = False) -> Calibration:
    """Fit every device's constants (both stages) on ``rows`` and ``facts``, and return them."""
    theta = fit_time(rows, verbose, facts)
    if verbose:
        print("time constants:", {k: f"{v:.4g}" for k, v in theta.items()})
    shape = fit_power_shape(theta, rows, facts)
    power = fit_power(_calibration_from(theta, power_shape=shape), rows, facts)
    cal = _calibration_from(theta, power, shape)
    counts = pd.Series([r.device for r in rows]).value_counts()
    cal.devices["agx-xavier"] = replace(cal.devices["agx-xavier"], basis=(
        f"fitted: time constants on {counts.get('agx-xavier', 0)} AGX Xavier + "
        f"{counts.get('xavier-nx', 0)} Xavier NX rows (shared Volta/Carmel), baseload by least squares on the "
        "AGX Xavier base-power rows, dynamic power on its power rows"))
    cal.devices["xavier-nx"] = replace(cal.devices["xavier-nx"], basis=(
        "fitted: shared Volta/Carmel time constants, own CPU speed; power = AGX Xavier coefficients x spec "
        "ratios (CUDA cores, bus width, cores, socket idle), scaled on the NX power rows"))
    cal.devices["nano"] = replace(cal.devices["nano"], basis=(
        "fitted: CPU speed on the Nano LeNet rows; GPU efficiencies transferred from Volta (no GPU-bound "
        "Nano rows); power = AGX Xavier coefficients x spec ratios, one scale fitted on the Nano rows"))
    _orin_family(cal, rows)
    return cal


#: Hold-out checks: refit without these rows, then compare the twin with them.
HOLDOUTS = {
    "batch sizes (POMACS Fig 4 rows)": lambda r: r.source == "batch_size",
    "EMC sweep (AGX Xavier modes h, i, j)": lambda r: r.source == "agx_xavier_reference_sweeps"
    and r.label.endswith(("mode h", "mode i", "mode j")),
    "CPU cores and clock (AGX Xavier modes a, e, f)": lambda r: r.source == "agx_xavier_reference_sweeps"
    and r.label.endswith(("mode a", "mode e", "mode f")),
    "no DataLoader workers (w = 0 rows)": lambda r: r.source == "dataloader_workers" and r.num_workers == 0,
}


def holdout_checks(rows: list[CalibrationRow], facts: list[RatioFact]) -> pd.DataFrame:
    """Per hold-out group: refit time and power on the other rows, then the errors on the held-out ones."""
    out = []
    for name, held in HOLDOUTS.items():
        train = [r for r in rows if not held(r)]
        test = [r for r in rows if held(r)]
        theta = fit_time(train, facts=facts)
        shape = fit_power_shape(theta, train, facts)
        cal = _calibration_from(theta, fit_power(_calibration_from(theta, power_shape=shape), train, facts), shape)
        crit = criteria(simulate_rows(cal, test))
        out.append({"held out": name, **crit})
    return pd.DataFrame(out)


# ------------------------------------------------------------------ the constants file

#: A table's header line, and a device's (``[devices."<id>"]`` or ``[devices.<id>]``).
_TABLE = re.compile(r"^\s*\[")
_DEVICE_TABLE = re.compile(r'^\s*\[\s*devices\s*\.\s*(?:"([^"]*)"|([A-Za-z0-9_-]+))\s*\]\s*(?:#.*)?$')


def _device_blocks(text: str) -> dict[str, str]:
    """Each device table of a constants file as written: the comment lines right above its header, the
    header and every line up to the next table's, trailing blank lines left out."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if _TABLE.match(line)]
    begins = []
    for i in starts:
        while i > 0 and lines[i - 1].lstrip().startswith("#"):
            i -= 1
        begins.append(i)
    out = {}
    for k, start in enumerate(starts):
        m = _DEVICE_TABLE.match(lines[start])
        if m:
            block = lines[begins[k]:begins[k + 1] if k + 1 < len(starts) else len(lines)]
            while block and not block[-1].strip():
                block.pop()
            out[m.group(1) if m.group(1) is not None else m.group(2)] = "\n".join(block)
    return out


def _check_hand_written(raw: Mapping[str, object], where: str, field: str) -> None:
    """A hand-written device block the twin can load (its loader names an unknown, missing or non-number
    constant) and that says how its constants were obtained: the basis, this tool's own rule."""
    DeviceConstants.from_mapping(raw, where)
    if not str(raw.get("basis", "")).strip():
        raise InputError(f'{where} states no basis: add basis = "<how its constants were obtained>"', field)


def kept_blocks(path: str | Path, fitted: Iterable[str]) -> dict[str, str]:
    """The hand-written blocks of the constants file ``path`` that a run fitting ``fitted`` keeps: those of
    catalogued devices it does not fit, verbatim (comment lines right above them included), each checked
    to load (:class:`InputError` naming the file and device otherwise, before any fitting). Blocks of
    devices not in the catalogue are dropped; both are printed."""
    path = Path(path)
    if not path.is_file():
        return {}
    text = path.read_text(encoding="utf-8")
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path} is not valid TOML ({exc}): fix it or remove it before rerunning", "out") from None
    fitted, catalogued, blocks = set(fitted), set(device_ids()), _device_blocks(text)
    kept = {}
    for dev, consts in raw.get("devices", {}).items():
        if dev in fitted:
            continue
        where, field = f'[devices."{dev}"] in {path}', f"devices.{dev}"
        if dev not in catalogued:
            print(f"note: dropping {where}: {dev!r} is not in the catalogue (models/devices/)")
            continue
        if dev not in blocks or not isinstance(consts, dict):
            raise InputError(f"{where} is not a table of its own: write it under a [devices.\"{dev}\"] line "
                             "to have it kept", field)
        _check_hand_written(consts, where, field)
        kept[dev] = blocks[dev]
        print(f"note: keeping the hand-written [devices.\"{dev}\"] block of {path} verbatim "
              f"(not fitted here; basis: {consts['basis']})")
    return kept


def _header(fitted: Iterable[str], kept: Iterable[str]) -> list[str]:
    """The constants file's header: units, which blocks a run rewrites and which it keeps."""
    return ["# Digital-twin constants. Units: s, W, fractions; CPU costs are s on a core of relative speed 1.0",
            "# (the host that measured profiler/sim/data/workloads/*.json). See docs/digital-twin.md.",
            "# Fitted by `python -m tools.calibrate_twin`, rewritten on every run (do not edit them by hand):",
            f"#   [shared] and devices {', '.join(fitted)}.",
            "# Hand-written: a catalogued device it does not fit (no published figures) may have its own",
            '#   [devices."<id>"] block with every constant of the fitted ones and a basis saying how they were',
            f"#   obtained; reruns keep it verbatim. Kept now: {', '.join(kept) or 'none'}.",
            ""]


def write_calibration(cal: Calibration, path: str | Path, kept: Mapping[str, str]) -> None:
    """Write the fitted constants ``cal`` and the ``kept`` hand-written blocks (:func:`kept_blocks`) to
    ``path``, under a header that names both."""
    cal.write(path, _header(cal.devices, kept), kept.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=str(DATA_DIR), help="transcribed published figures")
    parser.add_argument("--out", default=str(CALIBRATION_PATH), help="calibration TOML to write")
    parser.add_argument("--results", default=str(RESULTS_PATH), help="generated tables (Markdown)")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--no-holdout", action="store_true", help="skip the hold-out refits (faster)")
    args = parser.parse_args(argv)
    fitted = fitted_devices()
    try:
        kept = kept_blocks(args.out, fitted)
    except InputError as exc:
        print(f"calibrate_twin: {exc.message}", file=sys.stderr)
        return 2
    for dev in device_ids():
        if dev not in fitted and dev not in kept:
            print(f"note: {dev!r} is catalogued but has no published figures to fit: sim:{dev} fails until a "
                  f"hand-written [devices.\"{dev}\"] block is added to {args.out} (its header says how)")
    rows = load_calibration_rows(args.data_dir)
    facts = load_ratio_facts(args.data_dir)
    cal = calibrate(rows, facts, args.verbose)
    write_calibration(cal, args.out, kept)
    df = simulate_rows(cal, rows)
    fact_df = simulate_facts(cal, facts)
    write_results(cal, df, args.results, None if args.no_holdout else holdout_checks(rows, facts), fact_df)
    crit = criteria(df)
    print(f"epoch time within 15%: {crit['time_within']:.0%} of {crit['time_rows']} rows "
          f"(MAPE {crit['time_mape']:.1%}); power within 15%: {crit['power_within']:.0%} of "
          f"{crit['power_rows']} rows (MAPE {crit['power_mape']:.1%})")
    for f in fact_df.itertuples():
        print(f"{f.label}: speed-up {f.sim_speedup:.3g}x (published {f.pub_speedup:g}x), power ratio "
              f"{f.sim_power_ratio:.3g}x (published {f.pub_power_ratio:g}x)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
