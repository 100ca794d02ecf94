"""Reading users' files: a cut-off profile CSV is refused, not fitted; a mode-list CSV header is read as the
profile-row header is (names stripped, duplicates refused); errors in a JSON profile file name the flag, the
file and the item (from 0) of the bad row, not a "line" of the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jetpredict.models import profile_files as pf
from jetpredict.models.catalogue import load_device
from jetpredict.models.errors import InputError
from jetpredict.models.profile_rows import ProfileRowsError
from jetpredict.predictor.service import mode_table

from jetpredict.cli import main

PUBLISHED = Path(__file__).resolve().parents[2] / "models" / "reference" / "agx-xavier-published.csv"
MODE_HEADER = "mode,cpu_cores,cpu_mhz,gpu_mhz,emc_mhz"


def _published_lines() -> list[str]:
    return PUBLISHED.read_text(encoding="utf-8").splitlines()


def _cut_inside_epoch_time(lines: list[str]) -> str:
    """The file's text cut two characters into its last row's epoch_time_s cell, with no final newline."""
    column = lines[0].split(",").index("epoch_time_s")
    last = lines[-1].split(",")
    return "\n".join([*lines[:-1], ",".join(last[:column]) + "," + last[column][:2]])


def test_a_profile_csv_cut_inside_its_last_row_is_refused(tmp_path):
    lines = _published_lines()
    path = tmp_path / "cut.csv"
    path.write_text(_cut_inside_epoch_time(lines), encoding="utf-8")
    width = len(lines[0].split(","))
    cells = lines[0].split(",").index("epoch_time_s") + 1
    with pytest.raises(ProfileRowsError) as err:
        pf.read_profile_csv(path)
    assert err.value.problems[0].line == len(lines)
    assert f"line {len(lines)}: _row: has {cells} cells, the header {width}" in err.value.message
    assert "cut off" in err.value.message and str(path) in err.value.message


def test_every_short_row_is_named_and_full_rows_still_read(tmp_path):
    lines = _published_lines()
    short = ",".join(lines[2].split(",")[:5])
    path = tmp_path / "short.csv"
    path.write_text("\n".join([lines[0], lines[1], short, lines[3], short]) + "\n", encoding="utf-8")
    with pytest.raises(ProfileRowsError) as err:
        pf.read_profile_csv(path)
    assert [(p.line, p.field) for p in err.value.problems] == [(3, "_row"), (5, "_row")]
    # The same rows whole, with a blank line among them, read as before.
    path.write_text("\n".join([lines[0], lines[1], "", lines[3]]), encoding="utf-8")
    assert len(pf.read_profile_csv(path)) == 2


def _mode_list(tmp_path, text: str) -> Path:
    path = tmp_path / "modes.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_mode_list_with_a_duplicated_column_is_refused_naming_it(tmp_path):
    path = _mode_list(tmp_path, f"{MODE_HEADER},cpu_cores\nm,8,2265.6,1377,2133,4\n")
    with pytest.raises(InputError) as err:
        pf.read_mode_table(path, "candidates")
    assert err.value.field == "candidates"
    message = err.value.message
    assert f"--candidates file {path}" in message and "duplicate column(s): cpu_cores" in message
    # the same name with a space after the comma is the same column
    path = _mode_list(tmp_path, "mode,cpu_cores,cpu_mhz,gpu_mhz,emc_mhz, mode\nm,8,2265.6,1377,2133,n\n")
    with pytest.raises(InputError, match="duplicate column.s.: mode"):
        pf.read_mode_table(path, "modes")


def test_a_mode_list_header_with_spaces_after_the_commas_is_read(tmp_path):
    path = _mode_list(tmp_path, "mode, cpu_cores, cpu_mhz , gpu_mhz, emc_mhz, device, predicted\n"
                                "m, 8, 2265.6, 1377, 2133, agx-xavier , 1\n")
    table = pf.read_mode_table(path, "modes")
    assert list(table.columns) == [*MODE_HEADER.split(","), "device"]
    # the cells after ", " too: text stripped as in profile rows, numbers read as numbers
    assert table.loc[0, ["mode", "device", "cpu_cores"]].tolist() == ["m", "agx-xavier", 8]
    with pf.rows_named_by_line("modes", path, table):
        modes = mode_table(load_device("agx-xavier"), table)
    assert len(modes) == 1 and table.attrs[pf.MODE_LINES_ATTR] == [2]


def _json_rows(tmp_path, rows: object) -> Path:
    path = tmp_path / "ref.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    return path


def _published_records() -> list[dict[str, object]]:
    return pf.rows_to_records(pf.read_profile_csv(PUBLISHED))


def test_a_json_profile_file_error_names_the_flag_the_file_and_the_item(tmp_path):
    records = _published_records()[:3]
    records[1]["epoch_time_s"] = "abc"
    path = _json_rows(tmp_path, records)
    with pytest.raises(ProfileRowsError) as err:
        pf.read_profile_rows(path, "reference")
    message = err.value.message
    assert f"in --reference {path}: item 1: epoch_time_s: must be a number (s), got 'abc'" in message, message
    assert "line" not in message
    # conflicting rows are named as items too
    records = _published_records()[:2]
    slower = ("epoch_time_s", "stall_time_s", "compute_time_s", "epoch_energy_j")
    records[1] = {**records[0], **{k: records[0][k] * 3 for k in slower}}  # the same mode, 3x the time
    with pytest.raises(ProfileRowsError, match=r"--reference .*: item 1: epoch_time_s: items 0, 1 measure"):
        pf.read_profile_rows(_json_rows(tmp_path, {"rows": records}), "reference")


@pytest.mark.parametrize("payload", [{"model_version": "x", "coefficients": [1, 2]}, "rows", [1, 2]],
                         ids=["model file", "string", "not objects"])
def test_a_json_file_that_holds_no_rows_names_the_flag_and_the_file(tmp_path, payload):
    path = _json_rows(tmp_path, payload)
    with pytest.raises(InputError) as err:
        pf.read_profile_rows(path, "after")
    assert err.value.message.startswith("--after file " if isinstance(payload, dict | str) else "2 problem(s) in")
    assert f"--after {path}" in err.value.message.replace("--after file", "--after")
    assert "line" not in err.value.message


def test_fit_names_a_bad_reference_json_file(tmp_path, capsys):
    records = _published_records()[:3]
    records[2]["epoch_time_s"] = "abc"
    bad = _json_rows(tmp_path, records)
    lines = _published_lines()
    profiles = tmp_path / "resnet.csv"
    profiles.write_text("\n".join([lines[0], *(x for x in lines if ",resnet18-cifar10," in x)]) + "\n")
    code = main(["fit", "--device", "agx-xavier", "--profiles", str(profiles), "--reference", str(bad),
                 "--out", str(tmp_path / "m.json")])
    err = capsys.readouterr().err
    assert code == 2 and f"--reference {bad}: item 2: epoch_time_s" in err, err
