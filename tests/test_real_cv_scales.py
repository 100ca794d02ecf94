"""bench/real_cv.py calibrates each target's interval scales without any of its rows (its coverage is
out of sample)."""

from __future__ import annotations

import importlib

import pytest
from jetpredict.predictor import calibration
from test_benches import bench_path  # noqa: F401 - the fixture, used by name below

from tests.predictor.test_calibration_out_of_sample import spy_real_references

pytestmark = pytest.mark.usefixtures("bench_path")


def test_each_targets_scales_come_from_cells_whose_references_leave_it_out(monkeypatch):
    real_cv = importlib.import_module("real_cv")
    seen = spy_real_references(monkeypatch)
    calls: list[tuple[set[str], set[str]]] = []  # per calibration: workloads scored, real ones in its references
    calibrate = calibration.calibrate

    def spy(cells):
        calls.append(({key[0] for key in cells}, set().union(*seen)))
        seen.clear()
        return calibrate(cells)

    monkeypatch.setattr(calibration, "calibrate", spy)
    scales = real_cv.out_of_sample_scales(sizes=(1,))
    assert set(scales) == set(real_cv.TARGETS) and len(calls) == len(real_cv.TARGETS)
    for scored, in_references in calls:
        (target,) = set(real_cv.TARGETS) - scored
        assert target not in in_references
