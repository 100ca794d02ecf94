"""Cells that calibrate one workload's interval scales out of sample: none of its real rows in them."""

from __future__ import annotations

import numpy as np
import pytest
from jetpredict.predictor import calibration
from jetpredict.predictor.constants import CELL_COVERAGE, POOLED_FROM_MODES

REAL = ("lenet5-mnist", "mobilenetv3-gld23k", "resnet18-cifar10")


def spy_real_references(monkeypatch) -> list[set[str]]:
    """Per fit from here on, the real (published) workloads in the reference it is fitted with (a reference
    built but not fitted with does not count)."""
    seen: list[set[str]] = []
    real_in: dict[int, tuple[object, set[str]]] = {}  # id -> (reference, kept alive so ids stay unique; its real)
    build, fit = calibration.build_reference, calibration.fit_with_reference

    def spy_build(rows, *args, **kwargs):
        ref = build(rows, *args, **kwargs)
        real_in[id(ref)] = (ref, set(rows[rows["source"].astype(str).str.startswith("published")]["workload"]))
        return ref

    def spy_fit(rows, ref, *args, **kwargs):
        seen.append(real_in.get(id(ref), (ref, set()))[1])  # a derived (moved) reference holds no real rows
        return fit(rows, ref, *args, **kwargs)

    monkeypatch.setattr(calibration, "build_reference", spy_build)
    monkeypatch.setattr(calibration, "fit_with_reference", spy_fit)
    return seen


def test_an_excluded_workload_is_neither_scored_nor_in_any_reference(monkeypatch):
    seen = spy_real_references(monkeypatch)
    cells = calibration.residual_cells(sizes=(1,), excluded=("lenet5-mnist",))
    assert {key[0] for key in cells} == {"mobilenetv3-gld23k", "resnet18-cifar10"}
    assert {key[1] for key in cells} == {"other real", "opposite regime", "other device"}
    # Each other workload's "other real" reference is the third workload alone.
    assert {"mobilenetv3-gld23k"} in seen and {"resnet18-cifar10"} in seen
    assert all("lenet5-mnist" not in workloads for workloads in seen)


def test_a_named_target_that_is_also_excluded_is_not_scored():
    cells = calibration.residual_cells(sizes=(1,), cases=("other real",),
                                       targets=("lenet5-mnist", "resnet18-cifar10"), excluded=("lenet5-mnist",))
    assert {key[0] for key in cells} == {"resnet18-cifar10"}


def test_without_exclusion_other_real_holds_the_other_two():
    real = calibration.real_targets()
    assert set(calibration.references(real, "lenet5-mnist")["other real"].workloads) == {
        "mobilenetv3-gld23k", "resnet18-cifar10"}
    only = calibration.references(real[real["workload"] != "resnet18-cifar10"], "lenet5-mnist", ("other real",))
    assert list(only) == ["other real"]  # only the asked reference is built
    assert set(only["other real"].workloads) == {"mobilenetv3-gld23k"}


def test_targets_of_one_computation_share_its_simulated_references(monkeypatch):
    """The simulated references do not hold the target: one :class:`SimulatedReferences` builds each once for
    every target (3 "other real", 2 twin regimes, 1 moved Xavier NX: 6 builds, not 9), and a fresh one per
    call builds them again (an edited CSV is read again)."""
    built = []
    build = calibration.build_reference
    monkeypatch.setattr(calibration, "build_reference", lambda rows, *a, **k: built.append(1) or build(rows, *a, **k))
    real, simulated = calibration.real_targets(), calibration.SimulatedReferences()
    refs = {t: calibration.references(real, t, simulated=simulated) for t in REAL}
    assert len(built) == 6 and all(list(r) == list(calibration.CASES) for r in refs.values())
    assert refs["mobilenetv3-gld23k"]["opposite regime"] is refs["resnet18-cifar10"]["opposite regime"]
    assert refs["lenet5-mnist"]["opposite regime"].workloads == ("resnet18-cifar10",)
    assert len({id(r["other device"]) for r in refs.values()}) == 1
    fresh = calibration.references(real, "lenet5-mnist", ("other device",))["other device"]
    assert len(built) == 7 and fresh is not refs["lenet5-mnist"]["other device"]


def test_a_device_without_simulated_sweeps_is_named(monkeypatch):
    monkeypatch.setattr(calibration, "read_simulated_rows", lambda device_id: None)
    with pytest.raises(FileNotFoundError, match="xavier-nx's simulated sweeps: no xavier-nx-simulated"):
        calibration.SimulatedReferences().other_device()


def test_every_cell_of_a_stratum_holds_its_own_coverage_not_only_the_pool():
    """One workload's misses may not hide in the pool of the others': 1,900 exact held-out values in one cell
    cover the pool at the smallest scale, yet the 100 that miss by 0.2 (ln) in the other cell set the scale,
    the smallest under which their cell's 90% intervals hold them (1.25, not the 0.65 the pool asks)."""
    exact, off = np.zeros((1900, 4)), np.zeros((100, 4))  # |ln(obs/pred)|, own SD, the rest, outside
    exact[:, 1] = off[:, 1] = 0.1
    off[:, 0] = 0.2
    cells = {(w, "ref", 4): {o: rows for o in calibration.OUTPUTS} for w, rows in (("a", exact), ("b", off))}
    got = calibration.calibrate(cells)[POOLED_FROM_MODES]
    assert calibration.coverage(got.time, off) >= CELL_COVERAGE > calibration.coverage(got.time - 0.05, off)
    assert got.time == got.power == got.energy == pytest.approx(1.25)


def test_a_workload_outside_the_references_regime_is_never_scored_narrower_than_its_own_sd():
    """Held-out rows of a workload outside the reference's regime count at a scale of at least 1, as
    ``IntervalScales.in_regime`` applies the scales: a calibration may not narrow what it never reached."""
    rows = np.array([[0.0, 0.1, 0.02, 1.0], [0.0, 0.1, 0.02, 0.0]])
    at_half, at_one = calibration.half_width(0.5, rows), calibration.half_width(1.0, rows)
    assert at_half[0] == pytest.approx(at_one[0]) and at_half[1] < at_one[1]
    assert calibration.half_width(2.0, rows)[0] > at_one[0]
