"""Adaptive profiling: which mode to profile next so that the decision a user makes becomes sure.

A plan made before any profiling (:mod:`.planning`) spreads the modes to identify the model. After a few
rows the question is narrower: the user will run the mode ``recommend`` picks, under their caps, so the
next profiled mode should be the one that most reduces the uncertainty *there*: the decision's
uncertainty U of :mod:`.decision` (the recommended mode's interval width plus the rivals' chance to
overturn it).

Scoring a candidate (:func:`next_modes`): refit with a *pseudo-row* at the candidate, holding the model's
own predicted time, components, power and energy there (a measurement that confirms the prediction moves
no point, but narrows the posterior and the extrapolation around it), and take the drop in U. That costs
a refit plus a prediction of the decision set (~0.1 s for a 29,232-mode AGX Xavier), so only a short list
is scored: the recommended mode, the strongest rivals, and the candidates with the largest D-optimal gain
over the profiled design (:func:`jetpredict.predictor.planning.design_matrix`).

The loop (:class:`AdaptiveChooser`) profiles, fits, decides and proposes until the recommended mode's *time*
interval is narrower than ``target_width`` (relative) and no unprofiled mode is expected to beat it by more
than ``MAX_RIVAL_GAIN`` and the recommended mode itself is profiled, or the pick is profiled and no unprofiled
mode may beat it at all (``NEGLIGIBLE_RIVAL_GAIN``), or the budget of profiled modes is spent. When only such
a rival holds the stop back, it profiles that rival next (measured, it no longer counts); when only the pick
is unprofiled, it profiles the pick, and stops once that measurement agrees with the prediction that settled
the stop within the run-to-run noise (a rival's gain it nudges across the bar is noise, not news), also when
the refit moves the pick to a neighbour one knob away that the noise cannot tell from the measured mode
(:meth:`AdaptiveChooser._indistinct_neighbour`); likewise a rival measured as predicted that did not become
the pick settles the case of its neighbours. A mode beats the pick only if ``recommend`` could pick it once
profiled: with its interval's upper end under the caps, not its point (a mode measured just under a power cap
keeps an interval across it). It takes rows and returns modes, so the same code drives the digital twin, a
Jetson (through the profiler's campaign) and a replay of a measured sweep (``tools.replay.SweepReplay``, for
benchmarks and tests).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from jetpredict.models.catalogue import MODE_FIELDS, Device, ModeArrays, resolve_device
from jetpredict.models.errors import InputError
from jetpredict.models.numbers import checked_share
from jetpredict.predictor import planning, service
from jetpredict.predictor.bundled import fit_workload, load_reference
from jetpredict.predictor.constants import INTERVAL_NOISE_FLOOR
from jetpredict.predictor.decision import Decision, Goal, decide, unreachable_caps
from jetpredict.predictor.fit_check import lack_of_fit_note
from jetpredict.predictor.limits import (
    DEFAULT_CONFIDENCE,
    DEFAULT_OBJECTIVE,
    DEFAULT_TARGET_WIDTH_REL,
    MAX_RIVAL_GAIN,
    OBJECTIVES,
)
from jetpredict.predictor.model import WorkloadModel
from jetpredict.predictor.reference import DeviceReference

#: Candidates scored by a refit per proposed mode: the recommended mode, rivals, D-optimal fillers.
SHORTLIST = 8
#: D-optimal fillers in the short list: modes that identify the model where the decision set does not.
DESIGN_FILLERS = 2
#: Expected gain (share of the objective) below which no unprofiled mode may beat a measured pick at all: the
#: decision is made whatever the pick's interval (Nano's MAXN dominates every mode for min-time, and a
#: measured MAXN kept a 12-14% interval, so the loop profiled the slowest corners until the budget ran out).
NEGLIGIBLE_RIVAL_GAIN = 0.001
#: Modes profiled before the first fit when the caller gives none: the first modes of the D-optimal plan.
START_MODES = 2
#: Prediction columns a pseudo-row fills when the workload's own rows measure them.
_MEASURED = ("epoch_time_s", "stall_time_s", "compute_time_s", "avg_power_w", "epoch_energy_j", "base_power_w")
#: Per-minibatch statistics and other measured extras of a template row that a pseudo-row must not copy.
_NOT_COPIED_PREFIXES = ("minibatch_", "stall_", "compute_", "power_", "cpu_power", "measured_")


def pseudo_row(template: Mapping[str, Any], mode: Mapping[str, Any], decision_row: Mapping[str, Any]
               ) -> dict[str, Any]:
    """A profile row at ``mode`` holding the model's predictions (``decision_row``) where the workload's
    own rows (``template``, one of them) measure the quantity; other measured extras are left out."""
    row = {k: v for k, v in template.items() if not str(k).startswith(_NOT_COPIED_PREFIXES)}
    row.update({"mode": str(mode["mode"]), **{k: float(mode[k]) for k in MODE_FIELDS}})
    for column in _MEASURED:
        known = template.get(column)
        measured = known is not None and not (isinstance(known, float) and math.isnan(known))
        row[column] = float(decision_row[column]) if measured and column in decision_row else None
    return row


def mode_keys(device: Device, frame: pd.DataFrame) -> list[tuple[float, ...]]:
    """One key per mode of ``frame`` (``mode`` label and knobs): its knobs and the GPU share its label gives,
    so a gated preset and the custom mode at its clocks (the whole GPU) are two modes, profiled apart."""
    # Rounded to 0.001 MHz, in one pass over the table (it is the whole space, every round of the loop).
    values = np.column_stack([frame[list(MODE_FIELDS)].to_numpy(dtype=float), device.labelled_modes(frame).gpu_share])
    return list(map(tuple, np.round(values, 3).tolist()))


@dataclass(frozen=True)
class Proposal:
    """The modes worth profiling next (``modes``: mode columns, ``est_profile_s`` in s, ``score`` = drop of
    U, ``expected_uncertainty`` after it, ``reason``), and the decision before them and its ``model``."""

    modes: pd.DataFrame
    decision: Decision
    goal: Goal
    model: WorkloadModel

    def summary(self) -> str:
        d = self.decision
        if d.best is None:
            return f"no mode meets the caps yet ({d.reason})"
        b = d.table.iloc[d.best]
        return (f"{self.goal.describe()}: recommended {b['mode']} at {_objective_first(b, self.goal)} s/epoch "
                f"(time interval {d.time_width_rel:.0%} wide, {self.goal.objective} interval "
                f"{d.objective_width_rel:.0%}); decision uncertainty {d.uncertainty:.3f}")


def _objective_first(pick: Mapping[str, Any], goal: Goal) -> str:
    """The pick's epoch time (s, unit left to the caller), after its energy (J/epoch) where the objective ranks
    by energy: the objective's own figure first."""
    time_s = f"{pick['epoch_time_s']:.4g}"
    if OBJECTIVES[goal.objective] == "epoch_energy_j":
        return f"{pick['epoch_energy_j']:.4g} J/epoch, {time_s}"
    return time_s


