"""CLI verbs of the predictor: ``fit``, ``predict``, ``plan``, ``recommend`` (flags as in the README's command-line tour).

Tables go to standard output (or ``--out``); summaries and progress go to standard error, so
``--format csv`` output is only CSV. Bad input raises :class:`InputError` (exit 2, via ``jetpredict.cli``);
``recommend`` exits 1 when no mode meets the limits.

pandas and the profile-file readers load inside the verbs that read or write tables: every verb's parser
imports this module (``register``), and ``jetpredict restore``, run after a crash, starts without them.
"""

from __future__ import annotations

import argparse
import io
import json
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import numpy as np
from jetpredict.models.catalogue import MODE_FIELDS, resolve_device
from jetpredict.models.errors import InputError, cli_flag, naming_flags, say
from jetpredict.models.tables import FORMATS, write_table
from jetpredict.predictor.cli_files import (
    FORMAT_HELP,
    check_outputs,
    load_model_flag,
    out_error,
    out_format,
    output_to,
    read_rows,
)
from jetpredict.predictor.limits import (
    DEFAULT_CONFIDENCE,
    DEFAULT_OBJECTIVE,
    MAX_PLAN_BUDGET,
    MIN_CLOCK_SHARE,
    MIN_CORES,
    OBJECTIVES,
    SPLIT_SOURCES,
    percent,
)

if TYPE_CHECKING:
    import pandas as pd
    from jetpredict.predictor.model import WorkloadModel


def _confidence_arg(value: str) -> float:
    """``--confidence``: a number; the range is checked by the service (one rule, one message)."""
    try:
        return float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number such as 0.9, got {value!r}") from None


def planning_region() -> str:
    """``plan``'s default candidates in words."""
    return (f"the planning region (every clock >= {MIN_CLOCK_SHARE:.0%} of its maximum, >= {MIN_CORES} cores; "
            "a knob whose top value alone passes keeps its next value down, so that every knob varies)")


def _plan(args: argparse.Namespace) -> int:
    from jetpredict.models.profile_files import read_mode_table, rows_named_by_line
    from jetpredict.predictor import service

    args.format = out_format(args.format, args.out)  # `plan --out plan.csv` feeds `profile --modes plan.csv`
    check_outputs(args)

    candidates = None if args.candidates is None else read_mode_table(args.candidates, "candidates")
    if args.after is not None:
        with rows_named_by_line("candidates", args.candidates, candidates):
            return _plan_after(args, candidates)
    given = [f for f in ("objective", "max_power_w", "max_epoch_time_s", "confidence") if getattr(args, f) is not None]
    if given:
        raise InputError(f"{cli_flag(given[0])} needs --after PROFILES (the next mode for a decision)",
                         given[0])
    if args.budget is None:
        raise InputError("--budget is required: the number of modes to profile (with --after, default 1)", "budget")
    with rows_named_by_line("candidates", args.candidates, candidates):
        plan = service.plan_profiling(args.device, args.budget, candidates)
    say(f"{args.device}: {plan.summary()}")
    if candidates is None:
        say(f"candidates: {planning_region()}; modes outside it extrapolate -- give --candidates with the "
             "modes you will query to plan for them")
    # The time estimate is a prediction: what it rests on travels in columns, as in every verb's answer
    # (the least trusted over the models it took the slowest of, as a fleet plan's over its devices).
    device = resolve_device(args.device)
    rests_on = service.fleet_provenance({m.workload_id: service.provenance(m, device) for m in plan.estimated_by})
    for key in ("workload_source", "split_source"):  # of the reference workloads' own rows, not the user's
        del rests_on[key]
    table = plan.modes.assign(**rests_on, cross_device=any(m.device_id != device.id for m in plan.estimated_by))
    with output_to(args.out) as out:
        write_table(table if args.format != "table" else plan.modes, args.format, out)
    return 0


