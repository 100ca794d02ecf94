"""Cross-device transfer: a workload (or a reference) fitted on one Jetson type, moved to another.

Each time term is work per clock, so it moves between devices by a per-term factor. Preferred: the
factors measured on the *reference workloads known on both devices* (their term coefficients on the
target over those on the source), weighted by how much each reference workload resembles the new one
(term shares at the source's fastest preset) and by the term's share in it; dynamic power moves by the
ratio of the two devices' reference power coefficients. Fallback (no shared reference workloads, or a
term no shared workload exercises): device physics -- GPU work scales with the CUDA-core count ratio,
memory traffic with the bus-width ratio, CPU work with the per-clock CPU performance ratio, dynamic power
with the rated module power. Time no clock of the source moves (the ``one`` term) moves as the similar
reference workloads' whole epochs do. Core contention is recomputed with the target's cores; base power comes from
the target's own reference. Predictions made either way are marked ``cross_device`` and carry wider
intervals (``transfer_method`` says which way).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np
import pandas as pd
from jetpredict.models.catalogue import (
    MODE_FIELDS,
    SAME_CLOCK_REL,
    Device,
    ModeArrays,
    load_device,
    nearest_step,
)
from jetpredict.models.errors import InputError
from jetpredict.models.profile_rows import DEFAULT_NUM_WORKERS
from jetpredict.predictor import features as F
from jetpredict.predictor.constants import (
    CPU_PER_CLOCK,
    CROSS_DEVICE_REL_SD,
    DERIVED_BASE_NOISE_FACTOR,
    DERIVED_BASE_NOISE_FLOOR,
    DERIVED_POWER_SD_SHARE,
    FULL_TRUST_SHARE,
    MIN_POWER_TERM_SHARE,
    MIN_TERM_SHARE,
    PHYSICS_FACTOR_SD,
    REFERENCE_TRANSFER_SD_FLOOR,
    SIMILARITY_SCALE,
)
from jetpredict.predictor.model import ContentionVariant, WorkloadModel
from jetpredict.predictor.provenance import least_trusted
from jetpredict.predictor.reference import DeviceReference, summarise_shapes
from jetpredict.predictor.terms import TermFit, restrict_together, row_modes


def cpu_per_clock(device: Device) -> float:
    """Per-clock throughput of ``device``'s CPU core relative to Carmel (``CPU_PER_CLOCK``, matched in the
    catalogue's ``cpu_type``); :class:`InputError` (field ``cpu_type``) for a core it does not list."""
    text = device.specs.cpu_type.lower()
    for key, value in CPU_PER_CLOCK.items():
        if key in text:
            return value
    # Carmel's 1.0 for an unlisted core silently moved CPU work between devices by a ratio nobody chose.
    raise InputError(
        f"device {device.id!r}: cpu_type {device.specs.cpu_type!r} (models/devices/{device.id}.toml) names no "
        f"core of known per-clock speed; it must contain one of {', '.join(CPU_PER_CLOCK)} "
        "(predictor.constants.CPU_PER_CLOCK: add the core there, with its source, relative to Carmel)", "cpu_type")


def time_factors(a: Device, b: Device) -> dict[str, float]:
    """Multipliers of each time term's coefficient from device ``a`` to ``b``."""
    cpu = cpu_per_clock(a) / cpu_per_clock(b)
    gpu = a.specs.cuda_cores / b.specs.cuda_cores
    emc = a.specs.memory_bus_bits / b.specs.memory_bus_bits
    # The traffic-carrying kernels are part compute bound, part memory bound (features.memory_kernels):
    # their time moves between the two ratios; the geometric mean splits the difference in log terms.
    # CPU-side roofline terms likewise sit between the CPU's and the memory's ratio.
    cpu_mem = float(np.sqrt(cpu * emc))
    return {"gpu": gpu, "mem": float(np.sqrt(gpu * emc)), "emc": emc,
            "cpu": cpu, "pipe": cpu, "cmem": cpu_mem, "pmem": cpu_mem, "one": 1.0}


