"""CLI verb ``profile`` (flags as in the README's command-line tour). torch is imported only when the verb runs.

Output: ``--out FILE.csv`` writes the profile rows (CSV, one row appended per finished mode) and the raw
sidecar ``FILE.csv.json``; ``--out FILE.json`` writes one JSON document with ``rows`` and the raw
per-minibatch timings and power samples. Progress goes to standard error.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jetpredict.models.errors import say, say_above_bars

#: ``profile --adaptive``: (catalogue id, start modes or None, **flags) -> a ModeChooser
#: (:mod:`jetpredict.profiler.campaign`). The command line passes the predictor's; the profiler does not
#: import the predictor.
AdaptiveFactory = Callable[..., Any]
#: Flags of ``profile --adaptive`` passed to the chooser when given (flag dest -> chooser keyword).
ADAPTIVE_OPTIONS = ("objective", "max_power_w", "max_epoch_time_s", "confidence", "target_width")


@dataclass(frozen=True)
class AdaptiveRules:
    """What the chooser of ``profile --adaptive`` takes and when it stops, for the flags' choices and help:
    the command line passes the predictor's, which the profiler does not import (without them the help
    names none, and the chooser still refuses a bad ``--objective`` before profiling)."""

    objectives: tuple[str, ...]
    default_objective: str
    #: Share of the objective by which no unprofiled mode may be expected to beat the pick at the stop.
    max_rival_gain: float
    #: Level of the intervals when --confidence is not given (None: the help names no number).
    default_confidence: float | None = None
    #: --target-width when not given (None: the help names no number).
    default_target_width: float | None = None


def _adaptive_flags(a: argparse._ArgumentGroup, rules: AdaptiveRules | None) -> None:
    """``--target-width`` and ``--objective``, their help from ``rules`` where given."""
    # argparse %-formats help: a literal percent sign is written %%.
    rival = (f"{rules.max_rival_gain * 100:g}%% of the objective" if rules else "a small share of the "
             "objective (the predictor's)")
    width = (f"{rules.default_target_width:g}" if rules and rules.default_target_width else
             "the predictor's")
    a.add_argument("--target-width", type=float, help="the loop stops once three things hold: the recommended "
                   "mode's time interval is narrower than this share of its point (below 1: 0.12, not 12), "
                   "(high - low) / point "
                   f"(default {width}); no unprofiled mode is expected to beat it by more than {rival}; "
                   "and the recommended mode itself is profiled (it is measured to confirm the stop if it was "
                   "not). It stops too at --budget modes, once every candidate is profiled, when no mode "
                   "can meet the caps, or once no unprofiled mode may beat the measured pick at all")
    if rules is None:
        a.add_argument("--objective", help="the decision to narrow, one of the predictor's objectives "
                       "(default: the predictor's)")
    else:
        a.add_argument("--objective", choices=rules.objectives, help="the decision to narrow (default "
                       f"{rules.default_objective})")


def _adaptive(args: argparse.Namespace, factory: AdaptiveFactory | None):
    """The chooser factory of an adaptive campaign, or None (InputError for flags that need --adaptive)."""
    from jetpredict.models.errors import InputError, cli_flag, flag_named
    from jetpredict.models.numbers import checked_share

    given = [o for o in (*ADAPTIVE_OPTIONS, "budget", "candidates") if getattr(args, o) is not None]
    if not args.adaptive:
        if given:
            raise InputError(f"{cli_flag(given[0])} needs --adaptive", given[0])
        return None
    if factory is None:
        raise InputError("--adaptive needs the predictor (this command line was built without it)", "adaptive")
    if args.budget is None:
        raise InputError("--adaptive needs --budget N: the most modes to profile (a whole number >= 1)", "budget")
    # The chooser checks the budget's top (the plan's check); a budget below 1 and the width's share are
    # refused here too, before torch loads and the network is built.
    if args.budget < 1:
        raise InputError(f"{cli_flag('budget')} (modes to profile) must be a whole number >= 1, got {args.budget}",
                         "budget")
    if args.target_width is not None:
        try:
            checked_share(args.target_width, "target_width")  # the chooser's rule
        except InputError as err:
            raise flag_named(err, ADAPTIVE_OPTIONS) from None
    if args.device.strip().lower() == "host":
        raise InputError("--adaptive chooses Jetson power modes: use --device jetson or sim:DEVICE", "device")
    options = {o: getattr(args, o) for o in ADAPTIVE_OPTIONS if getattr(args, o) is not None}
    from jetpredict.models.profile_files import read_mode_table, rows_named_by_line

    if args.candidates is not None:
        options["candidates"] = read_mode_table(args.candidates, "candidates")

    def log(line: str) -> None:
        say_above_bars(f"adaptive: {line}")  # the sidecar's ``adaptive`` keeps every line (the rounds' ``line``)

    def make(device_id: str, start):
        try:
            with rows_named_by_line("candidates", args.candidates, options.get("candidates")):
                return factory(device_id, start, budget=args.budget, log=log, **options)
        except InputError as err:
            # The chooser's checks are the service's and name its JSON fields; here they are flags.
            raise flag_named(err, ADAPTIVE_OPTIONS) from None

    return make


def _profile(args: argparse.Namespace, adaptive: AdaptiveFactory | None = None) -> int:
    from jetpredict.models.errors import InputError
    from jetpredict.models.profile_files import check_out_spares_inputs, output_paths
    from jetpredict.profiler.campaign import CampaignConfig, run_campaign
    from jetpredict.profiler.powermode.state import unfinished_run_warning

    # The rows and their sidecar would replace a --modes or --candidates file read before the first mode.
    check_out_spares_inputs(args.out, {"modes": args.modes, "candidates": args.candidates}, ("", ".json"))
    chooser = _adaptive(args, adaptive)
    # Host and twin runs switch no mode: told of a changed one, not promised its restore.
    warning = unfinished_run_warning(switches=args.device == "jetson")
    if warning:
        say(f"jetpredict profile: warning: {warning}")

    if args.upload is not None:
        from jetpredict.profiler.upload import check_service

        if not args.upload.strip():  # `--upload "$URL"` with URL unset: no upload, and no word of it
            raise InputError("--upload is empty: give the service's URL (e.g. http://127.0.0.1:8080), or leave "
                             "the flag out", "upload")
        check_service(args.upload)  # a wrong URL or key fails now, not after the campaign
    cfg = CampaignConfig(
        device=args.device, workload=args.workload, out=args.out, modes=args.modes,
        batch_size=args.batch_size, workers=args.workers, warmup=args.warmup,
        minibatches=args.minibatches, settle_s=args.settle_s, data=args.data, upload=args.upload,
        progress=not args.no_progress, adaptive=chooser, candidates=args.candidates,
        lock_clocks=not args.no_lock_clocks)
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
    say(f"profiled {len(rows)} mode(s) of {args.workload} on {args.device}: {written}")
    return 0


def _restore(args: argparse.Namespace) -> int:
    """Exit 0 when restored or nothing to do; 1 when the restore failed or its run is still alive."""
    from jetpredict.profiler.powermode.privileged import PrivilegedCommandError
    from jetpredict.profiler.powermode.recovery import RunStillActive, restore_unfinished
    from jetpredict.profiler.powermode.state import StateFileError

    try:
        result = restore_unfinished(force=args.force)
    except (RunStillActive, StateFileError, PrivilegedCommandError) as err:
        say(f"jetpredict restore: {err}")
        return 1
    say(f"jetpredict restore: {result.message}")
    return 0


def register(sub: argparse._SubParsersAction, adaptive: AdaptiveFactory | None = None,
             rules: AdaptiveRules | None = None) -> None:
    """Register ``restore``, ``profile`` and ``apply``; ``adaptive`` builds the chooser of
    ``profile --adaptive`` (without it that flag is refused), ``rules`` say what it takes and when it stops."""
    r = sub.add_parser(
        "restore", help="put back the power mode an interrupted run changed",
        description="After a profiling run was killed (SIGKILL, OOM, crash, reboot), restore the original "
        "power mode recorded in its state file ($JETPREDICT_STATE_DIR, /var/lib/jetpredict as root, else "
        "$XDG_STATE_HOME/jetpredict) and remove that file. Says so when there is nothing to restore.")
    r.add_argument("--force", action="store_true",
                   help="restore even though the run that saved the state still seems alive")
    r.set_defaults(handler=_restore)
    from jetpredict.models.profiling_protocol import (
        BATCH_SIZE,
        MAX_MINIBATCHES_PER_MODE,
        MAX_WAIT_S,
        MEASURED_MINIBATCHES,
        SETTLE_S,
        WARMUP_MINIBATCHES,
    )
    from jetpredict.models.reader_limits import MAX_FILE_BYTES
    from jetpredict.profiler.builtin_workloads import BUILTIN_WORKLOADS, DEFAULT_SYNTHETIC_SAMPLES

    samples = DEFAULT_SYNTHETIC_SAMPLES  # a classifier's epoch without dataset_size
    synthetic_mpe = -(-samples // BATCH_SIZE)  # ceil: its minibatches at the default batch
    p = sub.add_parser(
        "profile", help="profile a workload on a few power modes",
        description="Train a workload for a few minibatches on each power mode and write profile rows. "
        "--out FILE.csv writes rows as CSV plus the raw sidecar FILE.csv.json (any name but .json does: "
        "p.txt is CSV beside p.txt.json, data for fit, never a table); --out FILE.json writes one JSON document "
        "(rows + per-minibatch times and power samples).",
        epilog="--workload module.path:factory: factory() takes no arguments and returns either (model, "
        "input_shape, num_classes) -- a torch.nn.Module, one sample's shape such as (3, 32, 32), the class count -- "
        "to classify synthetic (or --data) images, or a mapping with 'model' and input_shape + num_classes, or "
        "'dataset' (a torch Dataset of (input, target)) or 'batches' (a no-argument callable giving (input, "
        "target) minibatches) with 'loss' (loss(output, target) -> scalar tensor). Optional keys: 'optimizer' "
        "(optimizer(params); default SGD lr 0.01 momentum 0.9), 'dataset_size' (samples per epoch; a dataset's "
        "length by default) and 'minibatches_per_epoch' (one of the two for 'batches'). A classifier without "
        f"dataset_size is taken to have {samples:,} samples per epoch (CIFAR-10's), which sets "
        f"every s/epoch figure: {synthetic_mpe} minibatches at batch {BATCH_SIZE}. "
        "A failure is reported in one line: exit 2 for bad input (a flag, or a --workload file that fails "
        "to load, with its file and line), 1 for a failure while profiling (naming the mode and minibatch); the "
        "modes finished before it stay in --out. Set JETPREDICT_DEBUG=1 to see the full Python traceback of "
        "either.")
    p.add_argument("--device", required=True, help="host | jetson | sim:DEVICE")
    p.add_argument("--workload", required=True,
                   help=" | ".join([*BUILTIN_WORKLOADS, "torchvision:NAME", "module.path:factory"]))
    p.add_argument("--modes", help="presets | FILE (CSV or JSON, e.g. `plan --out`) | comma-separated labels "
                   "(Jetson and sim; default presets); on the host comma-separated thread counts such as 1,2 "
                   "(default one mode with all cores)")
    p.add_argument("--batch-size", type=int, help=f"minibatch size (default {BATCH_SIZE})")
    p.add_argument("--workers", type=int,
                   help="DataLoader workers (default min(4, CPU cores); sim: min(4, the device's cores))")
    p.add_argument("--warmup", type=int, default=WARMUP_MINIBATCHES,
                   help=f"warm-up minibatches per mode (default {WARMUP_MINIBATCHES}, "
                        f"at most {MAX_MINIBATCHES_PER_MODE})")
    p.add_argument("--minibatches", type=int, default=MEASURED_MINIBATCHES,
                   help=f"measured minibatches per mode (default {MEASURED_MINIBATCHES}, "
                        f"at most {MAX_MINIBATCHES_PER_MODE})")
    p.add_argument("--settle-s", type=float,
                   help=f"wait after each mode switch, s (default {SETTLE_S:g}; host 0; at most {MAX_WAIT_S:g})")
    p.add_argument("--data", help="ImageFolder directory (default: synthetic tensors)")
    p.add_argument("--upload", help="service URL to upload the rows to (POST /v1/profiles); the key comes from "
                   "$JETPREDICT_API_KEY, else the first of $JETPREDICT_API_KEYS; checked before profiling")
    p.add_argument("--no-lock-clocks", action="store_true",
                   help="Jetson: measure under the DVFS governors instead of pinning each mode's clocks at its "
                   "caps with jetson_clocks (the default; the clocks in force before are restored after)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on standard error")
    p.add_argument("--out", required=True, help="FILE.csv (+ FILE.csv.json: every minibatch and power sample) or "
                   f"FILE.json (all in one document, at most the {MAX_FILE_BYTES // 2**20} MiB its readers take: "
                   "refused before profiling when its minibatches alone would pass that)")
    a = p.add_argument_group(
        "adaptive profiling", "--adaptive: profile, fit, pick the mode that most narrows the decision (the "
        "recommended mode and the front under the caps), repeat; --modes, when given, are profiled first")
    a.add_argument("--adaptive", action="store_true", help="choose each next mode from the rows so far")
    a.add_argument("--budget", type=int, help="most modes to profile (required with --adaptive; at least the "
                   "--modes profiled first)")
    _adaptive_flags(a, rules)
    a.add_argument("--max-power-w", type=float, help="W; met by the upper end of the power interval")
    a.add_argument("--max-epoch-time-s", type=float, help="s; met by the upper end of the time interval")
    level = f"{rules.default_confidence:g}" if rules and rules.default_confidence else "the predictor's"
    a.add_argument("--confidence", type=float, help=f"level of the intervals, a share below 1 (default {level})")
    a.add_argument("--candidates", help="CSV or JSON of the modes that may be chosen (default: every mode of "
                   "the device)")
    p.set_defaults(handler=lambda args: _profile(args, adaptive))

    from jetpredict.profiler.apply import register as register_apply

    register_apply(sub)  # `apply`: set a mode and leave it set (restored by `restore`)
