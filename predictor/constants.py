"""Every calibrated, tuned or hand-set number of the predictor's fit, each defined once, here.

Each constant carries a one-line description (units) and a tag ``[E#]``: its entry in
``docs/model-evidence.md`` gives the evidence (which real data, which figures, which bench shows them),
the variants tried and dropped, and the commands that reproduce them. A changed value changes predictions:
bump ``model.MODEL_VERSION`` and rerun ``python3 bench/real_cv.py`` (the interval scales:
``python -m tools.calibrate_intervals``).

Not here (not calibrated): term and column lists, ``model.MODEL_VERSION`` and the input limits
``terms.MIN_EPOCH_TIME_S`` / ``MAX_EPOCH_TIME_S``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

# -- measurement noise ----------------------------------------------------------------------------------
#: Prior relative noise of one profiled epoch time (share of the time). [E1]
TIME_NOISE_REL = 0.025
#: Prior relative noise of one profiled mean power reading (share of the power). [E1]
POWER_NOISE_REL = 0.03
#: Weight (rows) of the prior noise level against a fit's residuals in its noise estimate. [E1]
NOISE_PRIOR_ROWS = 4.0
#: Floor of a reference's time noise, the RMS relative residual of its sweeps' fits (share). [E1]
REFERENCE_TIME_NOISE_FLOOR = 0.015
#: Floor of the relative noise of a new epoch's time in the intervals (share). [E1]
INTERVAL_NOISE_FLOOR = 0.03
#: Floor of the relative noise of a new mean power reading in the intervals (share): the ~5% the published
#: sweeps scatter around any smooth power model (0.04 before 2026-12-05). [E1]
POWER_NOISE_FLOOR = 0.05
#: Floor of the same noise in watts: the real sweeps' power residuals are about as many watts at 6 W as at
#: 30 W (RMS 0.3-0.55 W in-sample for LeNet-5, ResNet-18 and MobileNetV3), so a low-power workload's
#: relative noise is larger. [E1]
POWER_NOISE_FLOOR_W = 0.35
#: RMS of ln(predicted / measured epoch time) over a fit's own profiled rows above which the fit is said not
#: to fit them: twice the interval noise floor; the real sweeps' fits stay <= 4.4% (every design of 2-4 modes). [E1]
LACK_OF_FIT_REL = 2 * INTERVAL_NOISE_FLOOR

# -- feature shapes ---------------------------------------------------------------------------------------
#: Generic DVFS curve: rail voltage below the knee, as a share of the rail's top voltage. [E2]
V_MIN_REL = 0.5
#: Generic DVFS curve: the knee clock, as a share of the domain's top clock. [E2]
KNEE_REL = 0.5
#: GPU kernel mix: mean of ln(memory time / compute time) at equal GPU and effective EMC MHz (ln units). [E3]
MEM_LOG_MU = 0.25
#: GPU kernel mix: SD of that log-ratio over the step's memory traffic (ln units). [E3]
MEM_LOG_SIGMA = 1.0
#: CPU work mix: mean of ln(memory time / core time) at equal CPU and effective EMC MHz (ln units). [E4]
CPU_MEM_LOG_MU = -0.25
#: CPU work mix: SD of that log-ratio (ln units). [E4]
CPU_MEM_LOG_SIGMA = 0.25
#: Memory clock the workload's traffic never gets (MHz): time terms run on ``f_emc - EMC_OVERHEAD_MHZ``, at
#: most half the clock (refresh and the SoC's other memory clients take a roughly fixed bandwidth). [E4]
EMC_OVERHEAD_MHZ = 250.0

# -- core contention --------------------------------------------------------------------------------------
#: Contention constants searched for a reference and implied by a workload's own rows (dimensionless). [E5]
KAPPA_GRID = np.round(np.arange(0.0, 2.01, 0.125), 3)
#: Contention constants (CPU, pipeline) of measured rows under a simulated reference (dimensionless). [E5]
MEASURED_KAPPAS = (1.0, 1.0)
#: Factors on the contention constants whose refits span the model-form variants (a 90% range). [E5]
KAPPA_FACTORS = (0.5, 1.3)
#: The coverage of that range: the variants' spread about their mean over its two-sided normal quantile
#: (``model.z_of``, the SDs its half-width spans) is the model form's SD.
KAPPA_FACTORS_COVERAGE = 0.9

# -- time prior -------------------------------------------------------------------------------------------
#: Floor of a time term's prior SD (share of the epoch at the anchor mode). [E6]
SHARE_SD_FLOOR = 0.6
#: Prior SD of the clock-independent ``one`` term when the rows vary a clock (share of the epoch). [E6]
ONE_SHARE_SD = 0.1

# -- power prior ------------------------------------------------------------------------------------------
#: Floor of a dynamic-power coefficient's prior SD, as a share of the rows' mean dynamic power. [E7]
POWER_SD_SHARE = 0.5
#: Range of the factor scaling the reference's dynamic-power prior to the rows' level (dimensionless). [E7]
POWER_LEVEL_RANGE = (0.05, 20.0)
#: Floor of a reference's dynamic-power coefficient SD, as a share of its mean. [E7]
POWER_SD_FLOOR_REL = 0.35
#: Floor of a reference's dynamic-power coefficient SD (W). [E7]
POWER_SD_FLOOR_W = 0.5
#: Floor of the relative noise of a reference's base-power fit (share). [E7]
BASE_NOISE_FLOOR = 0.03
#: A workload without its own power readings: the reference's base and power noise times this. [E7]
UNMEASURED_POWER_SD_FACTOR = 2.0
#: A workload without its own power readings: SD (ln units) of its level of dynamic power against the
#: reference's, shared by every term (real workloads differ up to 6x at one mode). [E7]
UNMEASURED_POWER_LEVEL_SD = 1.0
#: The base-power ratio's prior at 1 is worth this many rows in its mean ... [E7]
BASE_RATIO_PRIOR_ROWS = 1.0
#: ... and this many rows at the reference's base noise in its SD. [E7]
BASE_NOISE_PRIOR_ROWS = 2.0
#: Highest progress rate (epoch time at the fastest preset / at the mode) power scales with. [E7]
MAX_PROGRESS_RATE = 2.0
#: Floor of the relative noise of a reference's dynamic-power fit (share). [E7]
DYNAMIC_POWER_NOISE_FLOOR = 0.02
#: Without measured base power: the base as a share of the sweeps' lowest mean power. [E7]
UNMEASURED_BASE_SHARE = 0.3
#: Without measured base power: the relative SD of that base. [E7]
UNMEASURED_BASE_SD = 0.25
#: Without measured power: the dynamic-power split over the terms (GPU, EMC, CPU, constant). [E7]
FALLBACK_POWER_SPLIT = (0.4, 0.2, 0.2, 0.2)
#: Without measured power: the dynamic power, as a share of the module power budget. [E7]
FALLBACK_POWER_SHARE = 0.25
#: Without measured power: the module power budget (W) of a device whose catalogue gives none. [E7]
FALLBACK_MODULE_POWER_W = 20.0
#: Without measured power: the relative noise of the generic power model (share). [E7]
FALLBACK_POWER_NOISE_REL = 0.15

# -- regime -----------------------------------------------------------------------------------------------
#: RMS difference of stall and compute shares (of the epoch) that cuts a workload's weight to e^-1/2. [E8]
REGIME_SIMILARITY_SCALE = 0.1
#: Distance (in REGIME_SIMILARITY_SCALE units) beyond which no reference workload describes the rows. [E8]
REGIME_NEAR = 2.0

# -- extrapolation ----------------------------------------------------------------------------------------
#: Relative SD per extrapolation unit (knob's share of the output x ln-distance outside its range). [E9]
EXTRAPOLATION_REL_SD: Mapping[str, float] = {"time": 0.10, "power": 0.05, "energy": 0.05}
#: Log-distance beyond which a knob counts as outside its profiled range (ln units). [E9]
OUTSIDE_TOLERANCE_LN = 0.01
#: Widest interval half-width (ln units: a factor 1000 either way). [E9]
MAX_LOG_HALF_WIDTH = float(np.log(1000.0))
#: Regime evidence beyond the reference workloads' span that widens nothing (shares; ln ratio). [E10]
REGIME_TOLERANCE: Mapping[str, float] = {"stall_share": 0.02, "cpu_share": 0.18, "core_contrast": 0.13}
#: Cap of the out-of-regime factor on EXTRAPOLATION_REL_SD: time's SD then is 1/sqrt(12) per unit. [E10]
REGIME_FACTOR_MAX = 1.0 / np.sqrt(12.0) / EXTRAPOLATION_REL_SD["time"]

# -- cross-device -----------------------------------------------------------------------------------------
#: Extra relative SD of a cross-device prediction made through device physics alone (share). [E12]
CROSS_DEVICE_REL_SD = 0.12


# -- interval scales --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class IntervalScales:
    """Multipliers of the model's own relative SD (posterior and model form) per output; the run-to-run
    noise and the extrapolation terms are left as they are. [E11]"""

    time: float = 1.0
    power: float = 1.0
    energy: float = 1.0
    #: Multiplier (>= 1) of ``EXTRAPOLATION_REL_SD`` for a workload outside the reference's regime
    #: (``regime.regime_factor``); 1 inside it.
    extrapolation: float = 1.0

    def in_regime(self) -> IntervalScales:
        """The scales that apply: as calibrated inside the references' regime; outside it (``extrapolation``
        > 1) none narrows the model's own SD below 1: the calibration does not reach the workload. [E11]"""
        if self.extrapolation <= 1.0:
            return self
        return replace(self, time=max(self.time, 1.0), power=max(self.power, 1.0), energy=max(self.energy, 1.0))