def power_factors(a: Device, b: Device) -> dict[str, float]:
    """Multipliers of each dynamic-power coefficient (W at the top clock) from device ``a`` to ``b``.

    Raw size x clock ratios ignore the process node (Orin's 8 nm GPU is far more efficient per core than
    Xavier's 12 nm one and would double its rated module power), so every domain scales with the ratio
    of rated module power, which embodies both size and efficiency.
    """
    ratio = b.specs.module_power_w / a.specs.module_power_w
    return dict.fromkeys(F.POWER_TERMS, ratio)


def _anchor_x(ref: DeviceReference, workers: float = DEFAULT_NUM_WORKERS) -> np.ndarray:
    feats = F.time_features(ref.anchor_modes, workers, *ref.kappas)
    return np.array([float(feats[t][0]) for t in F.TOTAL_TERMS])


def _shares(coef: np.ndarray, x: np.ndarray) -> np.ndarray:
    part = coef * x
    return part / max(float(part.sum()), 1e-12)


def _profile_signature(rows: tuple[Mapping[str, object], ...],
                       fits_by_component: Mapping[str, np.ndarray] | None, kappas: tuple[float, float]
                       ) -> np.ndarray:
    """What the profiled modes show of a workload: per mode its stall and compute shares of the epoch and
    its epoch time relative to the modes' geometric mean (clock sensitivity); from fits when given."""
    cores, cpu, gpu, emc, workers = (np.array([float(r[k]) for r in rows]) for k in (*MODE_FIELDS, "num_workers"))
    if fits_by_component is None:
        epoch = np.array([float(r["epoch_time_s"]) for r in rows])
        stall = np.array([np.nan if r.get("stall_time_s") is None else float(r["stall_time_s"]) for r in rows])
        compute = np.array([np.nan if r.get("compute_time_s") is None else float(r["compute_time_s"])
                            for r in rows])
    else:
        # The modes as the rows ran them: a row of a preset that gates part of the GPU keeps its share.
        modes = row_modes(pd.DataFrame(list(rows)), ModeArrays(cores, cpu, gpu, emc))
        feats = F.time_features(modes, workers, *kappas)
        parts = {n: F.design(feats, F.COMPONENT_TERMS[n]) @ c for n, c in fits_by_component.items()}
        epoch = sum(parts.values())
        if "total" in parts:
            stall = compute = np.full_like(epoch, np.nan)
        else:
            stall, compute = parts["stall"], parts["compute"]
    if len(epoch) < 2:
        return np.concatenate([stall / epoch, compute / epoch])
    rel = np.log(epoch) - np.mean(np.log(epoch))
    return np.concatenate([stall / epoch, compute / epoch, rel])


