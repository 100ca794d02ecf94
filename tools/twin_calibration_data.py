"""The figures the digital twin is calibrated on and its constants' file (``tools/calibrate_twin.py``).

The published rows and ratio facts transcribed in ``tools/data/`` (see ``tools/data/README.md``) and the
published AGX Xavier sweeps; :class:`Calibration`, the constants it writes to
``profiler/sim/data/twin_calibration.toml``; and the twin's noise-free figures next to the published ones,
with the 15% criteria they are judged by.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
from jetpredict.models.catalogue import load_device
from jetpredict.models.numbers import finite_or_none
from jetpredict.models.paths import data_path
from jetpredict.profiler.sim.physics import SHARED_KEYS, DeviceConstants, DevicePhysics

#: The published figures this script reads, transcribed with their sources (see tools/data/README.md).
DATA_DIR = Path(__file__).resolve().parent / "data"
#: The published AGX Xavier sweeps, bundled as that device's reference (profile rows).
PUBLISHED_SWEEPS = data_path("reference", "agx-xavier-published.csv")

#: Workload ids of the published sweeps -> our built-in workloads.
WORKLOADS = {"resnet18-cifar10": "resnet18-cifar10", "mobilenetv3-gld23k": "mobilenetv3-small-gld23k",
             "lenet5-mnist": "lenet5-mnist"}


@dataclass
class CalibrationRow:
    """One published measurement: a workload at a mode, with the figures it reports (None = not reported)."""

    source: str
    label: str
    device: str
    workload: str
    mode: dict[str, float]
    batch_size: int
    num_workers: int
    targets: dict[str, float | None] = field(default_factory=dict)


def preset_knobs(device: str, preset: str) -> dict[str, float]:
    p = load_device(device).preset(preset)
    return {"cpu_cores": p.cpu_cores, "cpu_mhz": p.cpu_mhz, "gpu_mhz": p.gpu_mhz, "emc_mhz": p.emc_mhz}


def load_calibration_rows(data_dir: str | Path = DATA_DIR,
                          sweeps: str | Path = PUBLISHED_SWEEPS) -> list[CalibrationRow]:
    """Every published row the twin is calibrated and judged on (see the module docstring)."""
    rows: list[CalibrationRow] = []
    for r in pd.read_csv(sweeps).itertuples():
        if r.workload not in WORKLOADS:
            continue
        rows.append(CalibrationRow(
            "agx_xavier_reference_sweeps", f"{r.workload} mode {r.mode}", r.device, WORKLOADS[r.workload],
            {"cpu_cores": r.cpu_cores, "cpu_mhz": r.cpu_mhz, "gpu_mhz": r.gpu_mhz, "emc_mhz": r.emc_mhz},
            int(r.batch_size), int(r.num_workers),
            {"epoch_time_s": r.epoch_time_s, "stall_time_s": r.stall_time_s,
             "compute_time_s": r.compute_time_s, "avg_power_w": r.avg_power_w,
             "base_power_w": r.base_power_w}))
    for r in pd.read_csv(Path(data_dir) / "calibration_rows.csv").itertuples():
        power = finite_or_none(r.avg_power_w)
        if power is None and finite_or_none(r.epoch_energy_j) is not None:
            power = r.epoch_energy_j / r.epoch_time_s  # figures that give energy per epoch, not power
        rows.append(CalibrationRow(
            r.group, r.label, r.device, r.workload, preset_knobs(r.device, r.preset), int(r.batch_size),
            int(r.num_workers), {"epoch_time_s": r.epoch_time_s, "stall_time_s": r.stall_time_s,
                                 "compute_time_s": r.compute_time_s, "avg_power_w": power}))
    for row in rows:
        row.targets = {k: finite_or_none(v) for k, v in row.targets.items()}
    return rows


@dataclass
class RatioFact:
    """A published ratio between two modes of one run: ``fast`` over ``slow`` (speed-up = slow time /
    fast time, power ratio = fast power / slow power)."""

    source: str
    label: str
    device: str
    workload: str
    fast_mode: dict[str, float]
    slow_mode: dict[str, float]
    batch_size: int
    num_workers: int
    speedup: float
    power_ratio: float


def load_ratio_facts(data_dir: str | Path = DATA_DIR) -> list[RatioFact]:
    """The published ratios between two modes (``ratio_facts.csv``): the fast mode is a preset, the slow
    one the same mode with a lower GPU clock."""
    facts = []
    for r in pd.read_csv(Path(data_dir) / "ratio_facts.csv").itertuples():
        fast = preset_knobs(r.device, r.fast_preset)
        facts.append(RatioFact("facts", r.label, r.device, r.workload, fast,
                               {**fast, "gpu_mhz": float(r.slow_gpu_mhz)}, int(r.batch_size),
                               int(r.num_workers), float(r.speedup), float(r.power_ratio)))
    return facts


@cache
def socket_idle_w(data_dir: str | Path = DATA_DIR) -> dict[str, float]:
    """Wall-socket idle power per device with DVFS off, W (``socket_idle_power.csv``): used only to order
    and scale device baselines, never as module power."""
    df = pd.read_csv(Path(data_dir) / "socket_idle_power.csv")
    return {r.device: float(r.socket_idle_w) for r in df.itertuples()}


def simulate_facts(cal: Calibration, facts: list[RatioFact]) -> pd.DataFrame:
    """The twin's (noise-free) speed-up and power ratio for each fact, next to the published ones."""
    out = []
    for f in facts:
        modes = {k: np.array([f.fast_mode[k], f.slow_mode[k]], dtype=float) for k in f.fast_mode}
        sim = twin_for(cal, f.device, f.workload).epoch(modes, f.batch_size, f.num_workers)
        t, p = sim["epoch_time_s"], sim["avg_power_w"]
        speedup = float(t[1] / t[0])
        # The time fit runs the twin without power coefficients (0 W): no power ratio then.
        power_ratio = float(p[0] / p[1]) if p[1] > 0 else math.nan
        out.append({"source": f.source, "label": f.label, "pub_speedup": f.speedup, "sim_speedup": speedup,
                    "err_speedup": speedup / f.speedup - 1, "pub_power_ratio": f.power_ratio,
                    "sim_power_ratio": power_ratio, "err_power_ratio": power_ratio / f.power_ratio - 1,
                    "sim_energy_ratio": power_ratio / speedup,
                    "sim_slow_power_w": float(p[1]), "sim_fast_power_w": float(p[0])})
    return pd.DataFrame(out)


