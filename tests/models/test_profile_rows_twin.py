"""Rows the digital twin produced: simulated whatever their ``source`` cell says (a blank one is read as
simulated, a claim to be measured or published is refused); and the time limit of a row is per sample, so
the twin's rows at large batches on slow modes load while an epoch timed in milliseconds is still caught."""

from __future__ import annotations

import csv
import io

import pytest
from jetpredict.models.profile_files import read_profile_csv, read_profile_json
from jetpredict.models.profile_rows import (
    MAX_S_PER_SAMPLE,
    ProfileRowsError,
    plausibility_rules,
    validate_records,
)
from jetpredict.predictor.provenance import source_of

from jetpredict.cli import main

#: The lowest clocks of a Jetson Nano (a custom mode): the twin's slowest minibatches.
SLOW_NANO = "mode,cpu_cores,cpu_mhz,gpu_mhz,emc_mhz\nlow,1,102,76.8,204\n"


@pytest.fixture(scope="module")
def twin_rows(tmp_path_factory) -> list[dict[str, str]]:
    """The rows `jetpredict profile --device sim:agx-xavier` writes, as CSV records."""
    out = tmp_path_factory.mktemp("twin") / "x.csv"
    assert main(["profile", "--device", "sim:agx-xavier", "--workload", "lenet5-mnist", "--modes", "presets",
                 "--minibatches", "3", "--warmup", "1", "--out", str(out), "--no-progress"]) == 0
    with out.open(newline="") as f:
        return list(csv.DictReader(f))


def _csv(records: list[dict[str, str]], drop: str | None = None) -> io.StringIO:
    header = [k for k in records[0] if k != drop]
    out = io.StringIO()
    writer = csv.DictWriter(out, header, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(records)
    out.seek(0)
    return out


def test_the_twin_labels_its_rows(twin_rows):
    assert {r["source"] for r in twin_rows} == {"simulated"}
    assert {r["power_meter"] for r in twin_rows} == {"sim:agx-xavier"} and {r["accelerator"] for r in twin_rows} == {"sim"}


@pytest.mark.parametrize("how", ["blank", "dropped"])
def test_a_twin_row_without_a_source_is_simulated(twin_rows, how):
    records = [{**r, "source": ""} for r in twin_rows]
    df = read_profile_csv(_csv(records, drop="source" if how == "dropped" else None))
    assert set(df["source"]) == {"simulated"} and source_of(df) == "simulated"


def test_the_meter_or_the_accelerator_alone_marks_a_twin_row(twin_rows):
    only_meter = [{**r, "source": "", "accelerator": ""} for r in twin_rows]
    only_accel = [{**r, "source": "", "power_meter": ""} for r in twin_rows]
    assert set(read_profile_csv(_csv(only_meter))["source"]) == {"simulated"}
    assert set(read_profile_csv(_csv(only_accel))["source"]) == {"simulated"}


@pytest.mark.parametrize("claim", ["measured", "published: my lab", "Measured on a board"])
def test_a_twin_row_claiming_another_kind_is_refused(twin_rows, claim):
    rows = [{k: (None if v == "" else v) for k, v in r.items()} for r in twin_rows]
    rows[1]["source"] = claim
    with pytest.raises(ProfileRowsError) as err:
        read_profile_json({"rows": rows})
    errors = err.value.as_errors()
    assert list(errors) == ["rows.2.source"]  # JSON rows are numbered from 1 by read_profile_json
    assert "digital twin" in errors["rows.2.source"][0] and "must be simulated" in errors["rows.2.source"][0]
    assert "sim:agx-xavier" in errors["rows.2.source"][0]
    with pytest.raises(ProfileRowsError, match=r"line 3: source: .*must be simulated"):
        read_profile_csv(_csv([{**r, "source": claim} for r in twin_rows]))


def test_stored_twin_rows_keep_loading_as_simulated(twin_rows):
    """Rows a service stored before the rule load as they were stored, but as what they are."""
    rows = [{k: (None if v == "" else v) for k, v in r.items()} for r in twin_rows]
    stored = [{**rows[0], "source": "measured"}, {**rows[1], "source": None}]
    df = validate_records([*stored, *rows[2:]], stored=2)
    assert set(df["source"]) == {"simulated"}
    with pytest.raises(ProfileRowsError):  # the same rows arriving new are refused
        validate_records([*stored, *rows[2:]])


def test_a_measured_row_is_unchanged(twin_rows):
    rows = [{k: (None if v == "" else v) for k, v in r.items()} for r in twin_rows]
    real = [{**r, "source": None, "power_meter": "ina3221:VDD_IN", "accelerator": "cuda"} for r in rows]
    assert set(validate_records(real)["source"]) == {"measured"}


def test_the_twins_rows_at_batch_128_on_a_slow_nano_mode_load(tmp_path):
    modes = tmp_path / "low.csv"
    modes.write_text(SLOW_NANO)
    out = tmp_path / "n.csv"
    assert main(["profile", "--device", "sim:nano", "--workload", "mobilenetv3-small-gld23k", "--modes",
                 str(modes), "--batch-size", "128", "--minibatches", "3", "--warmup", "1", "--out", str(out),
                 "--no-progress"]) == 0
    row = read_profile_csv(out).iloc[0]
    assert row["batch_size"] == 128 and row["epoch_time_s"] / row["minibatches_per_epoch"] > 120


ROW = {"device": "nano", "workload": "w", "mode": "a", "cpu_cores": 4, "cpu_mhz": 1479, "gpu_mhz": 921.6,
       "emc_mhz": 1600, "minibatches_per_epoch": 3125}


def _problem(**change) -> str | None:
    try:
        validate_records([{**ROW, **change}])
    except ProfileRowsError as err:
        return next(p.message for p in err.problems if p.field == "epoch_time_s")
    return None


def test_the_time_limit_is_per_sample():
    # 200 s a minibatch of 128 (1.6 s a sample) is a slow board; of 16 (12.5 s a sample) milliseconds
    assert _problem(batch_size=128, epoch_time_s=200.0 * 3125) is None
    found = _problem(batch_size=16, epoch_time_s=200.0 * 3125)
    assert found and "12.5 s per sample" in found and f"more than the {MAX_S_PER_SAMPLE:g} s" in found
    assert "epoch_time_s looks like milliseconds" in found
    # an epoch in milliseconds at batch 16 of a fast mode (0.2 s a minibatch) is still caught
    assert _problem(batch_size=16, epoch_time_s=1000 * 0.2 * 3125)


def test_milliseconds_are_suggested_only_when_they_fit():
    # 10,000 s a sample: in milliseconds still 10 s, out of range too; no hint naming a wrong unit
    found = _problem(batch_size=1, epoch_time_s=10_000.0 * 3125)
    assert found and "milliseconds" not in found and "check that epoch_time_s is seconds" in found


def test_the_documented_rule_matches():
    rules = [r for r in plausibility_rules("nano") if r["field"] == "epoch_time_s"]
    per_sample = next(r for r in rules if r.get("per_also") == "batch_size")
    assert per_sample["max"] == 7.5 and "per sample" in str(per_sample["unit"])  # 120 s a minibatch of 16