def reference_factors(model: WorkloadModel, target: Device, src_ref: DeviceReference | None,
                      dst_ref: DeviceReference | None) -> dict | None:
    """Time and power factors from ``src_ref`` to ``dst_ref`` through their shared reference workloads.

    Each shared workload is weighted by how closely its own sweep reproduces what the new workload's
    profiled rows show (component shares, clock sensitivity). Returns ``time`` and ``power`` factors per
    term, ``level`` (the weighted ratio of the workloads' epoch times at the two devices' fastest presets)
    and ``rel_sd`` (the relative SD the transfer adds: the shared workloads' disagreement, floored);
    None when the references share no workload.
    """
    if src_ref is None or dst_ref is None or not model.training_rows:
        return None
    shared = [w for w in src_ref.workload_shapes if w in dst_ref.workload_shapes
              and w in src_ref.workload_anchor_s and w in dst_ref.workload_anchor_s]
    if not shared:
        return None
    src_dev, dst_dev = model.device, target
    physics = time_factors(src_dev, dst_dev)
    x_src = _anchor_x(src_ref)
    a = {w: F.total_coefs(src_ref.workload_shapes[w]) * src_ref.workload_anchor_s[w] for w in shared}
    b = {w: F.total_coefs(dst_ref.workload_shapes[w]) * dst_ref.workload_anchor_s[w] for w in shared}
    shares = {w: _shares(a[w], x_src) for w in shared}
    seen = _profile_signature(model.training_rows, None, (0.0, 0.0))
    sim = {}
    for w in shared:
        comps = {n: c * src_ref.workload_anchor_s[w] for n, c in src_ref.workload_shapes[w].items()}
        sig = _profile_signature(model.training_rows, comps, src_ref.kappas)
        ok = ~np.isnan(seen) & ~np.isnan(sig)
        dist = float(np.sqrt(np.mean((seen[ok] - sig[ok]) ** 2))) if ok.any() else 0.0
        sim[w] = float(np.exp(-0.5 * (dist / SIMILARITY_SCALE) ** 2))
    total_sim = sum(sim.values())
    if not total_sim > 0.0:
        return None  # the profile is unlike every shared workload (all similarities underflow): physics only
    share_new = sum(sim[w] * shares[w] for w in shared) / total_sim
    logs = np.array([np.log(dst_ref.workload_anchor_s[w] / src_ref.workload_anchor_s[w]) for w in shared])
    wts = np.array([sim[w] for w in shared])
    level_mean = float(np.sum(wts * logs) / wts.sum())
    level_spread = float(np.sqrt(np.sum(wts * (logs - level_mean) ** 2) / wts.sum()))
    factors, var = {}, 0.0
    for i, term in enumerate(F.TOTAL_TERMS):
        if term == "one":
            # Time no clock of the source moves is a real workload's unexplained lump (loading, framework,
            # misfit), not the twin's fixed kernel latency: it moves as the similar workloads' epochs, a
            # guess as rough as physics [E13].
            factors[term] = float(np.exp(level_mean))
            var += (share_new[i] * PHYSICS_FACTOR_SD) ** 2
            continue
        use = [w for w in shared if shares[w][i] >= MIN_TERM_SHARE and b[w][i] > 0]
        weights = np.array([sim[w] * shares[w][i] for w in use])
        trust = min(1.0, float(weights.sum()) / max(total_sim, 1e-12) / FULL_TRUST_SHARE) if use else 0.0
        log_phys = float(np.log(physics[term]))
        if trust == 0.0:
            factors[term], sd = physics[term], PHYSICS_FACTOR_SD
        else:
            logs = np.array([np.log(b[w][i] / a[w][i]) for w in use])
            mean = float(np.sum(weights * logs) / weights.sum())
            spread = float(np.sqrt(np.sum(weights * (logs - mean) ** 2) / weights.sum()))
            factors[term] = float(np.exp(trust * mean + (1.0 - trust) * log_phys))
            sd = trust * spread + (1.0 - trust) * PHYSICS_FACTOR_SD
        var += (share_new[i] * sd) ** 2
    rel_sd = float(max(np.sqrt(var + level_spread ** 2), REFERENCE_TRANSFER_SD_FLOOR))
    pf = power_factors(src_dev, dst_dev)
    src_p, dst_p = np.asarray(src_ref.power_mean, float), np.asarray(dst_ref.power_mean, float)
    # Both power means come from the same shared workloads; a term too small to measure keeps physics.
    measured = (src_p > MIN_POWER_TERM_SHARE * src_p.sum()) & (dst_p > 0)
    power = {t: (float(dst_p[i] / src_p[i]) if measured[i] else pf[t]) for i, t in enumerate(F.POWER_TERMS)}
    return {"time": factors, "power": power, "level": float(np.exp(level_mean)), "rel_sd": rel_sd,
            "weights": {w: sim[w] / total_sim for w in shared}}


