"""A device's reference CSV is read and checked once per process, and callers get their own copy."""

from __future__ import annotations

from jetpredict.predictor import reference


def test_reference_rows_are_read_once_and_copied(monkeypatch):
    calls = []
    real = reference.read_profile_csv

    def counting(path):
        calls.append(path)
        return real(path)

    monkeypatch.setattr(reference, "read_profile_csv", counting)
    reference._parsed.cache_clear()
    first = reference.read_reference_rows("nano")
    first.loc[:, "epoch_time_s"] = -1.0
    second = reference.read_reference_rows("nano")
    assert len(calls) == 1
    assert (second["epoch_time_s"] > 0).all()
    reference._parsed.cache_clear()
