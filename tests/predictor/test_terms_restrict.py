"""The non-negative restriction sampled for several fits at once gives each fit's own values, bit for bit;
the epoch-time ceiling is the rows' own."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from jetpredict.models import profile_rows
from jetpredict.models.errors import InputError
from jetpredict.predictor import terms


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


def test_epoch_ceiling_is_the_rows_own():
    # The fit refuses an epoch past the rows' own ceiling, as the rows' check does.
    row = {"device": "agx-xavier", "workload": "w", "mode": "m", "cpu_cores": 8, "cpu_mhz": 2265.6,
           "gpu_mhz": 1377, "emc_mhz": 2133, "num_workers": 4, "batch_size": 16, "minibatches_per_epoch": 100,
           "epoch_time_s": profile_rows.MAX_TIME_S * 1.01, "source": "measured"}
    with pytest.raises(InputError, match="epoch_time_s"):
        profile_rows.validate_records([row])
    with pytest.raises(InputError, match="epoch_time_s"):
        terms.check_rows(pd.DataFrame([row]))
