"""What aliased knobs cost the intervals: a refit with one mode that separates them against one that does not."""

from __future__ import annotations

import numpy as np
import pytest
from jetpredict.models.catalogue import MODE_FIELDS, load_device
from jetpredict.predictor import service
from jetpredict.predictor.aliasing import AliasWidening, alias_widening, separating_mode
from jetpredict.predictor.bundled import fit_workload

XAVIER = load_device("agx-xavier")


def _modes(rows, letters: str):
    return rows[rows["mode"].isin(list(letters))].reset_index(drop=True)


def test_the_separating_mode_lies_inside_the_profiled_ranges_and_off_the_pairs_line(lenet):
    efij = _modes(lenet, "efij")
    model = fit_workload(efij, XAVIER)
    assert model.aliased_pairs() == [("cpu_mhz", "gpu_mhz")]
    modes = service.resolve_modes(XAVIER, "all")
    sep = separating_mode(efij, ("cpu_mhz", "gpu_mhz"), modes, dict(model.profiled_ranges))
    mode = modes.iloc[sep]
    for knob in MODE_FIELDS:
        low, high = model.profiled_ranges[knob]
        assert low * 0.99 <= mode[knob] <= high * 1.01, knob
    # e, f profile CPU 2100 with GPU 900, i, j CPU 2265 with GPU 1377: the mode pairs the top CPU clock
    # with the low GPU clock, next to f (2 cores, 2100 / 900 / 1600).
    assert mode["cpu_mhz"] > 2200 and mode["gpu_mhz"] < 1000
    assert (mode["cpu_cores"], mode["emc_mhz"]) == tuple(efij.set_index("mode").loc["f", ["cpu_cores", "emc_mhz"]])


def test_the_alias_widens_the_intervals_more_the_fewer_modes_separate_anything(lenet):
    efij = _modes(lenet, "efij")
    (cost,) = alias_widening(fit_workload(efij, XAVIER), efij, XAVIER)
    assert cost.knobs == ("cpu_mhz", "gpu_mhz")
    # Measured (mech-14, against an unprofiled mode on the pair's line): time 1.02x median (up to 1.18x),
    # energy 1.02x (against a repeat of the nearest profiled mode, before repeats merged: 1.03x, 1.25x,
    # 1.04x); the noise and extrapolation terms of the intervals do not depend on the split.
    assert cost.on_line_control
    assert cost.median["epoch_time_s"] == pytest.approx(1.02, abs=0.015)
    assert cost.largest["epoch_time_s"] == pytest.approx(1.18, abs=0.06)
    assert cost.median["epoch_energy_j"] == pytest.approx(1.02, abs=0.015)
    bg = _modes(lenet, "bg")
    costs = {c.knobs: c for c in alias_widening(fit_workload(bg, XAVIER), bg, XAVIER)}
    # b -> g moves every clock at once (the cores stay): two pairs, the CPU / GPU split 1.27x median
    # against a third mode on their line (1.86x against the 2-mode fit itself: a third mode gains anyway).
    assert set(costs) == {("cpu_mhz", "gpu_mhz"), ("emc_mhz", "cpu_mhz")}
    assert costs[("cpu_mhz", "gpu_mhz")].median["epoch_time_s"] == pytest.approx(1.27, abs=0.1)
    assert all(np.isfinite(c.largest["epoch_time_s"]) for c in costs.values())


def test_nothing_is_reported_when_no_pair_is_aliased(lenet):
    full = _modes(lenet, "abcdefghij")
    model = fit_workload(full, XAVIER)
    assert model.aliased_knobs() == {}
    assert alias_widening(model, full, XAVIER) == []
    one = _modes(lenet, "g")  # nothing varied: no pair (the extrapolation widening covers it)
    assert alias_widening(fit_workload(one, XAVIER), one, XAVIER) == []


def test_a_refit_that_fails_leaves_the_pair_out_and_the_fit_stands(lenet, monkeypatch):
    from jetpredict.models.errors import InputError
    from jetpredict.predictor import aliasing

    efij = _modes(lenet, "efij")
    model = fit_workload(efij, XAVIER)

    def refuse(*_args, **_kwargs):
        raise InputError("refused", "rows")

    monkeypatch.setattr(aliasing, "fit_workload", refuse)
    assert alias_widening(model, efij, XAVIER) == []


def test_without_an_unprofiled_mode_on_the_line_the_fit_itself_is_the_control_and_it_says_so(lenet, monkeypatch):
    from jetpredict.predictor import aliasing

    bg = _modes(lenet, "bg")
    model = fit_workload(bg, XAVIER)
    monkeypatch.setattr(aliasing, "on_line_mode", lambda *_args: None)
    costs = {c.knobs: c for c in alias_widening(model, bg, XAVIER)}
    cost = costs[("cpu_mhz", "gpu_mhz")]
    assert not cost.on_line_control and "the fit as it stands has" in cost.describe()
    # A third mode narrows a 2-mode fit whatever it separates: 1.86x against the fit, 1.27x on the line.
    assert cost.median["epoch_time_s"] == pytest.approx(1.86, abs=0.1)


def _widening(time: float, energy: float) -> AliasWidening:
    mode = {"mode": "s", "cpu_cores": 2, "cpu_mhz": 2265.6, "gpu_mhz": 905.25, "emc_mhz": 1600.0}
    return AliasWidening(("cpu_mhz", "gpu_mhz"), mode, {"epoch_time_s": time, "epoch_energy_j": energy},
                         {"epoch_time_s": time + 0.1, "epoch_energy_j": energy + 0.1})


def test_a_pair_that_costs_nothing_is_not_said_to_widen_the_intervals(lenet):
    pinned = _widening(0.95, 0.98)
    assert pinned.pinned and pinned.describe().startswith(
        "cpu_mhz with gpu_mhz: the profiled modes already pin the split (no wider intervals at the median): "
        "one more mode that keeps them together leaves time intervals 0.95x as wide")
    costly = [_widening(1.27, 1.1), _widening(0.98, 1.05)]  # wider in time, or in energy only
    assert not any(c.pinned or "pin the split" in c.describe() for c in costly)
    # It happens: LeNet-5 from b, h (every clock moves) -- the memory / CPU split costs nothing (0.75x at
    # mech-14), the CPU / GPU split 1.6x.
    bh = _modes(lenet, "bh")
    costs = {c.knobs: c for c in alias_widening(fit_workload(bh, XAVIER), bh, XAVIER)}
    assert costs[("emc_mhz", "cpu_mhz")].pinned and "already pin the split" in costs[("emc_mhz", "cpu_mhz")].describe()
    assert not costs[("cpu_mhz", "gpu_mhz")].pinned


def test_fit_and_predict_claim_no_wider_intervals_for_aliased_knobs(lenet, capsys):
    """The line naming the aliased knobs (fit and predict) makes no claim on the intervals: fit's own
    measure of the cost follows it, and it can be <= 1."""
    from jetpredict.predictor.cli import _log_fit_caveats

    efij = _modes(lenet, "efij")
    _log_fit_caveats(fit_workload(efij, XAVIER))
    err = capsys.readouterr().err
    assert "aliased knobs" in err and "cpu_mhz (moves with gpu_mhz)" in err and "wider" not in err
