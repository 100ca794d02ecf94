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
range (>= ``MIN_CLOCK_SHARE`` of the maximum) and >= ``MIN_CORES`` cores online; a knob with a single step
there gets its next step below too (Orin Nano's memory clock: 2133 MHz alone is in its upper half, so 665.6
MHz joins), so that every knob can vary. Over the whole space the
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

Plans that identify: a fit cannot tell what a knob does if the profiled modes never change it, and a
prediction then extrapolates along that knob everywhere. So after the D-optimal search every knob must take
at least two values among the chosen modes whenever the budget (>= 2) and the candidates allow it, and two
of the modes must differ in cores only (same CPU, GPU and memory clocks: a *core contrast*)
(:func:`identifying_exchange`: the best exchanges that restore both, then exchanges that keep them). The
CPU side has three effects to separate -- CPU clock, cores (contention) and the memory clock's effect on
CPU-side work (real AGX Xavier g -> h: stall +38% for EMC 2133 -> 1066 MHz) -- and a small network's
epoch is mostly CPU side (real LeNet-5: e -> f, 8 -> 2 cores at one clock, +69%). The design matrix
therefore carries a CPU-side memory column (contention x 1/f_emc, :data:`PLANNING_EXTRA_TERMS`) beside
the model's terms, and the core contrast keeps cores from moving in lockstep with the CPU clock (before
it, the AGX Xavier, Orin Nano and Nano default 4-mode plans put the fewest cores at the low CPU clock
and the most at the high one). The plan
reports, per knob, the share of the candidate modes outside the profiled range of that knob: predictions
there extrapolate (:attr:`Plan.extrapolated`).

Profiling-time estimate per mode (:func:`profile_time_s`): settle after the switch + idle window for
base power + (warm-up + measured minibatches) x predicted minibatch time. Assumptions: the defaults of
``jetpredict profile`` (10 warm-up, 40 measured minibatches), 5 s settle and 3 s idle window, and no
time for loading the dataset or building the model (paid once, not per mode). The minibatch time is the
workload model's prediction when a model is given, else the slowest bundled reference workload's
(:func:`reference_minibatch_s`), so the estimate errs long for unknown workloads.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd
from jetpredict.models.catalogue import MODE_FIELDS, Device, ModeArrays, load_device
from jetpredict.models.errors import InputError
from jetpredict.models.profile_rows import DEFAULT_NUM_WORKERS
from jetpredict.models.profiling_protocol import IDLE_S, MEASURED_MINIBATCHES, SETTLE_S, WARMUP_MINIBATCHES
from jetpredict.predictor import features as F
from jetpredict.predictor.bundled import DERIVE_FROM, fit_workload, load_reference, predict_modes
from jetpredict.predictor.limits import MIN_CLOCK_SHARE, MIN_CORES
from jetpredict.predictor.model import WorkloadModel
from jetpredict.predictor.reference import read_reference_rows

#: Prior precision added to X'X (in units of one scaled observation); small: the data dominate.
RIDGE = 1e-3
MAX_EXCHANGE_PASSES = 10
RESTARTS = 4  # local search: a few starts avoid most poor local optima
#: Columns the plan's design adds to the model's time terms (see :func:`design_matrix`).
PLANNING_EXTRA_TERMS: tuple[str, ...] = ("cpu_emc",)


def operating_region(device, cpu_cores, cpu_mhz, gpu_mhz, emc_mhz) -> np.ndarray:
    """Mask of the modes (knob arrays) in the default planning region of a catalogue ``device``: every
    clock >= ``MIN_CLOCK_SHARE`` of the device's maximum and >= ``MIN_CORES`` cores, each floor lowered to
    the knob's second-highest value when only one value would pass (so every knob can vary)."""
    maxima = F.device_maxima(device)
    steps = device.knob_steps()
    floors = {"cpu_cores": float(MIN_CORES), **{k: MIN_CLOCK_SHARE * maxima[k] for k in MODE_FIELDS[1:]}}
    ok = np.ones(np.shape(cpu_cores), dtype=bool)
    for knob, values in zip(MODE_FIELDS, (cpu_cores, cpu_mhz, gpu_mhz, emc_mhz), strict=True):
        top = np.unique(steps[knob])[::-1]
        floor = min(floors[knob], float(top[1])) if len(top) > 1 else floors[knob]
        ok &= np.asarray(values, dtype=float) >= floor
    return ok


