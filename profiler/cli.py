"""CLI verb ``profile`` (flags as in the README's command-line tour). torch is imported only when the verb runs.

Output: ``--out FILE.csv`` writes the profile rows (CSV, one row appended per finished mode) and the raw
sidecar ``FILE.csv.json``; ``--out FILE.json`` writes one JSON document with ``rows`` and the raw
per-minibatch timings and power samples. Progress goes to standard error.
"""

from __future__ import annotations

import argparse
import sys


def _profile(args: argparse.Namespace) -> int:
    from jetpredict.profiler.campaign import CampaignConfig, output_paths, run_campaign
    from jetpredict.profiler.powermode.state import unfinished_run_warning

    warning = unfinished_run_warning()
    if warning:
        print(f"jetpredict profile: warning: {warning}", file=sys.stderr)

    if args.upload:
        from jetpredict.profiler.upload import check_service

        check_service(args.upload)  # a wrong URL or key fails now, not after the campaign
    cfg = CampaignConfig(
        device=args.device, workload=args.workload, out=args.out, modes=args.modes,
        batch_size=args.batch_size, workers=args.workers, warmup=args.warmup,
        minibatches=args.minibatches, settle_s=args.settle_s, data=args.data, upload=args.upload,
        progress=not args.no_progress)
    try:
        rows = run_campaign(cfg)
    except ModuleNotFoundError as exc:
        if exc.name != "torch" and not str(exc.name).startswith("torch."):
            raise
        raise RuntimeError(f"--device {args.device} trains the network with PyTorch, which is not installed: "
                           "pip install 'jetpredict[profiler]' (on a machine without a GPU, a CPU build of "
                           "torch first, see the README); --device sim:DEVICE runs the built-in workloads "
                           "without it") from None
    csv_path, json_path = output_paths(args.out)
    written = ", ".join(str(p) for p in (csv_path, json_path) if p is not None)
    print(f"profiled {len(rows)} mode(s) of {args.workload} on {args.device}: {written}", file=sys.stderr)
    return 0


def _restore(args: argparse.Namespace) -> int:
    """Exit 0 when restored or nothing to do; 1 when the restore failed or its run is still alive."""
    from jetpredict.profiler.powermode.privileged import PrivilegedCommandError
    from jetpredict.profiler.powermode.recovery import RunStillActive, restore_unfinished
    from jetpredict.profiler.powermode.state import StateFileError

    try:
        result = restore_unfinished(force=args.force)
    except (RunStillActive, StateFileError, PrivilegedCommandError) as err:
        print(f"jetpredict restore: {err}", file=sys.stderr)
        return 1
    print(f"jetpredict restore: {result.message}", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser(
        "restore", help="put back the power mode an interrupted run changed",
        description="After a profiling run was killed (SIGKILL, OOM, crash, reboot), restore the original "
        "power mode recorded in its state file ($JETPREDICT_STATE_DIR, /var/lib/jetpredict as root, else "
        "$XDG_STATE_HOME/jetpredict) and remove that file. Says so when there is nothing to restore.")
    r.add_argument("--force", action="store_true",
                   help="restore even though the run that saved the state still seems alive")
    r.set_defaults(handler=_restore)
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
    p.add_argument("--workers", type=int,
                   help="DataLoader workers (default min(4, CPU cores); sim: min(4, the device's cores))")
    p.add_argument("--warmup", type=int, default=10, help="warm-up minibatches per mode (default 10)")
    p.add_argument("--minibatches", type=int, default=40, help="measured minibatches per mode (default 40)")
    p.add_argument("--settle-s", type=float, help="wait after each mode switch, s (default 5; host 0)")
    p.add_argument("--data", help="ImageFolder directory (default: synthetic tensors)")
    p.add_argument("--upload", help="service URL to upload the rows to (POST /v1/profiles); the key comes from "
                   "$JETPREDICT_API_KEY, else the first of $JETPREDICT_API_KEYS; checked before profiling")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on standard error")
    p.add_argument("--out", required=True, help="FILE.csv (+ FILE.csv.json) or FILE.json")
    p.set_defaults(handler=_profile)

    from jetpredict.profiler.apply import register as register_apply

    register_apply(sub)  # `apply`: set a mode and leave it set (restored by `restore`)
