"""Profile rows: reading, validating (all problems, with line numbers) and writing the shared format."""

from __future__ import annotations

import io
import json
import math

import pandas as pd
import pytest
from jetpredict.models.catalogue import device_ids
from jetpredict.models.errors import InputError
from jetpredict.models.profile_files import (
    read_profile_csv,
    read_profile_json,
    read_profile_rows,
    rows_to_records,
    write_profile_csv,
)
from jetpredict.models.profile_rows import COLUMNS, FIELDS, ProfileRowsError, source_kind, validate_records

HEADER = ("device,workload,mode,cpu_cores,cpu_mhz,gpu_mhz,emc_mhz,num_workers,batch_size,"
          "minibatches_per_epoch,epoch_time_s,stall_time_s,compute_time_s,epoch_energy_j,avg_power_w,"
          "base_power_w,source")
# Two AGX Xavier modes in the shape of the POMACS 2022 sweeps: MAXN, and MODE_15W's nvpmodel caps
# (CPU 1200 / GPU 670 MHz are caps, not DVFS steps, and must be accepted).
GOOD_ROWS = [
    "agx-xavier,resnet18-cifar10,MAXN,8,2265.6,1377,2133,4,16,3125,96.5,4.1,80.2,2702,28.0,9.5,"
    "published: POMACS 2022",
    "agx-xavier,resnet18-cifar10,MODE_15W,4,1200,670,1331.2,4,16,3125,231.0,,,,,,measured",
]


def csv_text(*rows: str, header: str = HEADER) -> io.StringIO:
    return io.StringIO("\n".join([header, *rows]) + "\n")


def good_json_row(**changes: object) -> dict[str, object]:
    row: dict[str, object] = {
        "device": "orin-agx", "workload": "mobilenetv3-gld23k", "mode": "MAXN", "cpu_cores": 12,
        "cpu_mhz": 2201.6, "gpu_mhz": 1300.5, "emc_mhz": 3199, "batch_size": 16,
        "minibatches_per_epoch": 1000, "epoch_time_s": 60.0, "avg_power_w": None,
    }
    row.update(changes)
    return row


def problems_of(exc: ProfileRowsError) -> set[tuple[int, str]]:
    return {(p.line, p.field) for p in exc.problems}


# --- good input -----------------------------------------------------------------------------------

def test_good_csv_reads_into_a_typed_frame():
    df = read_profile_csv(csv_text(*GOOD_ROWS))
    assert list(df.columns[: len(COLUMNS)]) == list(COLUMNS)
    assert len(df) == 2
    for field in FIELDS:
        if field.kind is not str:
            assert df[field.name].dtype == float, field.name
    assert df.loc[0, "epoch_energy_j"] == 2702.0
    assert df.loc[1, "gpu_mhz"] == 670.0
    assert math.isnan(df.loc[1, "avg_power_w"])  # empty cell = unknown, never 0
    assert df.loc[0, "source"] == "published: POMACS 2022"


def test_defaults_and_extra_columns_pass_through(tmp_path):
    header = "device,workload,mode,cpu_cores,cpu_mhz,gpu_mhz,emc_mhz,batch_size,minibatches_per_epoch," \
             "epoch_time_s,power_meter"
    path = tmp_path / "rows.csv"
    path.write_text(header + "\nnano,lenet5-mnist,MAXN,4,1479,921.6,1600,16,3750,40.5,ina3221:POM_5V_IN\n",
                    encoding="utf-8")
    df = read_profile_csv(path)
    assert df.loc[0, "num_workers"] == 4  # DESIGN default
    assert df.loc[0, "source"] == "measured"
    assert df.loc[0, "power_meter"] == "ina3221:POM_5V_IN"
    assert list(df.columns) == [*COLUMNS, "power_meter"]


def test_host_rows_may_leave_clocks_empty():
    df = read_profile_csv(csv_text("host,resnet18-cifar10,custom,8,,,,4,16,3125,500,,,,,,measured"))
    assert df.loc[0, "device"] == "host"
    assert math.isnan(df.loc[0, "gpu_mhz"]) and math.isnan(df.loc[0, "emc_mhz"])


