"""The non-negative restriction sampled for several fits at once gives each fit's own values, bit for bit;
the provenance kinds and the epoch-time ceiling are the rows' own."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from jetpredict.models import profile_rows
from jetpredict.models.errors import InputError
from jetpredict.predictor import limits, terms


def _gaussians() -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(5)
    out = []
    for p in (3, 4, 5, 1):
        a = rng.normal(size=(p, p))
        out.append((np.abs(rng.normal(size=p)) * 0.3, a @ a.T))
    out.append((np.array([0.1, 0.2]), 100 * np.array([[1.0, -0.995], [-0.995, 1.0]])))  # an aliased pair
    out.append((np.array([1.0, 2.0]), np.zeros((2, 2))))  # no axis to move along
    return out


def _one_at_a_time(coef: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """The sampler as it ran before the lockstep one (one Gaussian per loop): the oracle, kept here so the
    test does not compare the new code with itself."""
    values, vectors = np.linalg.eigh((cov + cov.T) / 2)
    keep = values > 1e-12 * max(float(values.max()), 0.0)
    axes = vectors[:, keep] * np.sqrt(values[keep])
    rng = np.random.default_rng(0)
    steps = np.zeros((terms.NON_NEGATIVE_CHAINS, axes.shape[1]))
    x = np.tile(np.maximum(coef, 0.0), (terms.NON_NEGATIVE_CHAINS, 1))
    kept = []
    for sweep in range(terms.NON_NEGATIVE_BURN_IN + terms.NON_NEGATIVE_SWEEPS):
        for i, axis in enumerate(axes.T):
            rest = x - steps[:, i, None] * axis
            up, down = axis > 0, axis < 0
            low = np.max(-rest[:, up] / axis[up], axis=1, initial=-np.inf)
            high = np.min(-rest[:, down] / axis[down], axis=1, initial=np.inf)
            step = terms._truncated_standard_normal(np.minimum(low, steps[:, i]), np.maximum(high, steps[:, i]),
                                                    rng.random(terms.NON_NEGATIVE_CHAINS))
            x = np.maximum(rest + step[:, None] * axis, 0.0)
            steps[:, i] = step
        if sweep >= terms.NON_NEGATIVE_BURN_IN:
            kept.append(x - coef)
    spread = np.concatenate(kept)
    return spread.T @ spread / len(spread)


def test_moments_sampled_together_equal_each_alone():
    together = terms.non_negative_moments(_gaussians())
    for (coef, cov), moment in zip(_gaussians(), together, strict=True):
        assert np.array_equal(moment, terms.non_negative_moment(coef, cov))
        assert np.array_equal(moment, _one_at_a_time(coef, cov))


def test_restrict_together_fills_each_fits_own_restriction():
    fits = [terms.TermFit(tuple(f"t{i}" for i in range(len(c))), c, v, 0.02) for c, v in _gaussians()]
    alone = [terms.TermFit(f.terms, f.coef, f.cov, f.noise_rel).non_negative for f in fits]
    terms.restrict_together(fits)
    for fit, own in zip(fits, alone, strict=True):
        assert "non_negative" in fit.__dict__ or fit._restricted_whole  # filled without sampling it again
        assert np.array_equal(fit.non_negative.cov, own.cov)


def test_trust_order_and_ceiling_are_the_rows_own():
    assert terms.least_trusted(["published", "simulated", "measured"]) == "simulated"
    assert terms.least_trusted(["published", "measured"]) == "measured"
    assert terms.least_trusted([]) == profile_rows.source_kind(None)
    # The fit refuses an epoch past the rows' own ceiling, as the rows' check does.
    row = {"device": "agx-xavier", "workload": "w", "mode": "m", "cpu_cores": 8, "cpu_mhz": 2265.6,
           "gpu_mhz": 1377, "emc_mhz": 2133, "num_workers": 4, "batch_size": 16, "minibatches_per_epoch": 100,
           "epoch_time_s": profile_rows.MAX_TIME_S * 1.01, "source": "measured"}
    with pytest.raises(InputError, match="epoch_time_s"):
        profile_rows.validate_records([row])
    with pytest.raises(InputError, match="epoch_time_s"):
        terms.check_rows(pd.DataFrame([row]))


#: One part's provenance, as service.provenance states it.
PART = {"reference_source": "published", "workload_source": "measured", "split_source": "components",
        "profiled_modes": 9, "model_version": "mech-17"}


def test_merged_provenance_is_the_weakest_of_every_part():
    weak = {**PART, "reference_source": "simulated", "split_source": "epoch_totals", "profiled_modes": 3}
    for parts in ([PART, weak], [weak, PART]):
        assert terms.merged_provenance(parts) == {"reference_source": "simulated", "workload_source": "measured",
                                                  "split_source": "epoch_totals", "profiled_modes": 3}


def test_a_part_silent_on_a_field_is_left_out_of_it_and_no_statement_is_none():
    silent = dict.fromkeys(PART)
    assert terms.merged_provenance([silent, {**PART, "profiled_modes": 4}, {"workload_source": "simulated"}]) == {
        "reference_source": "published", "workload_source": "simulated", "split_source": "components",
        "profiled_modes": 4}
    assert terms.merged_provenance([silent]) == terms.merged_provenance([]) == dict.fromkeys(
        ("reference_source", "workload_source", "split_source", "profiled_modes"))


def test_weakest_split_ranks_by_the_split_sources_order_and_an_unknown_one_as_the_weakest():
    best, weakest = limits.SPLIT_SOURCES[0], limits.SPLIT_SOURCES[-1]
    assert terms.weakest_split([best, weakest]) == terms.weakest_split([weakest, best]) == weakest
    assert terms.weakest_split([best, best]) == terms.weakest_split([]) == best
    # A value no jetpredict writes (a newer service's kind, a typo) claims no measured split.
    assert terms.weakest_split([best, "partial"]) == terms.weakest_split([None]) == weakest
