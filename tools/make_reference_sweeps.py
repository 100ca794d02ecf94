"""Simulated reference sweeps: every built-in workload on a well-spread sample of each device's modes.

    python -m tools.make_reference_sweeps [--devices ...] [--modes 320] [--seed 0]

Writes ``models/reference/<device>-simulated.csv`` (profile rows, ``source=simulated``,
``power_meter=sim:<device>``): the nvpmodel presets plus a space-filling sample of the custom modes
(a Latin hypercube over the step indices of cores, CPU, GPU and EMC, snapped to real steps), each
profiled by the digital twin through the same path as ``jetpredict profile --device sim:DEVICE``:
simulated controller, meter and backend, then :func:`profiler.runner.aggregate_row`. Devices with
published sweeps keep those as their primary reference; these files give every device a prior,
labelled as simulated.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from jetpredict.models.catalogue import Device, PowerMode, device_ids, load_device, mode_label
from jetpredict.models.profile_files import write_profile_csv
from jetpredict.models.profile_rows import COLUMNS, validate_records
from jetpredict.predictor.reference import REFERENCE_DIR
from jetpredict.profiler.builtin_workloads import BUILTIN_WORKLOADS

DEFAULT_MODES = 320
#: Measured minibatches per mode: meant for LeNet's ~0.7 s window to hold ~70 meter samples at the
#: sampler's 100 Hz ceiling (20 gave 2-14 samples of a power that swings between compute and stall).
#: The warm-up is the protocol's (RunSettings' default): the window's rate comes from its fastest minibatch.
MINIBATCHES = 100
#: Columns kept beyond the profile-row fields (the per-minibatch statistics would make the files too large).
EXTRA_COLUMNS = ("power_meter", "kernel_count", "flops_train", "cpu_s_per_sample")
SIGNIFICANT = 5


def spread_modes(device: Device, n: int, seed: int = 0) -> list[PowerMode]:
    """The presets plus up to ``n`` distinct custom modes spread over the space (Latin hypercube on the
    step indices of each knob, so every knob's range is covered evenly)."""
    lo, hi = device.cpu_cores_range
    axes = (tuple(range(lo, hi + 1)), device.cpu_steps_mhz, device.gpu_steps_mhz, device.emc_steps_mhz)
    rng = np.random.default_rng(seed)
    seen: set[tuple[float, ...]] = set()
    modes: list[PowerMode] = []
    for p in device.presets:
        seen.add(p.knobs())
        modes.append(p)
    target = min(n, len(device.modes()))
    for _ in range(50):  # redraw until enough distinct modes (duplicates appear on short axes)
        if len(modes) - len(device.presets) >= target:
            break
        cols = []
        for axis in axes:
            strata = (rng.permutation(target) + rng.random(target)) / target
            cols.append([axis[min(int(u * len(axis)), len(axis) - 1)] for u in strata])
        for knobs in zip(*cols, strict=True):
            key = (int(knobs[0]), float(knobs[1]), float(knobs[2]), float(knobs[3]))
            if key in seen or len(modes) - len(device.presets) >= target:
                continue
            seen.add(key)
            modes.append(PowerMode(mode_label(*key), *key))
    return modes


def sweep_device(device_id: str, n_modes: int = DEFAULT_MODES, seed: int = 0,
                 workloads: tuple[str, ...] | None = None) -> pd.DataFrame:
    """Profile ``workloads`` (default every built-in one, :data:`profiler.builtin_workloads.BUILTIN_WORKLOADS`) on the
    device's spread modes with the twin; returns validated rows."""
    from jetpredict.profiler import runner, sim
    workloads = tuple(BUILTIN_WORKLOADS) if workloads is None else workloads

    device = load_device(device_id)
    modes = spread_modes(device, n_modes, seed)
    records = []
    settings = runner.RunSettings(minibatches=MINIBATCHES)
    for k, workload in enumerate(workloads):
        rig = sim.simulated_rig(device, workload, seed=seed + k)
        controller, backend = rig.controller, rig.backend
        cx = backend.complexity().as_dict()
        with controller:
            for mode in modes:
                controller.apply(mode)
                run = rig.runner.run_mode(mode, settings)
                row = runner.aggregate_row(
                    run.measured, device=device.id, workload=backend.workload,
                    mode=controller.read_back().as_dict() | {"mode": mode.mode},
                    batch_size=backend.batch_size, num_workers=backend.num_workers,
                    minibatches_per_epoch=backend.minibatches_per_epoch, warmup=settings.warmup, trace=run.trace,
                    power_meter=run.power_meter, base_power_w=run.base_power_w, complexity=cx,
                    cpu_s_per_sample=run.cpu_s_per_sample, accelerator=backend.accelerator(),
                    source="simulated")
                records.append({c: row.get(c) for c in (*COLUMNS, *EXTRA_COLUMNS)})
    df = validate_records(records, what=f"simulated sweep of {device_id}")
    for c in df.columns:
        if df[c].dtype.kind == "f" and c not in ("cpu_mhz", "gpu_mhz", "emc_mhz"):
            df[c] = df[c].map(lambda v: float(f"{v:.{SIGNIFICANT}g}") if pd.notna(v) else v)
    for c in ("cpu_cores", "num_workers", "batch_size", "minibatches_per_epoch"):
        df[c] = df[c].round().astype("Int64")
    return df


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--devices", nargs="*", default=device_ids())
    parser.add_argument("--modes", type=int, default=DEFAULT_MODES, help="custom modes per device")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out-dir", default=str(REFERENCE_DIR))
    args = parser.parse_args(argv)
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for device_id in args.devices:
        df = sweep_device(device_id, args.modes, args.seed)
        path = out_dir / f"{device_id}-simulated.csv"
        write_profile_csv(df, path)
        print(f"{path}: {len(df)} rows, {df['mode'].nunique()} modes, {path.stat().st_size / 1024:.0f} KB",
              file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