def design_matrix(modes: ModeArrays, kappa_cpu: float, kappa_pipe: float,
                  num_workers: float = DEFAULT_NUM_WORKERS) -> np.ndarray:
    """(n, 7) design matrix of ``modes``: the epoch-time terms (:data:`predictor.features.TOTAL_TERMS`)
    and :data:`PLANNING_EXTRA_TERMS` (CPU-side work that waits on the memory clock).

    Each term is scaled to 0..1 over the candidates (the D-criterion does not depend on the scale, but
    the ridge prior does); ``kappa_*`` are the device's core-contention constants from its reference.
    """
    feats = dict(F.time_features(modes, num_workers, kappa_cpu, kappa_pipe))
    # CPU-side work that stalls on the shared LPDDR: contention x 1/f_emc (1/GHz, the clock left to the
    # workload as in every model term). Real AGX Xavier rows show it (stall +38% from EMC 2133 to 1066 MHz,
    # g -> h, ResNet-18 and MobileNetV3), so a plan must move the memory clock independently of the CPU
    # clock and the cores, whatever the model's terms.
    emc_inv = 1000.0 / F.effective_emc_mhz(modes.emc_mhz)
    feats["cpu_emc"] = F.contention(modes.cpu_cores, num_workers, kappa_cpu) * emc_inv
    columns = []
    for term in (*F.TOTAL_TERMS, *(t for t in PLANNING_EXTRA_TERMS if t not in F.TOTAL_TERMS)):
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


def log_det_gains(x: np.ndarray, info: np.ndarray) -> np.ndarray:
    """log(1 + x' M^-1 x) for every candidate row of ``x``: the log-det gain of adding it to a design
    whose information matrix is ``info``."""
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
            gains = log_det_gains(x, rest)
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
        gains = log_det_gains(x, info)
        gains[greedy] = -np.inf
        best = int(np.argmax(gains))
        greedy.append(best)
        info += np.outer(x[best], x[best])
    rng = np.random.default_rng(0)
    starts = [greedy] + [list(rng.choice(n, budget, replace=False)) for _ in range(restarts - 1)]
    designs = [_exchange(x, s, ridge) for s in starts]
    return max(designs, key=lambda d: log_det(x, d, ridge))


def varying_knobs(knobs: np.ndarray, chosen) -> np.ndarray:
    """Per knob (columns of ``knobs``, MODE_FIELDS order), whether the ``chosen`` rows take >= 2 values."""
    sub = knobs[np.asarray(chosen, dtype=int)]
    return np.ptp(sub, axis=0) > 0


def core_contrasts(knobs: np.ndarray, chosen) -> bool:
    """Whether two of the ``chosen`` rows differ in cores only (same CPU, GPU and memory clocks)."""
    sub = knobs[np.asarray(chosen, dtype=int)]
    for i in range(len(sub)):
        same = np.all(sub[i + 1:, 1:] == sub[i, 1:], axis=1) & (sub[i + 1:, 0] != sub[i, 0])
        if same.any():
            return True
    return False


def _contrast_partners(knobs: np.ndarray, rest: list[int]) -> np.ndarray:
    """Candidates that form a core contrast with some row of ``rest`` (same clocks, other cores)."""
    ok = np.zeros(len(knobs), dtype=bool)
    for r in rest:
        ok |= np.all(knobs[:, 1:] == knobs[r, 1:], axis=1) & (knobs[:, 0] != knobs[r, 0])
    return ok


def contrast_possible(knobs: np.ndarray, budget: int) -> bool:
    """Whether the candidates hold two modes that differ in cores only, and the budget has room (>= 2)."""
    if budget < 2:
        return False
    _, inverse = np.unique(knobs[:, 1:], axis=0, return_inverse=True)
    inverse = np.ravel(inverse)
    cores_per_setting = [np.unique(knobs[inverse == g, 0]).size for g in range(inverse.max() + 1)]
    return max(cores_per_setting) >= 2


