"""CLI verbs of the predictor: ``fit``, ``predict``, ``plan``, ``recommend`` (flags as in DESIGN.md)."""

from __future__ import annotations

import argparse

from models.tables import FORMATS


def _not_ready(args: argparse.Namespace) -> int:
    raise NotImplementedError(args.verb)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="choose which power modes to profile")
    p.add_argument("--device", required=True)
    p.add_argument("--candidates", help="CSV of candidate modes (default: the device's full space)")
    p.add_argument("--budget", type=int, required=True, help="number of modes to profile")
    p.add_argument("--format", choices=FORMATS, default="table")
    p.add_argument("--out", help="write to this file instead of standard output")
    p.set_defaults(handler=_not_ready)

    p = sub.add_parser("fit", help="fit a workload model from profile rows")
    p.add_argument("--device", required=True)
    p.add_argument("--profiles", required=True, help="profile-row CSV/JSON of the new workload")
    p.add_argument("--reference", help="your own measured reference sweeps (default: bundled)")
    p.add_argument("--out", required=True, help="model file to write")
    p.set_defaults(handler=_not_ready)

    p = sub.add_parser("predict", help="predict epoch time and energy for power modes")
    p.add_argument("--model", required=True)
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--modes", help="CSV with mode, cpu_cores, cpu_mhz, gpu_mhz, emc_mhz")
    group.add_argument("--all", action="store_true", help="every mode of the device")
    group.add_argument("--presets", action="store_true", help="the nvpmodel presets")
    p.add_argument("--device", help="predict for another device type (cross-device)")
    p.add_argument("--epochs", type=int, help="add time/energy to train this many epochs")
    p.add_argument("--format", choices=FORMATS, default="table")
    p.add_argument("--out", help="write to this file instead of standard output")
    p.set_defaults(handler=_not_ready)

    p = sub.add_parser("recommend", help="best power mode under a power or time constraint")
    p.add_argument("--model", required=True)
    p.add_argument("--objective", choices=("min-time", "min-energy"), required=True)
    p.add_argument("--max-power-w", type=float)
    p.add_argument("--max-epoch-time-s", type=float)
    p.add_argument("--device", help="recommend on another device type (cross-device)")
    p.add_argument("--epochs", type=int)
    p.add_argument("--format", choices=FORMATS, default="table")
    p.set_defaults(handler=_not_ready)
