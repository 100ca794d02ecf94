"""validate_records compares rows with each other (mode_conflicts) only when no row has a problem; a caller
that found problems of its own in the rows (the service's JSON cell types) turns the comparison off with
``compare=False`` and gets each row's own problems, named as the CLI names them."""

from __future__ import annotations

import pytest
from jetpredict.models.profile_rows import INDEX_NAMES, ProfileRowsError, validate_records


def _row(**changes: object) -> dict[str, object]:
    row: dict[str, object] = {
        "device": "orin-agx", "workload": "mobilenetv3-gld23k", "mode": "MAXN", "cpu_cores": 12,
        "cpu_mhz": 2201.6, "gpu_mhz": 1300.5, "emc_mhz": 3199, "batch_size": 16,
        "minibatches_per_epoch": 1000, "epoch_time_s": 60.0}
    return {**row, **changes}


def test_rows_that_conflict_are_refused_by_default_and_read_without_the_comparison():
    rows = [_row(), _row(epoch_time_s=120.0)]  # one mode measured 2x apart
    with pytest.raises(ProfileRowsError, match="conflicting rows") as caught:
        validate_records(rows, names=INDEX_NAMES)
    assert [(p.line, p.field) for p in caught.value.problems] == [(2, "epoch_time_s")]
    frame = validate_records(rows, names=INDEX_NAMES, compare=False)
    assert list(frame["epoch_time_s"]) == [60.0, 120.0]


def test_without_the_comparison_each_rows_own_problems_are_still_named():
    rows = [_row(epoch_time_s=-5), _row(), _row(epoch_time_s=120.0, gpu_mhz="fast")]
    with pytest.raises(ProfileRowsError) as caught:
        validate_records(rows, compare=False)
    assert [(p.line, p.field, p.message) for p in caught.value.problems] == [
        (1, "epoch_time_s", "must be > 0 s, got -5"), (3, "gpu_mhz", "must be a number (MHz), got 'fast'")]