def _plan_after(args: argparse.Namespace, candidates: pd.DataFrame | None) -> int:
    """``plan --after PROFILES``: the next mode(s) worth profiling for the decision (:mod:`.adaptive`)."""
    import pandas as pd
    from jetpredict.predictor import service
    from jetpredict.predictor.adaptive import Adviser
    from jetpredict.predictor.decision import Goal, unreachable_caps

    budget = service.check_budget(1 if args.budget is None else args.budget)  # before reading and fitting
    rows = read_rows(args.after, "after")
    reference = None if args.reference is None else read_rows(args.reference, "reference")
    goal = Goal(args.objective or DEFAULT_OBJECTIVE, args.max_power_w, args.max_epoch_time_s,
                DEFAULT_CONFIDENCE if args.confidence is None else args.confidence)
    adviser = Adviser(resolve_device(args.device), goal, candidates, reference)
    proposal = adviser.propose(rows, budget)
    hopeless = unreachable_caps(proposal.decision, goal)
    # What the recommendation rests on, stated in the summary as recommend's is (csv/json: columns below).
    rests_on = _rests_on(proposal.model)
    say(f"{args.device}: after {rows['mode'].nunique()} profiled mode(s): {proposal.summary()}"
         + provenance_summary(pd.DataFrame([rests_on]), proposal.model.device_id)
         + ("" if hopeless is None else f"; {hopeless}"))
    best = proposal.decision.best
    _outside_note("" if best is None else proposal.decision.table["extrapolated_knobs"].iloc[best])
    _log_lack_of_fit(proposal.model)
    # What the proposal rests on travels in columns, as in every verb's answer from a fit.
    table = proposal.modes.assign(**rests_on)
    if hopeless is not None:
        # As recommend: csv keeps its header and json is an empty list, for a script reading the answer;
        # a table would read "(no rows)", which the reason above says better.
        if args.format != "table":
            with output_to(args.out) as out:
                write_table(table.iloc[:0], args.format, out)
        return 1
    if proposal.modes.empty:
        say("every candidate mode is profiled already: nothing to propose")
    else:
        say(f"profile next: {', '.join(proposal.modes['mode'].astype(str))} -- about "
             f"{proposal.modes['est_profile_s'].sum() / 60:.1f} min; score = expected drop of the decision's "
             "uncertainty (relative width of the recommended mode's interval + rivals' chance to beat it)")
    with output_to(args.out) as out:
        write_table(table if args.format != "table" else proposal.modes, args.format, out)
    return 0


def _fit(args: argparse.Namespace) -> int:
    from jetpredict.predictor import bundled
    from jetpredict.predictor.aliasing import alias_widening
    from jetpredict.predictor.bundled import fit_workload, prior_reference, save_model

    check_outputs(args, written=("", ".json"), out_files="MODEL.json")
    rows = read_rows(args.profiles, "profiles")
    reference = None if args.reference is None else read_rows(args.reference, "reference")
    device = None if args.device is None else resolve_device(args.device)
    model = fit_workload(rows, device=device, reference=reference)
    try:
        save_model(model, args.out)
    except OSError as exc:
        raise out_error(args.out, exc) from None
    derived = bundled.derivation_words(bundled.reference_derivations(model.device_id) if reference is None else ())
    say(f"fitted {model.workload_id} on {model.device_id} from {model.profiled_modes} profiled mode(s) "
         f"({rows_kind(model.training_rows)}; {model.reference_source} reference{derived}, {model.model_version}); "
         f"wrote {args.out}")
    if prior_reference(rows, model.device, reference)[1]:
        say(f"the reference holds {model.workload_id}'s own sweep: the prior comes from its other workloads "
             "(as the published accuracy figures are scored)")
    _log_fit_caveats(model)
    for widening in alias_widening(model, rows, model.device, reference):
        say(f"what the alias costs: {widening.describe()}")
    return 0


def rows_kind(rows: Iterable[Mapping[str, object]]) -> str:
    """The kind of a workload's rows (``simulated rows``), or each kind's count when they mix (``rows: 4
    measured, 4 simulated``): the model's provenance names only the least trusted kind."""
    from jetpredict.models.profile_rows import SOURCE_KINDS, source_kind

    counts = Counter(source_kind(row.get("source")) for row in rows)
    if len(counts) == 1:
        return f"{next(iter(counts))} rows"
    return "rows: " + ", ".join(f"{counts[kind]} {kind}" for kind in SOURCE_KINDS if counts[kind])


