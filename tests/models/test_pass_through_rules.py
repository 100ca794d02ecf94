"""Numeric pass-through columns (``power_samples``, ``flops_train``, ``kernel_count`` ...) are checked as the
core fields are: a number of their documented unit, finite, at least 0, a whole number for counts, below a
physical bound; an empty cell is unknown. Errors name the row and the column, in CSV files (``fit
--profiles``) and JSON rows alike. Rows a service stored under the older rules still load."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import pytest
from jetpredict.models.profile_files import read_profile_csv, read_profile_json, rows_to_records
from jetpredict.models.profile_rows import (
    PASS_THROUGH_COLUMNS,
    PASS_THROUGH_NUMBERS,
    ProfileRowsError,
    validate_records,
)

from jetpredict import models
from jetpredict.cli import main

SIMULATED = Path(models.__file__).parent / "reference" / "agx-xavier-simulated.csv"


def _simulated_csv(n: int = 4) -> tuple[list[str], list[dict[str, str]]]:
    """The header and first ``n`` rows of a committed simulated reference (it carries complexity columns)."""
    with SIMULATED.open(newline="") as f:
        reader = csv.DictReader(f)
        rows = [r for _, r in zip(range(n), reader, strict=False)]
        return list(reader.fieldnames or []), rows


def _csv(header: list[str], rows: list[dict[str, str]]) -> io.StringIO:
    out = io.StringIO()
    writer = csv.DictWriter(out, header, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    out.seek(0)
    return out


def test_every_numeric_pass_through_column_has_a_rule_from_its_unit():
    text = {"power_meter", "power_null_reason", "cpu_package_null_reason", "accelerator", "data_source",
            "complexity_null_reason"}
    assert set(PASS_THROUGH_NUMBERS) == set(PASS_THROUGH_COLUMNS) - text
    # One column per unit: its kind and bound (counts and sizes 1e21, an epoch's seconds 1e8, joules 1e12).
    for name, rule in {"kernel_count": (int, "count", 1e21), "macs_fwd": (float, "MAC per sample", 1e21),
                       "flops_train": (float, "FLOP per sample", 1e21), "train_flops_per_s": (float, "FLOP/s", 1e21),
                       "param_bytes": (float, "B", 1e21), "activation_bytes": (float, "B per sample", 1e21),
                       "cpu_s_per_sample": (float, "s", 1e8), "cpu_package_energy_j": (float, "J per epoch", 1e12),
                       "utilisation": (float, "ratio", 1e6)}.items():
        assert (PASS_THROUGH_NUMBERS[name].kind, PASS_THROUGH_NUMBERS[name].unit,
                PASS_THROUGH_NUMBERS[name].maximum) == rule, name
    assert {n for n, r in PASS_THROUGH_NUMBERS.items() if r.kind is int} == {
        "power_samples", "params", "leaf_modules", "kernel_count", "warmup", "minibatches_measured"}
    for name, rule in PASS_THROUGH_NUMBERS.items():  # optional, at least 0, below a finite bound
        assert (rule.minimum, rule.strict, rule.required) == (0, False, False), name
        assert rule.maximum is not None and math.isfinite(rule.maximum) and rule.maximum < 1e300, name


@pytest.mark.parametrize("column", ["flops_train", "kernel_count"])
@pytest.mark.parametrize("cell, rule", [("abc", "must be a number"), ("-5", "must be >= 0"),
                                        ("inf", "must be a finite number"), ("nan", "must be a finite number"),
                                        ("1" + "0" * 400, "must be a finite number"),
                                        ("1e300", "(a physical bound)")],
                         ids=["text", "negative", "inf", "nan", "10**400", "1e300"])
def test_a_bad_complexity_cell_in_a_csv_is_named_by_line_and_column(column, cell, rule):
    header, rows = _simulated_csv()
    rows[1][column] = cell
    with pytest.raises(ProfileRowsError) as e:
        read_profile_csv(_csv(header, rows))
    assert [(p.line, p.field) for p in e.value.problems] == [(3, column)], str(e.value)
    assert rule in e.value.problems[0].message
    assert f"line 3: {column}: " in str(e.value)


def test_a_count_must_be_whole():
    header, rows = _simulated_csv()
    rows[0]["kernel_count"] = "185.5"
    with pytest.raises(ProfileRowsError) as e:
        read_profile_csv(_csv(header, rows))
    assert [(p.line, p.field) for p in e.value.problems] == [(2, "kernel_count")]
    assert "whole number" in e.value.problems[0].message
    rows[0]["kernel_count"] = "185.0"  # a count written as a float is still a count
    assert read_profile_csv(_csv(header, rows)).loc[0, "kernel_count"] == 185


def test_empty_cells_stay_unknown_and_good_cells_are_numbers():
    header, rows = _simulated_csv()
    rows[0]["flops_train"] = rows[0]["kernel_count"] = ""
    df = read_profile_csv(_csv(header, rows))
    assert math.isnan(df.loc[0, "flops_train"]) and math.isnan(df.loc[0, "kernel_count"])
    assert df.loc[1, "flops_train"] == float(rows[1]["flops_train"])
    assert rows_to_records(df)[1]["kernel_count"] == int(float(rows[1]["kernel_count"]))


@pytest.mark.parametrize("value, ok", [(-1, False), (1.5, False), (10**400, False), (0, True), (12, True),
                                       (12.0, True), (None, True)],
                         ids=["-1", "1.5", "10**400", "0", "12", "12.0", "null"])
def test_json_rows_check_power_samples(value, ok):
    header, rows = _simulated_csv(2)
    records = rows_to_records(read_profile_csv(_csv(header, rows)))
    records[1]["power_samples"] = value
    if ok:
        assert read_profile_json(records) is not None
        return
    with pytest.raises(ProfileRowsError) as e:
        read_profile_json(records)
    assert [(p.line, p.field) for p in e.value.problems] == [(2, "power_samples")]


def test_rows_stored_under_the_older_rules_still_load():
    """A service stored pass-through numbers unchecked before: its stored rows (the first ``stored``) keep
    loading as they are; new rows meet the rules."""
    header, rows = _simulated_csv(2)
    records = rows_to_records(read_profile_csv(_csv(header, rows)))
    records[0]["power_samples"] = -1.0
    df = validate_records(records, stored=1)
    assert df.loc[0, "power_samples"] == -1.0
    with pytest.raises(ProfileRowsError):
        validate_records(records, stored=0)


def test_fit_refuses_a_bad_complexity_cell_naming_it(tmp_path, capsys):
    header, rows = _simulated_csv()
    rows[0]["flops_train"] = "-5"
    path = tmp_path / "p.csv"
    path.write_text(_csv(header, rows).getvalue())
    code = main(["fit", "--device", "agx-xavier", "--profiles", str(path), "--out", str(tmp_path / "m.json")])
    assert code == 2
    assert "line 2: flops_train: must be >= 0" in capsys.readouterr().err
    assert not (tmp_path / "m.json").exists()
