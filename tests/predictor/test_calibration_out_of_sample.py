"""Cells that calibrate one workload's interval scales out of sample: none of its real rows in them."""

from __future__ import annotations

import pytest
from jetpredict.predictor import calibration

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