def _log_fit_caveats(model) -> None:
    """Say which knobs' effects the profiled modes do not separate (their split is the prior's), and
    whether the model's form misses its own rows (:func:`_log_lack_of_fit`), and when its stall/compute
    split rests on epoch totals alone."""
    from jetpredict.predictor.provenance import split_source

    aliased = model.aliased_knobs()
    if aliased:
        # No claim on the intervals here: `fit` measures what each pair costs them, and it can be nothing.
        say("aliased knobs (the profiled modes do not separate their effects; predictions along them take "
             "their split from the reference): " + ", ".join(f"{k} ({why})" for k, why in aliased.items()))
    if split_source(model.time_fits) != SPLIT_SOURCES[0]:
        say("note: the rows time whole epochs only (no stall_time_s / compute_time_s): predicted stall and "
             "compute are the fitted terms' attribution, shaped by the reference workloads (split_source "
             f"{SPLIT_SOURCES[1]}), not measured; the epoch is predicted as usual")
    _log_lack_of_fit(model)


def _log_lack_of_fit(model) -> None:
    """Warn when the model's form misses its own rows (:func:`~predictor.fit_check.lack_of_fit_note`)."""
    from jetpredict.predictor.fit_check import lack_of_fit_note

    note = lack_of_fit_note(model)
    if note:
        say(f"warning: {note}")


#: ``--epochs N`` columns under honest names: the time (s) and energy (J) of training N epochs -- nothing
#: about accuracy is known. The contract's ``time_to_accuracy_s`` / ``energy_to_accuracy_j`` (DESIGN.md)
#: stay beside them with the same numbers.
FOR_EPOCHS = {"time_to_accuracy_s": "time_for_epochs_s", "energy_to_accuracy_j": "energy_for_epochs_j"}
#: What a ``table`` shows first (it is cut to the terminal width; csv and json have every column).
TABLE_COLUMNS = ("role", "mode", "epoch_time_s", "epoch_time_s_low", "epoch_time_s_high", "avg_power_w",
                 "epoch_energy_j", "time_for_epochs_s", "energy_for_epochs_j", "avg_power_w_high",
                 "epoch_energy_j_low", "epoch_energy_j_high", "extrapolated", *MODE_FIELDS)