def _scale_fits(model: WorkloadModel, factors: Mapping[str, float], restrict: bool = False) -> dict:
    """The time fits and contention variants of ``model`` with each term's coefficient multiplied; with
    ``restrict``, the time fits restricted to non-negative work first (:attr:`TermFit.non_negative`), as the
    fits of the source device are when a transfer scales their terms apart (once: it is no projection).
    A variant's covariance is never read (it adds only its mean to the model-form spread,
    ``WorkloadModel._time``), so the variants are scaled as they are: restricting them cost 40% of a transfer."""
    def scale(fits: Mapping[str, TermFit], restricted: bool) -> dict[str, TermFit]:
        return {name: (fit.non_negative if restricted else fit).scaled(factors) for name, fit in fits.items()}

    return {"time_fits": scale(model.time_fits, restrict),
            "variants": tuple(ContentionVariant(v.kappa_cpu, v.kappa_pipe, scale(v.fits, False))
                              for v in model.variants)}


#: How a cross-device model was moved (``WorkloadModel.transfer_method``): through the sweeps of the workloads
#: both devices share, or through device physics alone.
VIA_REFERENCE_WORKLOADS, VIA_PHYSICS = "reference-workloads", "physics"
TRANSFER_METHODS = (VIA_REFERENCE_WORKLOADS, VIA_PHYSICS)


def transfer_model(model: WorkloadModel, target: Device, target_ref: DeviceReference,
                   src_shared: DeviceReference | None, dst_shared: DeviceReference | None) -> WorkloadModel:
    """``model`` as predicted on ``target``, marked cross-device.

    ``target_ref``: the target's own reference (its base power); ``src_shared`` / ``dst_shared``: the
    sweeps of the workloads both devices share (see ``bundled.shared_reference``), None when missing:
    then the transfer goes through device physics alone.
    """
    # The time and power fits are restricted to non-negative work below (TermFit.non_negative): sampled
    # together here, one run of the sampler's loop instead of one per fit (most of a transfer's cost).
    restrict_together([*model.time_fits.values(), model.power_fit])
    via_refs = reference_factors(model, target, src_shared, dst_shared)
    if via_refs is not None:
        tf, pf, rel_sd = via_refs["time"], via_refs["power"], via_refs["rel_sd"]
        method = VIA_REFERENCE_WORKLOADS
        used = [model.reference_source, target_ref.source, src_shared.source, dst_shared.source]
    else:
        tf, pf = time_factors(model.device, target), power_factors(model.device, target)
        rel_sd, method = CROSS_DEVICE_REL_SD, VIA_PHYSICS
        used = [model.reference_source, target_ref.source]
    moved = replace(
        model, device=target, source_device_id=model.device_id, cross_device=True, cross_device_rel_sd=rel_sd,
        transfer_method=method,
        # Provenance: the least trustworthy of the data the prediction now rests on.
        reference_source=least_trusted(used),
        power_fit=model.power_fit.non_negative.scaled(pf),
        profiled_ranges=ranges_on(model.profiled_ranges, model.device, target),
        base_coef=np.asarray(target_ref.base_coef, dtype=float),
        base_sd_rel=max(model.base_sd_rel, target_ref.base_noise_rel), maxima=F.device_maxima(target),
        # Restricted before scaling: terms scaled apart no longer cancel the Gaussian's negative tails.
        **_scale_fits(model, tf, restrict=True))
    if via_refs is not None:
        moved = _match_level(model, moved, via_refs["level"])
    return moved


def ranges_on(ranges: Mapping[str, tuple[float, float]] | None, source: Device, target: Device
              ) -> dict[str, tuple[float, float]] | None:
    """The profiled knob ranges of ``source`` at the same share of each knob's top on ``target``, each end
    snapped inward to a target step (:func:`_steps_inside`): the target's modes whose knobs sit where no
    profiled mode sat on the source are flagged as extrapolated and widen as they would on the source (the
    transfer's SD comes on top)."""
    if not ranges:
        return None
    src, dst, bounds = F.device_maxima(source), F.device_maxima(target), target.knob_ranges()
    steps = target.knob_steps()
    ends = {k: [float(np.clip(v * dst[k] / src[k], *bounds[k])) for v in ranges[k]] for k in MODE_FIELDS}
    return {k: _steps_inside(steps[k], *ends[k]) for k in MODE_FIELDS}