def identifying_exchange(x: np.ndarray, knobs: np.ndarray, chosen: list[int], ridge: float = RIDGE,
                         core_contrast: bool = False) -> list[int]:
    """The design ``chosen`` changed so that every knob the candidates vary takes >= 2 values and, with
    ``core_contrast`` (when the candidates and budget allow it), two modes differ in cores only.

    Each step makes the exchange (one chosen mode for one candidate) that leaves the fewest unmet rules,
    then the highest D-criterion; once every rule is met, only exchanges that keep them and improve det,
    until none does. ``knobs``: (n, 4) values in MODE_FIELDS order.
    """
    chosen = list(chosen)
    wanted = np.ptp(knobs, axis=0) > 0
    core_contrast = core_contrast and contrast_possible(knobs, len(chosen))
    if len(chosen) < 2 or not (wanted.any() or core_contrast):
        return chosen
    p = x.shape[1]

    def unmet(design: list[int]) -> int:
        missing = int(np.sum(wanted & ~varying_knobs(knobs, design)))
        return missing + int(core_contrast and not core_contrasts(knobs, design))

    for _ in range(MAX_EXCHANGE_PASSES * len(chosen)):
        now = (unmet(chosen), log_det(x, chosen, ridge))
        best: tuple[int, float, int, int] | None = None
        for slot in range(len(chosen)):
            rest = chosen[:slot] + chosen[slot + 1:]
            info = ridge * np.eye(p) + x[rest].T @ x[rest]
            _, base = np.linalg.slogdet(info)
            value = base + log_det_gains(x, info)
            # Rules the design would miss with each candidate in the slot: a knob stays constant when
            # neither the rest nor the candidate varies it; the contrast is missing when neither the rest
            # holds one nor the candidate completes one.
            varies = varying_knobs(knobs, rest)
            missing = np.zeros(len(x), dtype=int)
            for k in np.flatnonzero(wanted & ~varies):
                missing += knobs[:, k] == knobs[rest[0], k]
            if core_contrast and not core_contrasts(knobs, rest):
                missing += ~_contrast_partners(knobs, rest)
            missing[rest] = np.iinfo(int).max
            fewest = missing.min()
            cand = int(np.argmax(np.where(missing == fewest, value, -np.inf)))
            if best is None or (fewest, -value[cand]) < (best[0], -best[1]):
                best = (int(fewest), float(value[cand]), slot, cand)
        if best is None or (best[0], -best[1]) >= (now[0], -now[1] - 1e-9):
            return chosen
        chosen[best[2]] = best[3]
    return chosen


def profile_time_s(minibatch_time_s, settle_s: float = SETTLE_S, idle_window_s: float = IDLE_S,
                   warmup: int = WARMUP_MINIBATCHES, minibatches: int = MEASURED_MINIBATCHES) -> np.ndarray:
    """Estimated wall time in s to profile one mode: settle + idle-power window + timed minibatches.

    ``minibatch_time_s`` is the predicted time of one minibatch at that mode (s, array).
    """
    return settle_s + idle_window_s + (warmup + minibatches) * np.asarray(minibatch_time_s, dtype=float)


@lru_cache(maxsize=16)
def _reference_models(device_id: str) -> tuple[WorkloadModel, ...]:
    """Workload models of the bundled reference workloads nearest to ``device_id`` (cached).

    The device's own reference rows when it has some, else those of the device its reference is derived
    from (predictions then go through the cross-device transfer).
    """
    for source in (device_id, *[d for d in DERIVE_FROM if d != device_id]):
        rows = read_reference_rows(source)
        if rows is not None:
            return tuple(fit_workload(g.reset_index(drop=True), load_device(source)) for _, g in rows.groupby("workload"))
    raise InputError(f"no reference sweeps to estimate profiling time on device {device_id!r}", "device")


def estimating_models(device: Device, model: WorkloadModel | None = None) -> tuple[WorkloadModel, ...]:
    """The models :func:`minibatch_time_s` predicts with: ``model``, else the bundled reference workloads."""
    return (model,) if model is not None else _reference_models(device.id)


def minibatch_time_s(device: Device, modes: ModeArrays, model: WorkloadModel | None = None) -> np.ndarray:
    """Predicted time of one training minibatch (s) at each of ``modes`` on ``device``.

    ``model``: the workload's own model; else the slowest bundled reference workload at each mode.
    """
    models = estimating_models(device, model)
    per_model = [predict_modes(m, modes, device).epoch_time_s / _minibatches_per_epoch(m) for m in models]
    return np.max(per_model, axis=0)