# ------------------------------------------------------------------ constants and their file

@dataclass
class Calibration:
    """Everything the twin needs: constants per device plus the shared ones."""

    devices: dict[str, DeviceConstants]
    shared: dict[str, float]

    def physics(self, device: str) -> DevicePhysics:
        return DevicePhysics(load_device(device), self.devices[device], self.shared)

    def write(self, path: str | Path, header: Sequence[str], kept: Iterable[str] = ()) -> None:
        """Write ``path``: the ``header`` lines, then the fitted tables ([shared], then each device's, six
        significant digits), then each ``kept`` hand-written block verbatim after a blank line."""
        lines = [*header, "[shared]"]
        lines += [f"{k} = {self.shared[k]:.6g}" for k in SHARED_KEYS]
        for dev, c in self.devices.items():
            lines += ["", f'[devices."{dev}"]']
            for k, v in asdict(c).items():
                lines.append(f'{k} = "{v}"' if k == "basis" else f"{k} = {v:.6g}")
        Path(path).write_text("\n".join(lines) + "\n" + "".join(f"\n{b}\n" for b in kept), encoding="utf-8")


@cache
def _complexity(workload: str):
    from jetpredict.profiler.sim.kernel_costs import load_complexity

    return load_complexity(workload)


def twin_for(cal: Calibration, device: str, workload: str):
    from jetpredict.profiler.sim.twin import Twin

    return Twin(cal.physics(device), _complexity(workload))


def row_groups(rows: Sequence[CalibrationRow]
                ) -> Iterator[tuple[tuple[str, str, int], list[int], dict[str, np.ndarray], np.ndarray]]:
    """The rows per (device, workload, batch size), in order of first appearance: their indices, modes and
    workers as arrays, so that each group takes one vectorised twin call."""
    groups: dict[tuple[str, str, int], list[int]] = {}
    for i, r in enumerate(rows):
        groups.setdefault((r.device, r.workload, r.batch_size), []).append(i)
    for key, idx in groups.items():
        modes = {k: np.array([rows[i].mode[k] for i in idx], dtype=float) for k in rows[idx[0]].mode}
        yield key, idx, modes, np.array([rows[i].num_workers for i in idx], dtype=float)


def simulate_rows(cal: Calibration, rows: list[CalibrationRow]) -> pd.DataFrame:
    """The twin's (noise-free) figures for each calibration row, next to the published ones."""
    sims: dict[int, dict[str, float]] = {}
    for (device, workload, batch), idx, modes, workers in row_groups(rows):
        sim = twin_for(cal, device, workload).epoch(modes, batch, workers)
        for j, i in enumerate(idx):
            sims[i] = {k: float(np.asarray(v)[j]) for k, v in sim.items()}
    out = []
    for i, r in enumerate(rows):
        rec = {"source": r.source, "label": r.label, "device": r.device, "workload": r.workload}
        for k in ("epoch_time_s", "stall_time_s", "compute_time_s", "avg_power_w", "base_power_w"):
            rec[f"pub_{k}"] = r.targets.get(k)
            rec[f"sim_{k}"] = sims[i][k]
        out.append(rec)
    df = pd.DataFrame(out)
    for k in ("epoch_time_s", "avg_power_w", "stall_time_s", "compute_time_s", "base_power_w"):
        df[f"err_{k}"] = (df[f"sim_{k}"] - df[f"pub_{k}"]) / df[f"pub_{k}"]
    return df


def criteria(df: pd.DataFrame, tolerance: float = 0.15) -> dict[str, float]:
    """Share of rows within ``tolerance`` for epoch time (all rows) and power (rows that have it)."""
    t = df["err_epoch_time_s"].dropna().abs()
    p = df["err_avg_power_w"].dropna().abs()
    return {"time_rows": len(t), "time_within": float((t <= tolerance).mean()),
            "time_mape": float(t.mean()), "power_rows": len(p), "power_within": float((p <= tolerance).mean()),
            "power_mape": float(p.mean())}
