"""CLI verb ``profile`` (flags as in DESIGN.md). torch is imported only when the verb runs."""

from __future__ import annotations

import argparse


def _not_ready(args: argparse.Namespace) -> int:
    raise NotImplementedError(args.verb)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profile", help="profile a workload on a few power modes")
    p.add_argument("--device", required=True, help="host | jetson | sim:DEVICE")
    p.add_argument("--workload", required=True)
    p.add_argument("--modes", help="presets | FILE | comma-separated labels")
    p.add_argument("--batch-size", type=int)
    p.add_argument("--workers", type=int)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--minibatches", type=int, default=40)
    p.add_argument("--settle-s", type=float)
    p.add_argument("--data", help="ImageFolder directory (default: synthetic tensors)")
    p.add_argument("--upload", help="service URL to upload the rows to")
    p.add_argument("--out", required=True)
    p.set_defaults(handler=_not_ready)
