"""Cross-device transfer: a workload (or a reference) fitted on one Jetson type, moved to another.

Each time term is work per clock, so it moves with the device physics: GPU work scales with the CUDA-core
count ratio, memory traffic with the bus-width ratio, CPU work with the per-clock CPU performance ratio,
and core contention is recomputed with the target's cores. Dynamic power scales with the domain's size x
top clock; base power comes from the target's own reference (or the module power ratio). Predictions
made this way are marked ``cross_device`` and carry wider intervals.
"""

from __future__ import annotations

import copy

import numpy as np

from models.catalogue import load_device
from predictor import features as F

#: Per-clock throughput of one CPU core relative to NVIDIA Carmel, for framework/launch-bound code.
#: Rough figures from published per-GHz integer benchmark ratios (A57 is an older, narrower core;
#: A78AE a wider, newer one); transfer intervals are widened to cover their uncertainty.
CPU_PER_CLOCK = {"carmel": 1.0, "cortex-a57": 0.6, "cortex-a78ae": 1.3}


def cpu_per_clock(device) -> float:
    text = device.specs.cpu_type.lower()
    for key, value in CPU_PER_CLOCK.items():
        if key in text:
            return value
    return 1.0


def time_factors(src_id: str, dst_id: str) -> dict[str, float]:
    """Multipliers of each time term's coefficient from device ``src_id`` to ``dst_id``."""
    a, b = load_device(src_id), load_device(dst_id)
    cpu = cpu_per_clock(a) / cpu_per_clock(b)
    return {"gpu": a.specs.cuda_cores / b.specs.cuda_cores,
            "emc": a.specs.memory_bus_bits / b.specs.memory_bus_bits,
            "cpu": cpu, "pipe": cpu, "one": 1.0}


def power_factors(src_id: str, dst_id: str) -> dict[str, float]:
    """Multipliers of each dynamic-power coefficient (W at the top clock) from ``src_id`` to ``dst_id``.

    Raw size x clock ratios ignore the process node (Orin's 8 nm GPU is far more efficient per core than
    Xavier's 12 nm one and would double its rated module power), so every domain scales with the ratio
    of rated module power, which embodies both size and efficiency.
    """
    a, b = load_device(src_id), load_device(dst_id)
    ratio = b.specs.module_power_w / a.specs.module_power_w
    return dict.fromkeys(F.POWER_TERMS, ratio)


def transfer_model(model, device_id: str):
    """``model`` (a WorkloadModel) as predicted on ``device_id``: cached per target, marked cross-device."""
    cache = model.__dict__.setdefault("_transfer_cache", {})
    if device_id in cache:
        return cache[device_id]
    from predictor.reference import load_reference

    target = load_device(device_id)  # UnknownDeviceError for ids outside the catalogue
    tf = time_factors(model.device_id, device_id)
    pf = power_factors(model.device_id, device_id)
    target_ref = load_reference(device_id)
    moved = copy.copy(model)
    moved.__dict__.pop("_transfer_cache", None)
    moved.__dict__.pop("_anchor_time_s", None)
    moved.device_id = target.id
    moved.source_device_id = model.device_id
    moved.cross_device = True
    moved.time_fits = {name: fit.scaled(tf) for name, fit in model.time_fits.items()}
    moved.alt_time_fits = [(kc, kp, {n: f.scaled(tf) for n, f in fits.items()})
                           for kc, kp, fits in model.alt_time_fits]
    if model.hidden_cpu_ref_mhz:
        # The same CPU work takes a slower-per-clock core a proportionally higher clock to hide.
        moved.hidden_cpu_ref_mhz = model.hidden_cpu_ref_mhz * tf["cpu"]
    moved.power_fit = model.power_fit.scaled(pf)
    moved.base_coef = target_ref.base_coef
    moved.base_sd_rel = max(model.base_sd_rel, target_ref.base_noise_rel)
    moved.maxima = F.device_maxima(target)
    cache[device_id] = moved
    return moved


def derive_reference(ref, device_id: str):
    """A :class:`~predictor.reference.DeviceReference` for a device without sweeps, moved from ``ref``."""
    from predictor.reference import DeviceReference, summarise_shapes

    target = load_device(device_id)
    tf = time_factors(ref.device_id, device_id)
    pf = power_factors(ref.device_id, device_id)
    shapes = {}
    for w, comps in ref.workload_shapes.items():
        shapes[w] = {name: coef * np.array([tf[t] for t in F.COMPONENT_TERMS[name]])
                     for name, coef in comps.items()}
    anchor = target.maxn.knobs()
    shape_mean, shape_sd, shapes = summarise_shapes(shapes, anchor, ref.kappa_cpu, ref.kappa_pipe)
    scale = np.array([pf[t] for t in F.POWER_TERMS])
    module = target.specs.module_power_w / load_device(ref.device_id).specs.module_power_w
    return DeviceReference(
        device_id=target.id, source=ref.source, workloads=ref.workloads, kappa_cpu=ref.kappa_cpu,
        kappa_pipe=ref.kappa_pipe, shape_mean=shape_mean, shape_sd=shape_sd, workload_shapes=shapes,
        time_noise_rel=ref.time_noise_rel, base_coef=ref.base_coef * module,
        base_noise_rel=max(2 * ref.base_noise_rel, 0.15), power_mean=ref.power_mean * scale,
        power_sd=np.maximum(ref.power_sd * scale, 0.3 * ref.power_mean * scale),
        power_noise_rel=ref.power_noise_rel, maxima=F.device_maxima(target),
        anchor=tuple(float(v) for v in anchor), interval_scale=ref.interval_scale,
        derived_from=ref.device_id, training_sha256=ref.training_sha256,
    )