def test_crlf_and_utf8_bom_are_accepted(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_bytes(("\ufeff" + HEADER + "\r\n" + GOOD_ROWS[0] + "\r\n").encode("utf-8"))
    assert read_profile_csv(path).loc[0, "device"] == "agx-xavier"


def test_json_rows_list_or_object():
    rows = [good_json_row(), good_json_row(mode="MODE_30W", cpu_cores=8, cpu_mhz=1728, gpu_mhz=612)]
    df = read_profile_json(rows)
    assert list(df["mode"]) == ["MAXN", "MODE_30W"]
    assert math.isnan(df.loc[0, "avg_power_w"])
    assert read_profile_json({"rows": rows}).equals(df)


def test_read_profile_rows_dispatches_on_suffix(tmp_path):
    json_path = tmp_path / "rows.json"
    json_path.write_text(json.dumps({"rows": [good_json_row()]}), encoding="utf-8")
    csv_path = tmp_path / "rows.csv"
    csv_path.write_text(csv_text(*GOOD_ROWS).getvalue(), encoding="utf-8")
    assert read_profile_rows(json_path).loc[0, "device"] == "orin-agx"
    assert len(read_profile_rows(csv_path)) == 2


def test_write_then_read_round_trips(tmp_path):
    original = read_profile_csv(csv_text(*GOOD_ROWS))
    path = tmp_path / "out.csv"
    write_profile_csv(original, path)
    assert path.read_text(encoding="utf-8").splitlines()[0] == ",".join(COLUMNS)
    pd.testing.assert_frame_equal(read_profile_csv(path), original)
    write_profile_csv(rows_to_records(original.iloc[:1]), path)  # the file is written anew
    pd.testing.assert_frame_equal(read_profile_csv(path), original.iloc[:1])


def test_write_to_a_stream_has_one_header_line():
    out = io.StringIO()
    write_profile_csv([good_json_row()], out)
    lines = out.getvalue().splitlines()
    assert lines[0] == ",".join(COLUMNS) and len(lines) == 2


def test_rows_to_records_gives_json_ready_values():
    records = rows_to_records(read_profile_csv(csv_text(*GOOD_ROWS)))
    assert records[1]["avg_power_w"] is None
    assert records[0]["cpu_cores"] == 8 and isinstance(records[0]["cpu_cores"], int)
    assert isinstance(records[0]["epoch_time_s"], float)
    json.dumps(records)  # serialisable as is


@pytest.mark.parametrize(("source", "kind"), [
    ("measured", "measured"), ("simulated", "simulated"), ("published: POMACS 2022", "published"),
    (None, "measured"), ("Published: PowerTrain", "published"),
])
def test_source_kind(source, kind):
    assert source_kind(source) == kind


# --- bad input: every problem, with its line --------------------------------------------------------

def test_empty_file_is_reported(tmp_path):
    path = tmp_path / "empty.csv"
    path.write_text("", encoding="utf-8")
    with pytest.raises(ProfileRowsError) as err:
        read_profile_csv(path)
    assert "empty" in str(err.value)
    assert str(path) in str(err.value)


def test_header_only_file_has_no_data_rows():
    with pytest.raises(ProfileRowsError) as err:
        read_profile_csv(csv_text())
    assert problems_of(err.value) == {(0, "rows")}


def test_missing_required_columns_are_named():
    header = "device,workload,cpu_cores,cpu_mhz,gpu_mhz,emc_mhz,batch_size,epoch_time_s"
    with pytest.raises(ProfileRowsError) as err:
        read_profile_csv(csv_text("agx-xavier,r18,8,2265.6,1377,2133,16,10", header=header))
    assert problems_of(err.value) == {(1, "header")}
    message = err.value.problems[0].message
    assert "mode" in message and "minibatches_per_epoch" in message


def test_a_missing_column_names_the_misspelt_header_that_may_be_it():
    header = "device,workload,mode,cpu_cores,cpu_mhz,gpu_mhz,emc_mhz,batch_size,minibatches_per_epoch,epoch_tme_s"
    with pytest.raises(ProfileRowsError) as err:
        read_profile_csv(csv_text("agx-xavier,r18,a,8,2265.6,1377,2133,16,3125,10", header=header))
    assert err.value.problems[0].message == (
        "missing required column(s): epoch_time_s (the header has 'epoch_tme_s': the same, misspelt?)")


def test_negative_time_names_line_field_and_rule():
    bad = GOOD_ROWS[1].replace(",231.0,", ",-231.0,")
    with pytest.raises(ProfileRowsError) as err:
        read_profile_csv(csv_text(GOOD_ROWS[0], bad))
    (problem,) = err.value.problems
    assert (problem.line, problem.field) == (3, "epoch_time_s")
    assert "> 0" in problem.message and "-231.0" in problem.message
    assert "line 3: epoch_time_s" in str(err.value)


def test_zero_epoch_time_and_negative_stall_are_rejected():
    row = good_json_row(epoch_time_s=0, stall_time_s=-1.0)
    with pytest.raises(ProfileRowsError) as err:
        read_profile_json([row])
    assert problems_of(err.value) == {(1, "epoch_time_s"), (1, "stall_time_s")}


@pytest.mark.parametrize(("changes", "field", "words"), [
    # 50% + 65% of the epoch: each share alone passes, together the rest of the epoch is negative
    ({"stall_time_s": 48.25, "compute_time_s": 62.7}, "compute_time_s",
     "stall_time_s=48.25 + compute_time_s=62.7 s exceeds epoch_time_s=96.5 s (at most 1.1x; the rest"),
    ({"stall_time_s": 200.0, "compute_time_s": None}, "stall_time_s", "stall_time_s=200 s exceeds"),
    ({"base_power_w": 40.0, "epoch_energy_j": None}, "base_power_w", "base_power_w=40 W exceeds avg_power_w=28"),
    ({"epoch_energy_j": 5404.0}, "epoch_energy_j",
     "epoch_energy_j=5404 J is not avg_power_w=28 x epoch_time_s=96.5 = 2702 J (within 1.1x either way)"),
    ({"epoch_energy_j": 2000.0}, "epoch_energy_j", "is not avg_power_w=28 x epoch_time_s=96.5"),
])
def test_parts_above_their_whole_and_an_energy_off_power_x_time_are_refused(changes, field, words):
    names = HEADER.split(",")
    row = dict(zip(names, GOOD_ROWS[0].split(",", len(names) - 1), strict=True))
    row.update({k: "" if v is None else str(v) for k, v in changes.items()})
    with pytest.raises(ProfileRowsError) as err:
        read_profile_csv(csv_text(",".join(row[n] for n in names)))
    (problem,) = err.value.problems
    assert (problem.line, problem.field) == (2, field) and words in problem.message
    read_profile_csv(csv_text(GOOD_ROWS[0].replace(",2702,", ",2900,")))  # 7% off: digitised figures round


def test_a_unit_slip_is_the_rows_one_problem_not_the_product_it_throws_off():
    """Power in milliwatts: the message names the slip; the correct energy is not blamed too."""
    with pytest.raises(ProfileRowsError) as err:
        read_profile_csv(csv_text(GOOD_ROWS[0].replace(",28.0,", ",28000.0,")))
    (problem,) = err.value.problems
    assert problem.field == "avg_power_w" and "milliwatts" in problem.message


def test_unknown_device_names_the_valid_ids():
    with pytest.raises(ProfileRowsError) as err:
        read_profile_csv(csv_text(GOOD_ROWS[0].replace("agx-xavier", "no-such-board", 1)))
    (problem,) = err.value.problems
    assert (problem.line, problem.field) == (2, "device")
    for device_id in (*device_ids(), "host"):
        assert device_id in problem.message


def test_text_in_number_fields_is_reported_per_field():
    bad = GOOD_ROWS[0].replace(",96.5,", ",fast,").replace(",8,2265.6,", ",eight,2265.6,")
    with pytest.raises(ProfileRowsError) as err:
        read_profile_csv(csv_text(bad))
    assert problems_of(err.value) == {(2, "epoch_time_s"), (2, "cpu_cores")}
    assert all("must be a number" in p.message for p in err.value.problems)
    assert any("'fast'" in p.message for p in err.value.problems)


def test_all_problems_of_a_file_are_reported_not_just_the_first():
    rows = [
        GOOD_ROWS[0],
        GOOD_ROWS[1].replace("agx-xavier", "no-such-board", 1),       # line 3
        GOOD_ROWS[0],
        GOOD_ROWS[0].replace(",16,3125,", ",16.5,3125,"),             # line 5: fractional count
        GOOD_ROWS[0].replace(",2265.6,1377,", ",2265.6,9999,"),       # line 6: GPU out of range
        GOOD_ROWS[0].replace("resnet18-cifar10", ""),                  # line 7: required, empty
        GOOD_ROWS[0].replace("published: POMACS 2022", "guessed"),     # line 8: bad source
    ]
    with pytest.raises(ProfileRowsError) as err:
        read_profile_csv(csv_text(*rows))
    assert problems_of(err.value) == {(3, "device"), (5, "batch_size"), (6, "gpu_mhz"), (7, "workload"),
                                      (8, "source")}
    assert "1377" in next(p.message for p in err.value.problems if p.field == "gpu_mhz")
    assert err.value.as_errors()["rows.5.batch_size"]
    assert isinstance(err.value, InputError)


@pytest.mark.parametrize("text", ["N/A", "NA", "null", "-", "nan", "None"])
def test_a_not_available_cell_is_named_as_written_not_as_empty(text):
    # Required (cpu_mhz) or optional (avg_power_w): only an empty cell is unknown; the text is refused as such.
    # Profile rows always read so (csv, no NA strings); pinned so that mode lists (test_mode_table_cells.py,
    # which needed the fix) and profile rows keep agreeing.
    bad = GOOD_ROWS[0].replace(",2265.6,", f",{text},").replace(",28.0,", f",{text},")
    blank = GOOD_ROWS[0].replace(",2265.6,", ",,").replace(",28.0,", ",,").replace(",2702,", ",,")
    with pytest.raises(ProfileRowsError) as err:
        read_profile_csv(csv_text(bad, blank))
    found = {(p.line, p.field): p.message for p in err.value.problems}
    for field in ("cpu_mhz", "avg_power_w"):
        assert "number" in found[2, field] and repr(text) in found[2, field], found
    assert found[3, "cpu_mhz"] == "is required and empty" and (3, "avg_power_w") not in found


@pytest.mark.parametrize("field", ["workload", "mode"])
def test_a_text_cell_of_only_spaces_is_required_and_empty(field):
    with pytest.raises(ProfileRowsError) as err:
        validate_records([good_json_row(**{field: "   "})])
    assert {(p.field, p.message) for p in err.value.problems} == {(field, "is required and empty")}


def test_an_integer_beyond_any_float_names_its_field():
    # JSON integers have no size limit; float() of one raises OverflowError, not ValueError.
    with pytest.raises(ProfileRowsError) as err:
        read_profile_json([good_json_row(gpu_mhz=10**400, batch_size=-(10**400))])
    assert problems_of(err.value) == {(1, "gpu_mhz"), (1, "batch_size")}
    assert all("too large for a float" in p.message and len(p.message) < 100 for p in err.value.problems)


def test_components_larger_than_the_epoch_are_rejected():
    row = good_json_row(stall_time_s=30.0, compute_time_s=90.0, avg_power_w=20.0, base_power_w=45.0)
    with pytest.raises(ProfileRowsError) as err:
        read_profile_json([row])
    assert problems_of(err.value) == {(1, "compute_time_s"), (1, "base_power_w")}


def test_json_specific_problems():
    with pytest.raises(ProfileRowsError) as err:
        read_profile_json([good_json_row(cpu_cores=True, cpu_mhz="inf"), "not a row", good_json_row()])
    assert problems_of(err.value) == {(1, "cpu_cores"), (1, "cpu_mhz"), (2, "_row")}
    with pytest.raises(InputError) as err2:
        read_profile_json({"rowz": []})
    assert err2.value.field == "rows"
    with pytest.raises(ProfileRowsError):
        read_profile_json([])


def test_surplus_cells_are_reported():
    with pytest.raises(ProfileRowsError) as err:
        read_profile_csv(csv_text(GOOD_ROWS[1] + ",oops"))
    assert problems_of(err.value) == {(2, "_row")}


def test_missing_and_malformed_files_raise_input_errors(tmp_path):
    with pytest.raises(InputError) as err:
        read_profile_rows(tmp_path / "nope.csv")
    assert err.value.field == "profiles" and "does not exist" in err.value.message
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json", encoding="utf-8")
    with pytest.raises(InputError, match="not valid JSON"):
        read_profile_rows(bad_json)
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(InputError, match="UTF-8"):
        read_profile_csv(binary)


def test_json_past_the_int_digit_limit_is_an_input_error_naming_the_flag(tmp_path):
    # json.loads raises a plain ValueError (not JSONDecodeError) for an integer over 4,300 digits.
    big = tmp_path / "bigint.json"
    big.write_text('[{"epoch_time_s": ' + "9" * 5000 + "}]", encoding="utf-8")
    with pytest.raises(InputError) as err:
        read_profile_rows(big, "after")
    assert err.value.field == "after"
    assert err.value.message.startswith(f"--after file {big} is not valid JSON") and "4300" in err.value.message


@pytest.mark.parametrize("name", ["nope.csv", "nope.json"])
def test_file_errors_name_the_flag_the_file_came_from(tmp_path, name):
    with pytest.raises(InputError) as err:
        read_profile_rows(tmp_path / name, "reference")
    assert err.value.field == "reference" and err.value.message.startswith("--reference file")
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(InputError) as err:
        read_profile_rows(binary, "after")
    assert err.value.field == "after" and "--after file" in err.value.message and "UTF-8" in err.value.message


def test_validate_records_accepts_plain_mappings():
    df = validate_records([good_json_row()])
    assert df.loc[0, "cpu_cores"] == 12.0


def test_line_numbers_stay_right_after_blank_lines():
    # csv.DictReader skips blank lines; problems must still point at the physical line of the file.
    bad = GOOD_ROWS[1].replace(",231.0,", ",-231.0,")
    text = io.StringIO(HEADER + "\n" + GOOD_ROWS[0] + "\n\n" + bad + "\n")
    with pytest.raises(ProfileRowsError) as err:
        read_profile_csv(text)
    assert problems_of(err.value) == {(4, "epoch_time_s")}


@pytest.mark.filterwarnings("error")
def test_blank_source_column_defaults_without_dtype_warnings():
    # A column with no values is float NaN in pandas; filling it with text must not rely on a
    # deprecated upcast (pandas warns now and will raise in a future version).
    row = good_json_row()
    row.pop("source", None)
    df = read_profile_json([row])
    assert df.loc[0, "source"] == "measured"


def test_duplicate_columns_are_a_header_problem():
    # csv.DictReader would silently keep the last of two epoch_time_s cells
    with pytest.raises(ProfileRowsError) as err:
        read_profile_csv(csv_text(GOOD_ROWS[0] + ",-5", header=HEADER + ",epoch_time_s"))
    assert problems_of(err.value) == {(1, "header")}
    assert "duplicate" in err.value.problems[0].message and "epoch_time_s" in err.value.problems[0].message


def test_spaces_around_column_names_are_ignored():
    header = HEADER.replace(",cpu_mhz,", ", cpu_mhz ,")
    assert read_profile_csv(csv_text(GOOD_ROWS[0], header=header)).loc[0, "cpu_mhz"] == 2265.6


def test_counts_are_written_as_whole_numbers():
    # A validated frame holds counts as floats (NaN = unknown); files and JSON show them as counts.
    rows = read_profile_json([good_json_row(warmup=2, power_samples=None, params=61706)])
    assert rows["warmup"].dtype == float
    out = io.StringIO()
    write_profile_csv(rows, out)
    record = next(iter(pd.read_csv(io.StringIO(out.getvalue()), dtype=str).to_dict(orient="records")))
    assert (record["warmup"], record["params"], record["batch_size"]) == ("2", "61706", "16")
    assert pd.isna(record["power_samples"])
    (as_json,) = rows_to_records(rows)
    assert as_json["warmup"] == 2 and type(as_json["warmup"]) is int and as_json["power_samples"] is None


def _host_row(**changes: object) -> dict[str, object]:
    """A host (x86) row: no clocks, and none of the Jetson plausibility checks apply to it."""
    row: dict[str, object] = {"device": "host", "workload": "w", "mode": "custom", "cpu_cores": 8,
                              "batch_size": 16, "minibatches_per_epoch": 100, "epoch_time_s": 50.0}
    row.update(changes)
    return {k: v for k, v in row.items() if v is not None}


def test_a_batch_size_of_0_is_refused_naming_the_field():
    assert validate_records([_host_row(batch_size=1)]).loc[0, "batch_size"] == 1
    with pytest.raises(ProfileRowsError) as err:
        validate_records([_host_row(batch_size=0)])
    assert [(p.line, p.field, p.message) for p in err.value.problems] == [
        (1, "batch_size", "must be >= 1 count, got 0")]


@pytest.mark.parametrize(("changes", "field"), [
    ({"epoch_time_s": 0}, "epoch_time_s"),
    ({"epoch_energy_j": 0}, "epoch_energy_j"),
    ({"avg_power_w": 0}, "avg_power_w"),
    ({"avg_power_w": 20.0, "epoch_energy_j": 1000.0, "base_power_w": 0}, "base_power_w"),
])
def test_a_zero_where_the_rule_is_greater_than_0_is_refused_on_host_rows_too(changes, field):
    """On a host row the Jetson plausibility checks stay silent: the refusal is the field's own > 0 rule."""
    with pytest.raises(ProfileRowsError) as err:
        validate_records([_host_row(**changes)])
    (problem,) = err.value.problems
    assert (problem.line, problem.field) == (1, field)
    assert problem.message.startswith("must be > 0 ") and problem.message.endswith(", got 0"), problem.message
