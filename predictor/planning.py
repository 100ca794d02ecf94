"""Which power modes to profile: a D-optimal design over the mechanism's features, and its cost.

The workload model's epoch time is linear in its mechanism terms (``predictor.features``: GPU work /
f_gpu, memory traffic / f_emc, main-thread and data-pipeline work / f_cpu x core contention, and a
constant). A fit on K profiled modes pins those coefficients down best when the modes maximise
det(X'X) of the design matrix X of those terms (each scaled to 0..1 over the candidates). Maximising
the determinant moves the knobs independently: the seed study's 4 modes changed CPU and GPU clocks
together, which no fit can separate afterwards.

Selection is greedy (matrix determinant lemma, vectorised over all candidates) plus a few random
starts, each improved by Fedorov exchange passes. A small ridge prior (``RIDGE``) keeps det > 0 when K
is below the number of terms, which is what lets K = 4 work with 5 terms: the predictor's reference
sweeps supply the prior there.

Default candidates (no ``--candidates``): the device's modes with every clock in the upper half of its
range (>= ``MIN_CLOCK_SHARE`` of the maximum) and >= ``MIN_CORES`` cores online. Over the whole space the
D-criterion picks the extreme corners (1-2 cores at 115 MHz, the GPU at 115 MHz, memory at 204 MHz):
each sits in another bottleneck regime than the modes around it, so a 4-mode fit through them
mispredicts the modes users run, and they are the slowest to profile. On the digital twin's AGX Xavier
sweeps (``twin_full_range`` in bench/accuracy.py: profile the plan's 4 modes with the twin, predict the
328 swept modes; epoch-time MAPE on the modes with every clock >= 40% of its maximum and >= 2 cores),
plans over the whole space missed by 10 / 185 / 119 / 182% (LeNet-5 / MobileNetV3-small / ResNet-18 /
VGG-11), plans in the upper half (this default) by 7.7 / 16.1 / 1.4 / 2.1%; higher floors did a little
better on the CPU-bound two in trial runs, at the cost of less clock spread. The published modes
e,f,i,j (CPU clocks near the top, a 2-vs-8-core contrast at one clock) did 3.4 / 4.0 / 2.6 / 2.9%: with 4
modes the D-optimal design changes core count and CPU clock together (2 cores at the lower clock), which
the mechanism's features cannot tell apart but a CPU-bound workload's contention can. For such workloads
a core-count contrast at one CPU clock (``--candidates``) is the better buy.

Profiling-time estimate per mode (:func:`profile_time_s`): settle after the switch + idle window for
base power + (warm-up + measured minibatches) x predicted minibatch time. Assumptions: the defaults of
``jetpredict profile`` (10 warm-up, 40 measured minibatches), 5 s settle and 5 s idle window, and no
time for loading the dataset or building the model (paid once, not per mode). The minibatch time is the
workload model's prediction when a model is given, else the slowest bundled reference workload's
(:func:`reference_minibatch_s`), so the estimate errs long for unknown workloads.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from jetpredict.models.errors import InputError
from jetpredict.models.profile_rows import DEFAULT_NUM_WORKERS
from jetpredict.predictor import features as F

#: Prior precision added to X'X (in units of one scaled observation); small: the data dominate.
RIDGE = 1e-3
#: Profiling protocol assumed by the time estimate; the defaults match ``jetpredict profile``.
SETTLE_S = 5.0          # after nvpmodel switches, clocks and the fan settle before anything is timed
IDLE_WINDOW_S = 5.0     # base power is measured idle for a few seconds after the switch (DESIGN.md)
WARMUP_MINIBATCHES = 10  # ``profile --warmup`` default: cuDNN autotuning and the page cache warm up
MEASURED_MINIBATCHES = 40  # ``profile --minibatches`` default
#: Default candidate region (see the module docstring): share of each clock's maximum, cores online.
MIN_CLOCK_SHARE = 0.5
MIN_CORES = 2
MAX_EXCHANGE_PASSES = 10
RESTARTS = 4  # local search: a few starts avoid most poor local optima


def operating_region(device, cpu_cores, cpu_mhz, gpu_mhz, emc_mhz) -> np.ndarray:
    """Mask of the modes (knob arrays) in the default planning region of a catalogue ``device``: every
    clock >= ``MIN_CLOCK_SHARE`` of the device's maximum and >= ``MIN_CORES`` cores."""
    maxima = F.device_maxima(device)
    ok = np.asarray(cpu_cores, dtype=float) >= min(MIN_CORES, maxima["cpu_cores"])
    for knob, f in (("cpu_mhz", cpu_mhz), ("gpu_mhz", gpu_mhz), ("emc_mhz", emc_mhz)):
        ok &= np.asarray(f, dtype=float) >= MIN_CLOCK_SHARE * maxima[knob]
    return ok


def design_matrix(cpu_cores, cpu_mhz, gpu_mhz, emc_mhz, kappa_cpu: float, kappa_pipe: float,
                  num_workers: float = DEFAULT_NUM_WORKERS) -> np.ndarray:
    """(n, 5) design matrix of the epoch-time terms (:data:`predictor.features.TOTAL_TERMS`).

    Each term is scaled to 0..1 over the candidates (the D-criterion does not depend on the scale, but
    the ridge prior does); ``kappa_*`` are the device's core-contention constants from its reference.
    """
    feats = F.time_features(np.asarray(cpu_cores, dtype=float), cpu_mhz, gpu_mhz, emc_mhz, num_workers,
                            kappa_cpu, kappa_pipe)
    columns = []
    for term in F.TOTAL_TERMS:
        v = np.asarray(feats[term], dtype=float).ravel()
        span = v.max() - v.min()
        if term == "one":
            columns.append(v)
        else:
            # A term that does not vary among the candidates carries no information: a zero column.
            columns.append((v - v.min()) / span if span > 0 else np.zeros_like(v))
    return np.column_stack(columns)