def _minibatches_per_epoch(model: WorkloadModel) -> float:
    counts = [r.get("minibatches_per_epoch") for r in model.training_rows]
    counts = [float(c) for c in counts if c is not None and np.isfinite(float(c)) and float(c) > 0]
    if not counts:
        raise InputError(f"model of workload {model.workload_id!r} does not record minibatches_per_epoch",
                         "model")
    return float(np.median(counts))


@dataclass(frozen=True)
class Plan:
    """Modes to profile and what the plan leaves to extrapolation.

    ``modes``: the chosen modes (``mode``, the knobs, ``est_profile_s`` in s). ``candidates``: how many
    modes the plan chose from (the region it should cover). ``extrapolated``: per knob, the share of those
    candidates outside the profiled range of that knob (only knobs with a share > 0); ``constant``: knobs
    the chosen modes do not vary (their effect is the reference's guess). ``estimated_by``: the models
    that predicted ``est_profile_s`` (:func:`estimating_models`), whose provenance the estimate carries.
    """

    modes: pd.DataFrame
    candidates: int
    extrapolated: dict[str, float]
    constant: tuple[str, ...]
    estimated_by: tuple[WorkloadModel, ...]

    @property
    def total_profile_s(self) -> float:
        return float(self.modes["est_profile_s"].sum())

    def summary(self) -> str:
        """One paragraph for people: time to profile, constant knobs, extrapolated share per knob."""
        text = (f"profile these {len(self.modes)} modes: about {self.total_profile_s / 60:.1f} min in all "
                "(settle + idle window + warm-up and measured minibatches per mode)")
        if self.constant:
            text += f"; the plan cannot vary {', '.join(self.constant)} (budget or candidates too small)"
        if self.extrapolated:
            parts = ", ".join(f"{k} {v:.0%}" for k, v in self.extrapolated.items())
            text += (f"; of the {self.candidates} candidate modes these knobs lie outside the profiled range "
                     f"(predictions there extrapolate): {parts}")
        else:
            text += f"; every knob of the {self.candidates} candidate modes lies inside the profiled ranges"
        return text


def plan(device: Device, candidates: pd.DataFrame, budget: int, model: WorkloadModel | None = None) -> Plan:
    """The ``budget`` modes of ``candidates`` (a checked mode table) to profile on ``device``: D-optimal,
    every knob varied when possible, with the profiling time of each (``model``'s or the references')."""
    ref = load_reference(device)
    workers = model.num_workers if model is not None else DEFAULT_NUM_WORKERS
    # Most cores first: with more cores than runnable threads the features (and the D-criterion) tie, and
    # the search keeps the first of equal candidates, so a plan profiles 8 cores rather than 5 -- the
    # profiled range then covers the many-core modes people run instead of leaving them extrapolated.
    candidates = candidates.iloc[np.argsort(-candidates["cpu_cores"].to_numpy(dtype=float), kind="stable")]
    candidates = candidates.reset_index(drop=True)
    modes = device.labelled_modes(candidates)  # a gated preset runs part of the GPU: its features say so
    knobs = np.column_stack(modes.arrays())
    x = design_matrix(modes, ref.kappa_cpu, ref.kappa_pipe, workers)
    # A core contrast at one clock setting: the only way to tell CPU work under contention (cores) from
    # CPU work per clock (cpu_mhz) for a launch-bound workload whose CPU clock and cores otherwise move
    # together in a 4-mode design (real LeNet-5, AGX Xavier e vs f: 8 -> 2 cores, +69% epoch time).
    chosen = identifying_exchange(x, knobs, d_optimal(x, budget), RIDGE, core_contrast=True)
    picked = candidates.iloc[chosen].reset_index(drop=True)
    picked["est_profile_s"] = profile_time_s(minibatch_time_s(device, modes.take(np.asarray(chosen)), model))
    lo, hi = knobs[chosen].min(axis=0), knobs[chosen].max(axis=0)
    outside = (knobs < lo) | (knobs > hi)
    extrapolated = {k: float(outside[:, i].mean()) for i, k in enumerate(MODE_FIELDS) if outside[:, i].any()}
    wanted = np.ptp(knobs, axis=0) > 0
    varied = varying_knobs(knobs, chosen)
    constant = tuple(k for i, k in enumerate(MODE_FIELDS) if wanted[i] and not varied[i])
    return Plan(picked, len(candidates), extrapolated, constant, estimating_models(device, model))