def _steps_inside(steps: Sequence[float], low: float, high: float) -> tuple[float, float]:
    """The lowest and highest of ``steps`` within ``[low, high]`` (same unit; an end within
    ``SAME_CLOCK_REL`` of a step counts as at it); when none lies within, the one step nearest the range's
    geometric middle, at both ends.

    Snapped to the nearest step instead, an end can move outward past a whole step: Orin Nano's EMC steps
    are 204, 665.6 and 2133 MHz, so a profile at 62-75% of AGX Xavier's EMC became [665.6, 2133] and a mode
    at 31% of the top went unflagged. One step when none lies within (a one-clock profile between two
    steps): flagging every mode would send a fleet plan to the space's far corners that nothing measured.
    """
    slack = 1.0 + SAME_CLOCK_REL
    inside = [s for s in steps if low <= s * slack and s <= high * slack]
    if inside:
        return min(inside), max(inside)
    # Ties go to the higher step (``nearest_step`` takes the first): half a core up, 1.5 -> 2.
    step = nearest_step(sorted(steps, reverse=True), float(np.sqrt(low * high)))
    return step, step


def _match_level(model: WorkloadModel, moved: WorkloadModel, level: float) -> WorkloadModel:
    """Pull the moved model's epoch time at the target's fastest preset toward ``level`` x the source's.

    With few profiled modes the term split is mostly the prior's, so the per-term factors can miss; the
    similar reference workloads' own device ratio is then the better guide. The pull fades as modes
    accumulate (``(modes - 1) / (modes + 1)`` of trust stays with the term split: none for one mode).
    """
    own = moved.anchor_time_s / model.anchor_time_s
    trust = (model.profiled_modes - 1.0) / (model.profiled_modes + 1.0)
    m = float(np.exp((1.0 - trust) * (np.log(level) - np.log(own))))
    return replace(moved, **_scale_fits(moved, dict.fromkeys(F.TOTAL_TERMS, m)))


def derive_reference(ref: DeviceReference, target: Device) -> DeviceReference:
    """A reference for ``target`` (a device without sweeps), moved from ``ref`` (another device's)."""
    source = load_device(ref.device_id)
    tf = time_factors(source, target)
    pf = power_factors(source, target)
    shapes = {w: {name: coef * np.array([tf[t] for t in F.COMPONENT_TERMS[name]]) for name, coef in comps.items()}
              for w, comps in ref.workload_shapes.items()}
    anchor = tuple(float(v) for v in target.maxn.knobs())
    prior, shapes, anchors = summarise_shapes(shapes, ModeArrays(*anchor), ref.kappas)
    scale = np.array([pf[t] for t in F.POWER_TERMS])
    module = target.specs.module_power_w / source.specs.module_power_w
    return DeviceReference(
        device_id=target.id, source=ref.source, workloads=ref.workloads, kappa_cpu=ref.kappa_cpu,
        kappa_pipe=ref.kappa_pipe, shape=prior, workload_shapes=shapes, time_noise_rel=ref.time_noise_rel,
        base_coef=ref.base_coef * module,
        base_noise_rel=max(DERIVED_BASE_NOISE_FACTOR * ref.base_noise_rel, DERIVED_BASE_NOISE_FLOOR),
        power_mean=ref.power_mean * scale,
        power_sd=np.maximum(ref.power_sd * scale, DERIVED_POWER_SD_SHARE * ref.power_mean * scale),
        power_noise_rel=ref.power_noise_rel, maxima=F.device_maxima(target), anchor=anchor,
        derived_from=source.id, training_sha256=ref.training_sha256, workload_anchor_s=anchors)
