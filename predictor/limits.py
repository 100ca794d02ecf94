"""Limits and choices of the predictor's operations, defined once.

The service checks them, and the HTTP schemas (``api.schemas``) and the command line import them, so a
request the schema accepts is one the service accepts. No other imports: this module is cheap to load.
"""

from __future__ import annotations

#: Objective name -> the predicted column it minimises.
OBJECTIVES: dict[str, str] = {"min-time": "epoch_time_s", "min-energy": "epoch_energy_j"}
#: What every prediction answer says it rests on: the reference and workload rows' provenance
#: (``published`` / ``measured`` / ``simulated``), what its stall/compute split comes from
#: (:data:`SPLIT_SOURCES`), the distinct modes profiled and the model's form.
PROVENANCE_FIELDS: tuple[str, ...] = ("reference_source", "workload_source", "split_source", "profiled_modes",
                                      "model_version")
#: What every answer from a fitted model says of the fit besides its provenance, as ``jetpredict fit`` does
#: (``predictor.fit_check.fit_caveats``): the knobs its profiled modes do not separate, its rows' scatter.
FIT_CAVEAT_FIELDS: tuple[str, ...] = ("aliased_knobs", "rows_scatter_rel")
#: ``split_source``, best first: the workload's own stall and compute columns were fitted (``components``), or
#: only its epoch totals were, and the fit's stall/compute split (how the epoch follows each knob) is the
#: fitted terms' attribution, shaped by the reference workloads (``epoch_totals``; on the real sweeps a stall
#: several times off: README).
SPLIT_SOURCES: tuple[str, ...] = ("components", "epoch_totals")
#: The objective when none is given (``plan --after``, ``profile --adaptive``).
DEFAULT_OBJECTIVE = "min-time"
#: ``plan``'s default candidate region (:mod:`jetpredict.predictor.planning`): every clock at least this share
#: of its maximum, at least this many cores online.
MIN_CLOCK_SHARE = 0.5
MIN_CORES = 2
#: Adaptive profiling (``profile --adaptive``) stops only once no rival's expected gain over the recommended
#: mode exceeds this share of its objective (E[max(0, ln best - ln rival)], the rival meeting the caps once
#: profiled, by its interval's upper end as ``recommend`` holds them: ``decision._meets_caps``): a narrow
#: interval on a mode that another, unprofiled mode probably beats is not a decision (one profiled mode is
#: always "narrow"). Two modes predicted alike, each with the 3% noise floor, expect ~1.7%: below the bar,
#: so near-ties stop.
MAX_RIVAL_GAIN = 0.03
#: Default stopping width of the recommended mode's time interval, relative ((high - low) / point). A
#: profiled mode's own interval is about 2 x 1.645 x the 3% run-to-run noise floor (~10%) wide, so the
#: target must lie above that to be reachable; 12% is a decision ~4% either side of the point. Real replay
#: (bench/adaptive_replay.py, 12 runs): 0.15 stopped ResNet-18 min-energy after 2 modes 5.2% off (8 of 12
#: within 3% at the stop), 0.12 after 3 modes within 1% (11 of 12), 0.10 ran every run to 7-10 modes. With
#: the interval scales of the memory-waiting twin, 0.12 stopped it 4.1% off on an unprofiled pick, so the
#: loop now also measures the pick before it stops (12 of 12 within 3%, at most 6 modes).
DEFAULT_TARGET_WIDTH_REL = 0.12
#: Modes in one user-supplied table or request. The largest catalogue space (AGX Xavier) has 29,232
#: modes; a table far larger is a mistake or abuse, and would cost seconds of work per request.
MAX_MODES = 50_000
#: A mode list this short is predicted directly while its device's every-mode prediction is not computed
#: (predicting 1,000 modes takes 1.6 ms, all 29,232 of AGX Xavier 21.1-32.1 ms:
#: bench/results/predict_speed.md); a longer one costs as ``"all"`` does (heavy work in the HTTP service,
#: under its every-mode rate limit).
DIRECT_MODES = 1_000
#: Clients in one fleet plan (the plan costs one all-modes prediction per device *type*, so the limit is
#: about response size: 10,000 client rows are 8-12 MB of JSON, ~0.1 MB gzipped; the largest valid request,
#: 10,000 clients with 200-character ids, is 2.4 MB, inside the HTTP body limit ``api.config`` derives from it).
MAX_CLIENTS = 10_000
#: Epochs for time/energy-to-accuracy (and local epochs of a fleet round).
MAX_EPOCHS = 1_000_000
#: Default coverage of every interval, and the level at which caps and deadlines must hold: a cap is
#: met when the upper end of the two-sided ``confidence`` interval is within it.
DEFAULT_CONFIDENCE = 0.9
#: Accepted confidence range: below 0.5 an "upper bound" is below the median; 0.999 is about as far as
#: a normal tail on a few profiled modes can be believed.
MIN_CONFIDENCE, MAX_CONFIDENCE = 0.5, 0.999
#: Modes one profiling plan may propose (``plan --budget``, with or without ``--after``, and ``profile
#: --adaptive --budget``). Profiling a mode takes ~25 s at the default minibatches (``est_profile_s``; more
#: for slow modes or longer runs), so 100 modes is most of an hour of measuring, far past where a plan stops
#: paying (the README's plans use 4-16). With ``--after`` each proposed mode costs a refit per short-listed
#: candidate (~0.6 s on AGX Xavier), so the cap also keeps that command near a minute rather than hours. A
#: plan also cannot exceed its candidate modes (2,940 in AGX Xavier's planning region), checked where the
#: candidates are known (:func:`jetpredict.predictor.planning.d_optimal`).
MAX_PLAN_BUDGET = 100


def percent(level: float) -> str:
    """A confidence level (a fraction, 0..1) as a percentage with no rounding that changes it: 0.9 ->
    ``90%``, 0.999 -> ``99.9%`` (``:.0%`` printed the latter as ``100%``, a level nobody can ask for)."""
    # 6 significant digits hide the float noise of the product (0.9 * 100 = 90.00000000000001).
    return f"{level * 100:g}%"
#: How a fleet plan starts the reason of a client no mode gets within the deadline (``cannot meet
#: deadline_s=600: ...``); the Flower plans restate that reason in the node's own deadline and time.
DEADLINE_MISS_PREFIX = "cannot meet deadline_s="
