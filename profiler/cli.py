"""CLI verb ``profile`` (flags as in DESIGN.md). torch is imported only when the verb runs.

Output: ``--out FILE.csv`` writes the profile rows (CSV, one row appended per finished mode) and the raw
sidecar ``FILE.csv.json``; ``--out FILE.json`` writes one JSON document with ``rows`` and the raw
per-minibatch timings and power samples. Progress goes to standard error.
"""

from __future__ import annotations

import argparse
import sys


def _profile(args: argparse.Namespace) -> int:
    from jetpredict.profiler.campaign import CampaignConfig, output_paths, run_campaign

    cfg = CampaignConfig(
        device=args.device, workload=args.workload, out=args.out, modes=args.modes,
        batch_size=args.batch_size, workers=args.workers, warmup=args.warmup,
        minibatches=args.minibatches, settle_s=args.settle_s, data=args.data, upload=args.upload,
        progress=not args.no_progress)
    rows = run_campaign(cfg)
    csv_path, json_path = output_paths(args.out)
    written = ", ".join(str(p) for p in (csv_path, json_path) if p is not None)
    print(f"profiled {len(rows)} mode(s) of {args.workload} on {args.device}: {written}", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "profile", help="profile a workload on a few power modes",
        description="Train a workload for a few minibatches on each power mode and write profile rows. "
        "--out FILE.csv writes rows as CSV plus the raw sidecar FILE.csv.json; --out FILE.json writes "
        "one JSON document (rows + per-minibatch times and power samples).")
    p.add_argument("--device", required=True, help="host | jetson | sim:DEVICE")
    p.add_argument("--workload", required=True,
                   help="lenet5-mnist | resnet18-cifar10 | mobilenetv3-small-gld23k | vgg11-cifar10 | "
                   "torchvision:NAME | module.path:factory")
    p.add_argument("--modes", help="presets | FILE | comma-separated labels (Jetson and sim; "
                   "default presets; host profiles one mode with all cores)")
    p.add_argument("--batch-size", type=int, help="minibatch size (default 16)")
    p.add_argument("--workers", type=int, help="DataLoader workers (default 4)")
    p.add_argument("--warmup", type=int, default=10, help="warm-up minibatches per mode (default 10)")
    p.add_argument("--minibatches", type=int, default=40, help="measured minibatches per mode (default 40)")
    p.add_argument("--settle-s", type=float, help="wait after each mode switch, s (default 5; host 0)")
    p.add_argument("--data", help="ImageFolder directory (default: synthetic tensors)")
    p.add_argument("--upload", help="service URL to upload the rows to (key in $JETPREDICT_API_KEY)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on standard error")
    p.add_argument("--out", required=True, help="FILE.csv (+ FILE.csv.json) or FILE.json")
    p.set_defaults(handler=_profile)