def log_det(x: np.ndarray, chosen: np.ndarray | list[int], ridge: float = RIDGE) -> float:
    """log det(ridge*I + X_S' X_S) of the chosen rows: the D-criterion (higher is better)."""
    xs = x[np.asarray(chosen, dtype=int)]
    sign, value = np.linalg.slogdet(ridge * np.eye(x.shape[1]) + xs.T @ xs)
    return float(value) if sign > 0 else float("-inf")


def _gains(x: np.ndarray, info: np.ndarray) -> np.ndarray:
    """log(1 + x' M^-1 x) for every candidate row: the log-det gain of adding it."""
    inv = np.linalg.inv(info)
    return np.log1p(np.einsum("ij,jk,ik->i", x, inv, x))


def _exchange(x: np.ndarray, chosen: list[int], ridge: float) -> list[int]:
    """Fedorov exchange: swap a chosen mode for the candidate that most improves det, until none does."""
    chosen = list(chosen)
    info = ridge * np.eye(x.shape[1]) + x[chosen].T @ x[chosen]
    for _ in range(MAX_EXCHANGE_PASSES):
        improved = False
        for slot, out in enumerate(chosen):
            rest = info - np.outer(x[out], x[out])
            gains = _gains(x, rest)
            gains[[c for c in chosen if c != out]] = -np.inf
            best = int(np.argmax(gains))
            if best != out and gains[best] > gains[out] + 1e-9:
                chosen[slot] = best
                info = rest + np.outer(x[best], x[best])
                improved = True
        if not improved:
            break
    return chosen


def d_optimal(x: np.ndarray, budget: int, ridge: float = RIDGE, restarts: int = RESTARTS) -> list[int]:
    """Indices of ``budget`` distinct rows of ``x`` that (locally) maximise the D-criterion.

    Greedy start plus ``restarts - 1`` seeded random starts, each improved by exchange; the best wins.
    Deterministic for a given ``x``.
    """
    n, p = x.shape
    if not 1 <= budget <= n:
        raise InputError(f"budget must be between 1 and the number of candidate modes ({n}), got {budget}",
                         "budget")
    info = ridge * np.eye(p)
    greedy: list[int] = []
    for _ in range(budget):
        gains = _gains(x, info)
        gains[greedy] = -np.inf
        best = int(np.argmax(gains))
        greedy.append(best)
        info += np.outer(x[best], x[best])
    rng = np.random.default_rng(0)
    starts = [greedy] + [list(rng.choice(n, budget, replace=False)) for _ in range(restarts - 1)]
    designs = [_exchange(x, s, ridge) for s in starts]
    return max(designs, key=lambda d: log_det(x, d, ridge))


def profile_time_s(minibatch_time_s, settle_s: float = SETTLE_S, idle_window_s: float = IDLE_WINDOW_S,
                   warmup: int = WARMUP_MINIBATCHES, minibatches: int = MEASURED_MINIBATCHES) -> np.ndarray:
    """Estimated wall time in s to profile one mode: settle + idle-power window + timed minibatches.

    ``minibatch_time_s`` is the predicted time of one minibatch at that mode (s, array).
    """
    return settle_s + idle_window_s + (warmup + minibatches) * np.asarray(minibatch_time_s, dtype=float)


@lru_cache(maxsize=16)
def _reference_models(device_id: str) -> tuple:
    """Workload models of the bundled reference workloads nearest to ``device_id`` (cached).

    The device's own reference rows when it has some, else those of the device its reference is derived
    from (predictions then go through the cross-device transfer).
    """
    from jetpredict.predictor.model import fit_workload
    from jetpredict.predictor.reference import DERIVE_FROM, read_reference_rows

    for source in (device_id, *[d for d in DERIVE_FROM if d != device_id]):
        rows = read_reference_rows(source)
        if rows is not None:
            return tuple(fit_workload(g.reset_index(drop=True), source) for _, g in rows.groupby("workload"))
    raise InputError(f"no reference sweeps to estimate profiling time on device {device_id!r}", "device")


def minibatch_time_s(device_id: str, modes, model=None) -> np.ndarray:
    """Predicted time of one training minibatch (s) at each mode (a table with the knob columns).

    ``model``: the workload's own model; else the slowest bundled reference workload at each mode.
    """
    knobs = [modes[k].to_numpy(dtype=float) for k in ("cpu_cores", "cpu_mhz", "gpu_mhz", "emc_mhz")]
    models = (model,) if model is not None else _reference_models(device_id)
    per_model = []
    for m in models:
        epoch_s = np.asarray(m.predict_arrays(*knobs, device_id=device_id)["epoch_time_s"], dtype=float)
        per_model.append(epoch_s / _minibatches_per_epoch(m))
    return np.max(per_model, axis=0)


def _minibatches_per_epoch(model) -> float:
    counts = [r.get("minibatches_per_epoch") for r in model.training_rows]
    counts = [float(c) for c in counts if c is not None and np.isfinite(float(c)) and float(c) > 0]
    if not counts:
        raise InputError(f"model of workload {model.workload_id!r} does not record minibatches_per_epoch",
                         "model")
    return float(np.median(counts))