#: Designs of this many profiled modes or more share one set of scales: the 3-mode stratum alone is too thin
#: for two calibrating workloads (MobileNetV3's 3-mode power scale from the other two: 0.45, against 1.05 at
#: 4 modes and 1.1 from all three; its intervals then held 86% of its held-out values). [E11]
POOLED_FROM_MODES = 3
#: Calibrated scales per number of profiled modes (``POOLED_FROM_MODES`` for more;
#: ``python -m tools.calibrate_intervals``). [E11]
INTERVAL_SCALES: Mapping[int, IntervalScales] = {
    1: IntervalScales(time=0.3, power=1.15, energy=0.4), 2: IntervalScales(time=0.35, power=1.2, energy=0.35),
    3: IntervalScales(time=0.35, power=0.8, energy=0.4)}
#: Share of a stratum's held-out real values (of its design sizes) the calibrated 90% intervals must hold. [E11]
POOLED_COVERAGE = 0.90
#: Share of each (target, reference, design size) cell's held-out real values they must hold. [E11]
CELL_COVERAGE = 0.90
#: Scales the calibration tries, smallest first (multipliers). [E11]
SCALE_GRID = np.round(np.arange(0.3, 3.001, 0.05), 2)


# -- cross-device transfer [E13]: set by hand, checked on bench/real_cv.py's real cross-device rows -----------
#: Per-clock throughput of one CPU core relative to NVIDIA Carmel (framework/launch-bound code), from
#: published per-GHz integer benchmark ratios. [E13]
CPU_PER_CLOCK = {"carmel": 1.0, "cortex-a57": 0.6, "cortex-a78ae": 1.3}
#: Share of its epoch at which a term counts as exercised by a reference workload. [E13]
MIN_TERM_SHARE = 0.03
#: RMS difference of profile signatures (shares, log time ratios) at which a reference workload's weight
#: falls to exp(-1/2). [E13]
SIMILARITY_SCALE = 0.05
#: Term weight (share-weighted, similarity-averaged) at which the measured factor fully replaces physics. [E13]
FULL_TRUST_SHARE = 0.15
#: Floor of the extra relative SD of reference-workload transfer (the shared sweeps are simulated). [E13]
REFERENCE_TRANSFER_SD_FLOOR = 0.07
#: Relative SD of a physics factor (published per-clock ratios are rough). [E13]
PHYSICS_FACTOR_SD = 0.2
#: Share of the shared workloads' mean dynamic power below which a power term keeps the physics factor
#: (a ratio of two near-zero coefficients is noise). [E13]
MIN_POWER_TERM_SHARE = 0.05
#: A derived reference (a device without sweeps): its base-power noise is the source's times this, at
#: least the floor, and each dynamic-power SD at least this share of its mean (moved by spec ratios). [E13]
DERIVED_BASE_NOISE_FACTOR = 2.0
DERIVED_BASE_NOISE_FLOOR = 0.15
DERIVED_POWER_SD_SHARE = 0.3