class Adviser:
    """Fits a workload's rows and proposes the next modes (see the module docstring).

    ``candidates``: modes that may be profiled next (a checked mode table; None = the device's whole
    space); the decision set is the candidates plus the profiled modes. ``reference``: the prior (default:
    the device's bundled reference).
    """

    def __init__(self, device: Device, goal: Goal, candidates: pd.DataFrame | None = None,
                 reference: DeviceReference | pd.DataFrame | None = None) -> None:
        self.device = device
        self.goal = goal.checked(device)
        self.reference = reference
        if candidates is None:
            # The nvpmodel presets first (a preset and a custom mode with the same knobs keep the preset's
            # name), then every custom mode: the set ``recommend`` chooses from.
            presets = service.resolve_modes(self.device, "presets")
            candidates = pd.concat([presets, service.resolve_modes(self.device, "all")], ignore_index=True)
            is_preset = np.arange(len(candidates)) < len(presets)
        else:
            candidates = service.resolve_modes(self.device, candidates)  # knobs checked, named errors
            is_preset = np.zeros(len(candidates), dtype=bool)
        # One candidate per knobs and GPU share: a gated preset and the custom mode at its clocks are two.
        share = self.device.labelled_modes(candidates).gpu_share
        keep = ~candidates.assign(gpu_share=share).duplicated(subset=[*MODE_FIELDS, "gpu_share"]).to_numpy()
        self.candidates = candidates[keep].reset_index(drop=True)
        #: Which candidates are the device's presets: the decision prefers one as ``recommend`` does.
        self.is_preset = is_preset[keep]
        #: :func:`mode_keys` of the candidates, fixed with them.
        self.candidate_keys = mode_keys(device, self.candidates)

    def table_keys(self, table: pd.DataFrame) -> list[tuple[float, ...]]:
        """:func:`mode_keys` of a :meth:`decision_set` table (or a decision over it): the candidates' fixed
        keys, then the profiled modes' beyond them."""
        return self.candidate_keys + mode_keys(self.device, table.iloc[len(self.candidates):])

    def fit_model(self, rows: pd.DataFrame) -> WorkloadModel:
        """The workload model of ``rows`` (profile rows) over this adviser's reference; the adviser keeps
        nothing of it (not a scikit-learn ``fit``: each proposal refits with pseudo-rows)."""
        return fit_workload(rows.reset_index(drop=True), self.device, self.reference)

    def decision_set(self, rows: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
        """Candidates plus the profiled modes not among them; and the mask of the unprofiled ones.

        A preset counts as profiled by its knobs or by its name: a board's own nvpmodel.conf may cap it
        otherwise than the catalogue, and its row records the board's caps (``profile``)."""
        profiled = set(mode_keys(self.device, rows))
        extra = rows[["mode", *MODE_FIELDS]].drop_duplicates(subset=list(MODE_FIELDS))
        known = set(self.candidate_keys)
        extra = extra[[k not in known for k in mode_keys(self.device, extra)]]
        table = pd.concat([self.candidates, extra.astype({"mode": str})], ignore_index=True)
        named = self.presets_named(rows["mode"].dropna())
        open_ = np.array([k not in profiled for k in self.candidate_keys] + [False] * len(extra))
        open_[:len(named)] &= ~named
        return table, open_

    def presets_named(self, names: Iterable[object]) -> np.ndarray:
        """Mask of the candidates that are presets named in ``names`` (profiled rows' ``mode``): a preset
        counts as profiled by its name, whatever caps the board's nvpmodel.conf gave it."""
        return self.is_preset & self.candidates["mode"].astype(str).isin({str(n) for n in names}).to_numpy()

    def decide(self, model: WorkloadModel, table: pd.DataFrame, open_: np.ndarray) -> Decision:
        """:func:`decide` over a :meth:`decision_set` table, its presets preferred as ``recommend`` does."""
        presets = np.concatenate([self.is_preset, np.zeros(len(table) - len(self.is_preset), dtype=bool)])
        return decide(model, table, self.goal, open_, presets)

    def _shortlist(self, decision: Decision, table: pd.DataFrame, open_: np.ndarray, rows: pd.DataFrame,
                   model: WorkloadModel) -> list[tuple[int, str]]:
        """(position, why) of the candidates worth a refit: best, rivals, D-optimal fillers."""
        picks: list[tuple[int, str]] = []
        if decision.best is not None and open_[decision.best]:
            picks.append((decision.best,
                          f"the recommended mode (time interval {decision.time_width_rel:.0%} wide)"))
        for pos, p in zip(decision.rivals, decision.rival_p, strict=True):
            if open_[pos] and len(picks) < SHORTLIST - DESIGN_FILLERS:
                picks.append((int(pos), f"may beat the recommended mode (P = {p:.2f})"))
        # Fillers: the largest D-optimal gain over the profiled design (identify the model, not the choice).
        ref = load_reference(self.device)
        both = pd.concat([rows[list(MODE_FIELDS)], table[list(MODE_FIELDS)]], ignore_index=True)
        x = planning.design_matrix(ModeArrays.from_frame(both), ref.kappa_cpu, ref.kappa_pipe,
                                   model.num_workers)
        info = planning.RIDGE * np.eye(x.shape[1]) + x[:len(rows)].T @ x[:len(rows)]
        gains = planning.log_det_gains(x[len(rows):], info)
        taken = {p for p, _ in picks}
        # Said only where it holds: with every knob separated, a filler just widens the design.
        does = ("separates knobs the profiled modes do not" if model.aliased_pairs()
                else "widens the profiled design")
        for pos in np.argsort(-np.where(open_, gains, -np.inf), kind="stable"):
            if len(picks) >= SHORTLIST or not open_[pos]:
                break
            if int(pos) not in taken:
                picks.append((int(pos), f"{does} (D-optimal gain {gains[pos]:.2f})"))
                taken.add(int(pos))
        return picks

    def propose(self, rows: pd.DataFrame, budget: int = 1) -> Proposal:
        """The ``budget`` modes worth profiling next after ``rows`` (greedy: each scored after the
        pseudo-rows of those chosen before it)."""
        budget = service.check_budget(budget)  # before any fit: a huge budget is refused, not run for hours
        rows = rows.reset_index(drop=True)
        model = fitted = self.fit_model(rows)
        table, open_ = self.decision_set(rows)
        first = self.decide(model, table, open_)
        decision, work = first, rows
        chosen: list[dict[str, Any]] = []
        template = rows.iloc[-1].to_dict()
        for _ in range(min(budget, int(open_.sum()))):
            best: tuple[float, int, str, Decision, pd.DataFrame, WorkloadModel] | None = None
            for pos, why in self._shortlist(decision, table, open_, work, model):
                mode = table.iloc[pos]
                trial = pd.concat([work, pd.DataFrame([pseudo_row(template, mode, decision.table.iloc[pos])])],
                                  ignore_index=True)
                try:
                    trial_model = self.fit_model(trial)
                except InputError:
                    continue  # a pseudo-row the fit refuses (e.g. a clock outside the catalogue) is skipped
                still_open = open_.copy()
                still_open[pos] = False
                after = self.decide(trial_model, table, still_open)
                drop = decision.uncertainty - after.uncertainty
                if not math.isfinite(drop):
                    drop = 0.0 if after.best is None else math.inf
                if best is None or drop > best[0]:
                    best = (drop, pos, why, after, trial, trial_model)
            if best is None:
                break
            drop, pos, why, after, work, model = best
            open_[pos] = False
            chosen.append({**table.iloc[pos][["mode", *MODE_FIELDS]].to_dict(), "score": drop,
                           "expected_uncertainty": after.uncertainty, "reason": why})
            decision = after
        out = pd.DataFrame(chosen, columns=["mode", *MODE_FIELDS, "score", "expected_uncertainty", "reason"]
                           ).astype({"cpu_cores": "int64"})
        if len(out):
            est = planning.profile_time_s(planning.minibatch_time_s(self.device, ModeArrays.from_frame(out),
                                                                    fitted))
            out.insert(len(MODE_FIELDS) + 1, "est_profile_s", est)
        return Proposal(out, first, self.goal, fitted)


@dataclass(frozen=True)
class Step:
    """One round of the loop: the modes profiled so far, the decision after fitting them, and what next
    (``next_mode`` None when the loop stops; ``stop`` says why); ``model``: what the fit that decided rests
    on (:func:`service.provenance`)."""

    profiled: tuple[str, ...]
    decision: Decision
    next_mode: dict[str, Any] | None
    reason: str | None
    stop: str | None
    model: dict[str, object]


class AdaptiveChooser:
    """Profile -> fit -> next mode, until the recommended mode's time interval is narrower than
    ``target_width`` (relative) or ``budget`` modes are profiled. ``start``: modes to profile first
    (default: the first ``START_MODES`` of the D-optimal plan over the candidates, or of the device's
    default plan).

    :meth:`next_mode` takes every row measured so far (dicts) and returns the next mode as a dict with
    ``mode`` and the knobs, or None to stop; :attr:`steps` records each round.
    """

    def __init__(self, device: Device, goal: Goal, budget: int,
                 target_width: float = DEFAULT_TARGET_WIDTH_REL,
                 candidates: pd.DataFrame | None = None, reference: DeviceReference | pd.DataFrame | None = None,
                 start: pd.DataFrame | None = None, log: Callable[[str], None] | None = None) -> None:
        self.budget = service.check_budget(budget)
        if start is not None and len(start) > self.budget:  # refused before any mode is profiled
            raise InputError(f"--budget {budget} is below the {len(start)} --modes profiled first", "budget")
        # The keyword and the error's field stay ``target_width``: --target-width's name, which the
        # profile CLI maps its errors to (models.errors.flag_named).
        self.target_width_rel = checked_share(target_width, "target_width")
        self.adviser = Adviser(device, goal, candidates, reference)
        self._candidates_given = candidates is not None
        self._start = start
        self._start_given = start is not None
        #: (knobs key, predicted epoch time s) of a pick profiled to confirm a settled stop.
        self._confirming: tuple[tuple[float, ...], float] | None = None
        #: (knobs key, predicted epoch time s) of a rival profiled to settle a stop (see :meth:`next_mode`).
        self._settling: tuple[tuple[float, ...], float] | None = None
        self.log = log
        self.steps: list[Step] = []

    def start_modes(self) -> pd.DataFrame:
        """The modes profiled before the first fit."""
        if self._start is None:
            n = min(START_MODES, self.budget)
            cands = self.adviser.candidates if self._candidates_given else None
            self._start = service.plan_profiling(self.adviser.device, n, cands).modes[["mode", *MODE_FIELDS]]
        return self._start.reset_index(drop=True)

    def _measured_s(self, rows: Sequence[Mapping[str, Any]]) -> dict[tuple[float, ...], Any]:
        """Epoch time (s) of every profiled mode by its :func:`mode_keys`; a preset profiled at the board's own
        caps (``profile`` records those) also under the catalogue's knobs, as :meth:`Adviser.decision_set`
        counts it profiled by its name."""
        device = self.adviser.device
        frame = pd.DataFrame(list(rows), columns=["mode", *MODE_FIELDS, "epoch_time_s"])
        measured_s = dict(zip(mode_keys(device, frame), frame["epoch_time_s"], strict=True))
        by_name = {str(r.get("mode")): r.get("epoch_time_s") for r in rows}
        cands = self.adviser.candidates
        for i in np.flatnonzero(self.adviser.presets_named(by_name)):
            measured_s.setdefault(self.adviser.candidate_keys[i], by_name[str(cands["mode"].iloc[i])])
        return measured_s

    def next_mode(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
        start = self.start_modes()
        measured_s = self._measured_s(rows)
        names = {str(r.get("mode")) for r in rows}
        if len(rows) < len(start):
            for key, (_, mode) in zip(mode_keys(self.adviser.device, start), start.iterrows(), strict=True):
                # A start mode is profiled by its knobs, or by its name (a preset at the board's caps).
                if key not in measured_s and str(mode["mode"]) not in names:
                    return mode.to_dict()
        frame = pd.DataFrame(list(rows))
        if len(rows) >= self.budget:
            return self._stop(frame, None, f"budget of {self.budget} profiled modes spent")
        proposal = self.adviser.propose(frame, 1)
        d = proposal.decision
        keys = self.adviser.table_keys(d.table)
        pick = None if d.best is None else keys[d.best]
        if (hopeless := unreachable_caps(d, self.adviser.goal)) is not None:
            return self._stop(frame, d, hopeless, proposal.model)
        confirmed = self._confirmed(measured_s, d, keys)
        explained = self._rival_explained(measured_s, d, keys)  # called every round: it clears what it checks
        settled = self.settled(d) or explained
        pick_open = pick is not None and pick not in measured_s
        decided = None if pick_open or d.best is None or d.rival_gain >= NEGLIGIBLE_RIVAL_GAIN else (
            f"the pick is measured and no unprofiled mode may beat it (expected gain {d.rival_gain:.2%})")
        if confirmed or decided or (settled and not pick_open):
            return self._stop(frame, d, confirmed or decided or settled, proposal.model)
        if proposal.modes.empty:
            return self._stop(frame, d, "every candidate mode is profiled", proposal.model)
        nxt, reason = proposal.modes.iloc[0], str(proposal.modes.iloc[0]["reason"])
        if settled:
            # Intervals calibrated near the noise floor are narrow before the pick is measured, and a
            # predicted pick can still be a few % off (real replay: ResNet-18 min-energy stopped 4.1% off).
            nxt, reason = d.table.iloc[d.best], "measures the pick before stopping (its interval is a prediction's)"
            self._confirming = (pick, float(nxt["epoch_time_s"]))
        elif d.best is not None and d.time_width_rel < self.target_width_rel and d.top_rival is not None:
            # Only a rival's expected gain holds the stop back: measuring that rival settles it, since a
            # profiled mode no longer counts as one that may beat the recommendation.
            nxt = d.table.iloc[d.top_rival]
            reason = f"settles the stop: the unprofiled mode likeliest to beat the pick (gain {d.rival_gain:.1%})"
            self._settling = (keys[d.top_rival], float(nxt["epoch_time_s"]))
        mode = {"mode": nxt["mode"], **{k: float(nxt[k]) for k in MODE_FIELDS}}
        self._record(Step(tuple(frame["mode"].astype(str)), d, mode, reason, None,
                          service.provenance(proposal.model)))
        return mode

    def settled(self, d: Decision) -> str | None:
        """Why the decision ``d`` needs no more profiling (None when it does): the recommended mode's time
        interval is narrower than the target and no unprofiled mode is expected to beat it by MAX_RIVAL_GAIN."""
        if d.best is None or d.time_width_rel >= self.target_width_rel or d.rival_gain > MAX_RIVAL_GAIN:
            return None
        return (f"recommended mode's time interval {d.time_width_rel:.1%} wide "
                f"< target {self.target_width_rel:.1%}, "
                f"no unprofiled mode expected to beat it by more than {d.rival_gain:.1%}")

    def _confirmed(self, measured_s: Mapping[tuple[float, ...], Any], d: Decision,
                   keys: Sequence[tuple[float, ...]]) -> str | None:
        """Why the stop holds once the pick measured to confirm it (see :meth:`next_mode`) lies within
        ``INTERVAL_NOISE_FLOOR`` of the prediction that settled it (``measured_s``: epoch s by knobs key;
        ``keys``: :func:`mode_keys` of ``d``'s table), and ``d``'s pick is still that mode or a neighbour no profiling could tell from it
        (:meth:`_indistinct_neighbour`)."""
        confirming, self._confirming = self._confirming, None
        if confirming is None or d.best is None:
            return None
        t = measured_s.get(confirming[0])
        if t is None or not t > 0 or abs(math.log(t / confirming[1])) > INTERVAL_NOISE_FLOOR:
            return None
        agreed = (f"the pick measured {t:.4g} s/epoch, within the run-to-run noise of the "
                  f"{confirming[1]:.4g} s that settled the stop")
        if keys[d.best] == confirming[0]:
            return agreed
        neighbour = self._indistinct_neighbour(d, keys, confirming[0], d.best)
        return None if neighbour is None else f"{agreed}; the new pick is {neighbour}"

    def _rival_explained(self, measured_s: Mapping[tuple[float, ...], Any], d: Decision,
                         keys: Sequence[tuple[float, ...]]) -> str | None:
        """Why the stop holds once the rival profiled to settle it (see :meth:`next_mode`) measured within
        ``INTERVAL_NOISE_FLOOR`` of its prediction (it beat the pick or not), while the unprofiled rival now
        likeliest to beat the pick is a neighbour no profiling could tell from it (:meth:`_indistinct_neighbour`):
        the measurement answered the neighbour's case too. Otherwise a flat objective sends the loop
        measuring rival after rival of the same gain (twin MobileNetV3 min-energy on Orin Nano over the whole
        space: the budget ran out on CPU clocks 883 and 730 MHz beside the pick's 806). None when it does not
        hold."""
        settling, self._settling = self._settling, None
        if settling is None or d.best is None or d.top_rival is None:
            return None
        t = measured_s.get(settling[0])
        if t is None or not t > 0 or abs(math.log(t / settling[1])) > INTERVAL_NOISE_FLOOR:
            return None
        neighbour = self._indistinct_neighbour(d, keys, settling[0], d.top_rival)
        if neighbour is None:
            return None
        became = keys[d.best] == settling[0]
        return (f"the rival measured {t:.4g} s/epoch, within the run-to-run noise of its {settling[1]:.4g} s, "
                f"and {'is now the pick' if became else 'did not beat the pick'}; the rival likeliest to beat "
                f"it now is {neighbour}")

    def _indistinct_neighbour(self, d: Decision, keys: Sequence[tuple[float, ...]], measured: tuple[float, ...],
                              position: int) -> str | None:
        """Why mode ``position`` of ``d``'s table (the pick, or the rival likeliest to beat it) is as good as
        decided by the mode just measured (``measured``: its key among ``keys``, those of ``d``'s table), or None: the two differ in one knob,
        their predicted time and objective lie within the run-to-run noise floor of each other, and the
        pick's time interval is narrower than the target. A flat objective (modes a clock step apart,
        tenths of a % apart) otherwise sends the loop measuring neighbour after neighbour (twin LeNet-5
        min-energy over the whole space: three picks in a row); modes apart in more knobs may be predicted
        alike and measure apart (real ResNet-18: c and b, 0.3% apart in energy, b's time 6% off), so they
        are measured."""
        if d.time_width_rel >= self.target_width_rel:
            return None
        if measured not in keys:
            return None
        knobs = d.table[list(MODE_FIELDS)].to_numpy(dtype=float)
        i, b = keys.index(measured), position
        if int(np.sum(~np.isclose(knobs[i], knobs[b]))) > 1:
            return None
        columns = dict.fromkeys(("epoch_time_s", OBJECTIVES[self.adviser.goal.objective]))
        apart = {c: abs(math.log(float(d.table[c].iloc[b]) / float(d.table[c].iloc[i]))) for c in columns}
        if not all(v <= INTERVAL_NOISE_FLOOR for v in apart.values()):
            return None
        return ("one knob from it, within that noise in "
                + " and ".join(f"{c} ({v:.1%})" for c, v in apart.items()))

    def _record(self, step: Step) -> None:
        self.steps.append(step)
        if self.log is not None:
            self.log(self.describe(step))

    def _stop(self, rows: pd.DataFrame, decision: Decision | None, why: str,
              model: WorkloadModel | None = None) -> None:
        """Record the last round (``decision`` made by ``model``) and stop; the budget stop passes neither
        (None), and they are fitted and decided here."""
        if decision is None:
            table, open_ = self.adviser.decision_set(rows)
            model = self.adviser.fit_model(rows)
            decision = self.adviser.decide(model, table, open_)
            # Only the budget stops without a decision: say when the form misses the rows, which keeps the
            # intervals wide however many modes are profiled.
            note = lack_of_fit_note(model)
            why = why if note is None else f"{why}; {note}"
        self._record(Step(tuple(rows["mode"].astype(str)), decision, None, None, why, service.provenance(model)))
        return None

    def record(self) -> dict[str, Any]:
        """What ``profile --adaptive`` keeps in its sidecar (``adaptive``), so a reader can tell later why these
        modes were profiled: the settings (caps in W and s, widths relative), the modes profiled first and why,
        and per round (:meth:`step_record`) the mode picked and why, or why the loop stopped."""
        goal = self.adviser.goal
        start = self.start_modes()
        plan = "the candidates'" if self._candidates_given else "the device's"
        return {
            "budget": self.budget, "objective": goal.objective, "max_power_w": goal.max_power_w,
            "max_epoch_time_s": goal.max_epoch_time_s, "confidence": goal.confidence,
            # The sidecar's keys (a file users keep) stay the flag's name; the Python names carry _rel.
            "target_width": self.target_width_rel, "max_rival_gain": MAX_RIVAL_GAIN,
            "candidates": len(self.adviser.candidates),
            "start": {"modes": [str(m) for m in start["mode"]],
                      "why": "given with --modes" if self._start_given
                      else f"the first {len(start)} modes of {plan} D-optimal plan"},
            "steps": [self.step_record(step) for step in self.steps],
            "stop": self.steps[-1].stop if self.steps else None,
        }

    def step_record(self, step: Step) -> dict[str, Any]:
        """One round as data: the modes profiled, the recommended mode's predicted intervals (s, W, J) and the
        decision's widths that drove the pick or the stop, the fit's provenance, and :meth:`describe`'s line."""
        d = step.decision
        recommended = None
        if d.best is not None:
            row = d.table.iloc[d.best]
            recommended = {"mode": str(row["mode"]), **{k: float(row[k]) for k in MODE_FIELDS},
                           **{c: float(row[c]) for c in service.PREDICTION_COLUMNS if c in row.index},
                           "time_width": d.time_width_rel, "objective_width": d.objective_width_rel,
                           "rival_gain": d.rival_gain, "uncertainty": d.uncertainty}
        return {"profiled": list(step.profiled), "recommended": recommended,
                "no_pick": d.reason if d.best is None else None, "next_mode": step.next_mode,
                "reason": step.reason, "stop": step.stop, "model": step.model, "line": self.describe(step)}

    def describe(self, step: Step) -> str:
        """One line per round for people (standard error)."""
        d = step.decision
        head = f"after {len(step.profiled)} mode(s) [{', '.join(step.profiled)}]: "
        if d.best is None:
            head += f"no mode meets the caps ({d.reason})"
        else:
            b = d.table.iloc[d.best]
            head += (f"recommended {b['mode']} {_objective_first(b, self.adviser.goal)} s/epoch "
                     f"[{b['epoch_time_s_low']:.4g}, "
                     f"{b['epoch_time_s_high']:.4g}] (width {d.time_width_rel:.1%}; a rival may gain "
                     f"{d.rival_gain:.1%})")
        tail = f"; stop: {step.stop}" if step.stop else f"; next {step.next_mode['mode']}: {step.reason}"
        return head + tail


def make_chooser(device_id: str, start: Sequence[Mapping[str, Any]] | None, *, budget: int,
                 objective: str = DEFAULT_OBJECTIVE, max_power_w: float | None = None,
                 max_epoch_time_s: float | None = None, confidence: float = DEFAULT_CONFIDENCE,
                 target_width: float = DEFAULT_TARGET_WIDTH_REL, candidates: pd.DataFrame | None = None,
                 log: Callable[[str], None] | None = None) -> AdaptiveChooser:
    """The chooser ``jetpredict profile --adaptive`` drives, from its flags (``start``: the ``--modes`` to
    profile first, as mode dicts or objects with ``as_dict()``; None = the plan's first modes)."""
    first = None
    if start is not None:
        first = pd.DataFrame([m.as_dict() if hasattr(m, "as_dict") else dict(m) for m in start])
    goal = Goal(objective, max_power_w, max_epoch_time_s, confidence)
    return AdaptiveChooser(resolve_device(device_id), goal, budget, target_width, candidates, start=first, log=log)