def with_epoch_totals(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with ``time_for_epochs_s`` and ``energy_for_epochs_j`` (and ``_low``/``_high``) placed before the
    contract's ``*_to_accuracy_*`` columns, when those are there (``--epochs``)."""
    if "time_to_accuracy_s" not in df.columns:
        return df
    out = df.copy()
    at = list(out.columns).index("time_to_accuracy_s")
    for old, new in FOR_EPOCHS.items():
        for suffix in ("", "_low", "_high"):
            out.insert(at, new + suffix, out[old + suffix])
            at += 1
    return out


def _predict(args: argparse.Namespace) -> int:
    from jetpredict.models.profile_files import read_mode_table, rows_named_by_line
    from jetpredict.predictor import service
    from jetpredict.predictor.bundled import on_device

    args.format = out_format(args.format, args.out)
    check_outputs(args)
    model = load_model_flag(args.model)
    modes = "all" if args.all else "presets" if args.presets else read_mode_table(args.modes, "modes")
    with rows_named_by_line("modes", args.modes, modes):
        df = service.predict(model, modes, device=args.device, epochs=args.epochs, confidence=args.confidence)
    if args.format == "table":
        # The table leaves the per-answer provenance columns out: the summary states them once.
        say(f"{model.workload_id} on {args.device or model.device_id}: {len(df)} mode(s), "
             f"{percent(args.confidence)} intervals{provenance_summary(df, model.device_id, device=args.device)}")
    # Aliasing bears on any mode off the line the profiled modes draw, inside the ranges too.
    _log_fit_caveats(model)
    flagged = int(df["extrapolated"].sum())
    if flagged:
        target = on_device(model, None if args.device is None else resolve_device(args.device))
        widening = target.extrapolation_widening(target.device.labelled_modes(df[df["extrapolated"]]),
                                                 args.confidence)
        where = (f", taken at the same share of each knob's top (snapped inward to its steps) on {target.device_id}"
                 if target.cross_device else "")
        say(f"{flagged} mode(s) lie outside the profiled knob ranges{where} (column extrapolated_knobs): their "
             f"intervals are {widening_words(widening)}")
    with output_to(args.out) as out:
        write_table(with_epoch_totals(df), args.format, out, table_columns=TABLE_COLUMNS)
    return 0


def widening_words(widening: np.ndarray) -> str:
    """How much wider (ratio to inside the profiled ranges, one per mode) the time intervals of modes outside
    the ranges are, in words for ``predict``'s summary."""
    # Across devices the transfer's SD, added in quadrature, can absorb the widening: then say so.
    if round(float(np.max(widening)), 2) > 1.0:
        # A median of 1.00x is most modes no wider, a few wider: "wider" alone would say all are.
        most = "" if round(float(np.median(widening)), 2) > 1.0 else "mostly no "
        return (f"{most}wider (time intervals {np.median(widening):.2f}x as wide as inside them, median; "
                f"up to {np.max(widening):.2f}x)")
    return "no wider (time intervals at most 1.00x as wide as inside them)"


def _rests_on(model: WorkloadModel, device: str | None = None) -> dict[str, object]:
    """The provenance columns of ``model``'s predictions on ``device`` (default: its own), for an answer
    whose summary has no prediction row to read them from."""
    from jetpredict.predictor import service

    device = device or model.device_id
    return {**service.provenance(model, device), "cross_device": device != model.device_id}


def _outside_note(knobs: str) -> None:
    """The note for a recommended mode whose ``knobs`` ("" for none) lie outside the profiled ranges."""
    if knobs:
        say(f"note: the recommended mode lies outside the profiled range of {knobs}; profile it to confirm")


def provenance_summary(df: pd.DataFrame, source_device: str, version: bool = True, device: str | None = None
                       ) -> str:
    """What the predictions in ``df`` rest on, as the tail of a summary line (the provenance columns that
    ``--format csv``/``json`` carry, stated once; "" for no rows): profiled modes, the device they were
    profiled on (and whether this is a cross-device prediction), the reference and workload row sources
    and (``version``) the model version; a bundled reference of ``source_device`` or ``device`` (the
    predictions') derived from another board's is named with it."""
    from jetpredict.predictor.bundled import derivation_words, reference_derivations
    if df.empty:
        return ""
    first = df.iloc[0]
    cross = " (cross-device)" if bool(first["cross_device"]) else ""
    derivations = reference_derivations(source_device, device or source_device)
    return (f", from {int(first['profiled_modes'])} profiled mode(s) on {source_device}{cross}; reference: "
            f"{first['reference_source']}{derivation_words(derivations)}, workload rows: {first['workload_source']}"
            + (f", model {first['model_version']}" if version else ""))


def _plot(model, result, args: argparse.Namespace) -> None:
    """``--plot FILE.svg|png``: every mode, the front within the caps and the chosen mode (as the page)."""
    from jetpredict.predictor import plots, service
    from jetpredict.predictor.recommend import feasible_mask

    plots.check_plot_path(args.plot)
    modes = service.predict(model, "all", device=result.device, epochs=args.epochs, confidence=result.confidence)
    caps = ", ".join(f"{k} {v:g}" for k, v in result.constraints.items() if v is not None) or "no cap"
    # Second line: what the model rests on (simulated rows or reference, another device's rows), as the
    # predict summary says it.
    title = (f"{model.workload_id} on {result.device}: {args.objective}, {caps} "
             f"({percent(result.confidence)} upper ends)\n"
             + provenance_summary(modes, model.device_id, version=False, device=result.device).removeprefix(", "))
    caps = (result.constraints.get("max_power_w"), result.constraints.get("max_epoch_time_s"))
    presets = service.predict(model, "presets", device=result.device, epochs=args.epochs,
                              confidence=result.confidence)
    try:
        plots.pareto_plot(modes, feasible_mask(modes, *caps), result.as_dict(), args.plot, title,
                          presets=presets, presets_feasible=feasible_mask(presets, *caps))
    except OSError as exc:
        raise out_error(args.plot, exc, "plot") from None
    say(f"wrote {args.plot}")


def _recommend(args: argparse.Namespace) -> int:
    import pandas as pd
    from jetpredict.predictor import service

    args.format = out_format(args.format, args.out)
    check_outputs(args)
    model = load_model_flag(args.model)
    result = service.recommend(model, args.objective, max_power_w=args.max_power_w,
                               max_epoch_time_s=args.max_epoch_time_s, device=args.device,
                               epochs=args.epochs, confidence=args.confidence)
    _log_lack_of_fit(model)
    if args.plot:
        _plot(model, result, args)
    # Where no mode meets the caps a table would read "(no rows)": it goes nowhere, the reason below says it
    # (csv keeps its header, json its answer).
    with output_to(args.out) if result.feasible or args.format != "table" else io.StringIO() as out:
        if args.format == "json":
            # the fields of POST /v1/recommendations' answer
            json.dump(service.recommendation_answer(model, result, model.workload_id), out, indent=2)
            out.write("\n")
        else:
            rows = ([{"role": "best", **result.best}] if result.best else []) + [
                {"role": "pareto", **r} for r in result.pareto]
            # No row (no mode under the caps) is still a header with the provenance columns, not a blank line.
            frame = (pd.DataFrame(rows) if rows
                     else pd.DataFrame(columns=["role", *service.table_columns(args.epochs)]))
            write_table(with_epoch_totals(frame), args.format, out, table_columns=TABLE_COLUMNS)
    if not result.feasible:
        # No row carries the provenance columns, so the reason states what the predictions rest on.
        rests_on = _rests_on(model, result.device)
        say(f"jetpredict recommend: {result.reason}"
             f"{provenance_summary(pd.DataFrame([rests_on]), model.device_id, device=result.device)}")
        return 1
    if args.format != "csv":
        b = result.best
        say(f"best for {args.objective} on {result.device}: {b['mode']} -- {b['epoch_time_s']:.4g} s/epoch "
             f"[{b['epoch_time_s_low']:.4g}, {b['epoch_time_s_high']:.4g}], {b['avg_power_w']:.3g} W "
             f"[{b['avg_power_w_low']:.3g}, {b['avg_power_w_high']:.3g}], {b['epoch_energy_j']:.4g} J/epoch "
             f"({percent(result.confidence)} intervals; caps hold for their upper ends); "
             f"{len(result.pareto)} mode(s) on the time/energy front"
             f"{provenance_summary(pd.DataFrame([b]), model.device_id, device=result.device)}")
        _outside_note(b["extrapolated_knobs"])
        if result.preferred_in_range:
            say("note: a mode outside the profiled knob ranges looked better, but not beyond its interval; "
                 "the best mode inside the ranges, or better than all of them beyond its interval, was chosen")
        # The table's rows stay best + front; the comparison is a line here and a field in the JSON.
        say(preset_summary(result.preset_comparison))
    return 0


def preset_summary(comparison: dict | None) -> str:
    """One line comparing the recommendation with the best nvpmodel preset under the same caps."""
    c = comparison or {}
    if not c.get("preset"):
        return f"no preset to compare with: {c.get('reason') or 'none meets the caps'}"
    if c["chosen_is_preset"]:
        return (f"the best mode is the preset {c['preset']} itself (presets and the other modes are held to one "
                "rule: outside the profiled ranges a mode counts only where it is better beyond its interval)")
    return (f"vs the best preset under the same caps, {c['preset']} ({c['epoch_time_s']:.4g} s/epoch, "
            f"{c['epoch_energy_j']:.4g} J/epoch, {c['avg_power_w']:.3g} W): "
            f"{_saving(c['time_saving_s'], c['time_saving_share'], 's')} and "
            f"{_saving(c['energy_saving_j'], c['energy_saving_share'], 'J')} per epoch")


def _saving(amount: float, share: float, unit: str) -> str:
    """``saves 37.2 s (7.4%)``, or ``costs 337.6 J (4.1%) more`` where the saving is negative."""
    if amount < 0:
        return f"costs {-amount:.4g} {unit} ({-share:.1%}) more"
    return f"saves {amount:.4g} {unit} ({share:.1%})"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="choose which power modes to profile (first, or next with --after)")
    p.add_argument("--device", required=True, help="the Jetson type, as `jetpredict devices` lists it (e.g. agx-xavier)")
    p.add_argument("--candidates", help="CSV or JSON of candidate modes: the modes you will query (default: "
                   f"{planning_region().replace('%', '%%')}; with --after, every mode of the device)")
    p.add_argument("--budget", type=int, help=f"number of modes to profile, 1 to {MAX_PLAN_BUDGET} (required "
                   "without --after; with it, default 1)")
    p.add_argument("--after", help="profile rows measured so far: propose the next mode(s) that most narrow "
                   "the decision (the recommended mode and the front under the caps)")
    p.add_argument("--reference", help="with --after: your own measured reference sweeps (default: bundled; "
                   "sweeps without power take the bundled power model)")
    p.add_argument("--objective", choices=tuple(OBJECTIVES), help="with --after: the decision (default "
                   f"{DEFAULT_OBJECTIVE})")
    p.add_argument("--max-power-w", type=float, help="with --after: W; met by the upper end of the power interval")
    p.add_argument("--max-epoch-time-s", type=float, help="with --after: s; met by the upper end of the time "
                   "interval")
    p.add_argument("--confidence", type=_confidence_arg, help="with --after: level of the intervals (default "
                   f"{DEFAULT_CONFIDENCE})")
    p.add_argument("--format", choices=FORMATS, default=None, help=FORMAT_HELP)
    p.add_argument("--out", help="write to this file instead of standard output")
    p.set_defaults(handler=naming_flags(_plan))

    p = sub.add_parser("fit", help="fit a workload model from profile rows")
    p.add_argument("--device", required=True, help="the Jetson type, as `jetpredict devices` lists it (e.g. agx-xavier)")
    p.add_argument("--profiles", required=True, help="profile-row CSV/JSON of the new workload")
    p.add_argument("--reference", help="your own measured reference sweeps (default: bundled; sweeps without "
                   "power take the bundled power model)")
    p.add_argument("--out", required=True, help="model file to write")
    p.set_defaults(handler=naming_flags(_fit))

    p = sub.add_parser("predict", help="predict epoch time and energy for power modes")
    p.add_argument("--model", required=True, help="model file written by `jetpredict fit --out`")
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--modes", help="CSV or JSON of modes: mode, cpu_cores, cpu_mhz, gpu_mhz, emc_mhz")
    group.add_argument("--all", action="store_true", help="every mode of the device")
    group.add_argument("--presets", action="store_true", help="the nvpmodel presets")
    p.add_argument("--device", help="predict for another device type (cross-device)")
    p.add_argument("--epochs", type=int, help="add the time (s) and energy (J) of training this many epochs: "
                   "time_for_epochs_s, energy_for_epochs_j (also under the contract's names "
                   "time_to_accuracy_s, energy_to_accuracy_j)")
    p.add_argument("--confidence", type=_confidence_arg, default=DEFAULT_CONFIDENCE,
                   help="coverage of the intervals (default %(default)s)")
    p.add_argument("--format", choices=FORMATS, default=None, help=FORMAT_HELP)
    p.add_argument("--out", help="write to this file instead of standard output")
    p.set_defaults(handler=naming_flags(_predict))

    p = sub.add_parser("recommend", help="best power mode under a power or time constraint")
    p.add_argument("--model", required=True, help="model file written by `jetpredict fit --out`")
    p.add_argument("--objective", choices=tuple(OBJECTIVES), required=True,
                   help="the predicted column to minimise: "
                   + "; ".join(f"{name}: {column}" for name, column in OBJECTIVES.items()))
    p.add_argument("--max-power-w", type=float, help="W; met by the upper end of the power interval")
    p.add_argument("--max-epoch-time-s", type=float, help="s; met by the upper end of the time interval")
    p.add_argument("--confidence", type=_confidence_arg, default=DEFAULT_CONFIDENCE,
                   help="level of the intervals whose upper ends must meet the caps (default %(default)s)")
    p.add_argument("--device", help="recommend on another device type (cross-device)")
    p.add_argument("--epochs", type=int, help="add the time (s) and energy (J) of training this many epochs "
                   "to the chosen mode and the front")
    p.add_argument("--format", choices=FORMATS, default=None, help=FORMAT_HELP)
    p.add_argument("--out", help="write to this file instead of standard output")
    p.add_argument("--plot", help="also draw every mode, the Pareto front and the chosen mode to FILE.svg or "
                   "FILE.png (needs matplotlib: the [plot] extra)")
    p.set_defaults(handler=naming_flags(_recommend))
