"""A CSV mode list (``--modes`` / ``--candidates``) keeps what a cell says: only an empty cell is missing.
``N/A``, ``NA``, ``null``, ``nan`` or ``-`` in a knob is text, refused by the mode checks as not a number
(naming the field and the text), not read as an empty cell; such a label is the label written."""

from __future__ import annotations

import pytest
from jetpredict.models import profile_files as pf
from jetpredict.models.catalogue import load_device
from jetpredict.models.errors import InputError
from jetpredict.predictor.service import mode_table

HEADER = "mode,cpu_cores,cpu_mhz,gpu_mhz,emc_mhz"
GOOD = "m,8,2265.6,1377,2133"


def _read(tmp_path, *lines: str, header: str = HEADER):
    path = tmp_path / "modes.csv"
    path.write_text("\n".join([header, *lines]) + "\n")
    return path, pf.read_mode_table(path, "modes")


def _problem(path, table) -> str:
    with pytest.raises(InputError) as err, pf.rows_named_by_line("modes", path, table):
        mode_table(load_device("agx-xavier"), table)
    return err.value.message


@pytest.mark.parametrize("text", ["N/A", "NA", "null", "nan", "-", "None"])
def test_a_knob_cell_that_says_something_is_not_a_number_not_empty(tmp_path, text):
    path, table = _read(tmp_path, GOOD, f"n,8,{text},1377,2133")
    assert table["cpu_mhz"].tolist()[1] == text
    message = _problem(path, table)
    assert f"line 3 (n): cpu_mhz must be a number, got {text!r}" in message, message
    assert "empty" not in message


def test_an_empty_knob_cell_is_still_required_and_empty(tmp_path):
    path, table = _read(tmp_path, GOOD, "n,8,,1377,2133")
    assert "line 3 (n): cpu_mhz is required and empty" in _problem(path, table)


@pytest.mark.parametrize("label", ["NA", "null", "None", "N/A"])
def test_a_label_is_the_text_written(tmp_path, label):
    _, table = _read(tmp_path, f"{label},8,2265.6,1377,2133")
    assert table["mode"].tolist() == [label]


def test_empty_cells_are_still_missing_and_blank_lines_dropped(tmp_path):
    _, table = _read(tmp_path, ",8,2265.6,1377,2133,", "", GOOD, header=HEADER + ",device")
    assert table["mode"].isna().tolist() == [True, False] and table["device"].isna().all()
    assert table.attrs[pf.MODE_LINES_ATTR] == [2, 4]


def test_a_text_table_given_as_a_mode_list_is_told_it_is_not_csv_or_json(tmp_path):
    """`plan --out plan.txt` writes a table whose header names the mode columns, space-aligned: the reader
    said it had none of them. It says the file is neither CSV nor JSON and which --out writes one."""
    path = tmp_path / "plan.txt"
    path.write_text("                   mode  cpu_cores  cpu_mhz  gpu_mhz  emc_mhz  est_profile_s\n"
                    "  2c-1190.4-828.75-2133          2   1190.4   828.75     2133         27.644\n")
    with pytest.raises(InputError) as err:
        pf.read_mode_table(path, "modes")
    said = err.value.message
    assert err.value.field == "modes" and "not CSV or JSON" in said and "a text table" in said
    assert "--out FILE.csv" in said and "has none of the mode columns" not in said
    # A CSV of other columns is still told which columns a mode list needs.
    path.write_text("foo,bar\n1,2\n")
    with pytest.raises(InputError, match="has none of the mode columns mode, cpu_cores"):
        pf.read_mode_table(path, "modes")
