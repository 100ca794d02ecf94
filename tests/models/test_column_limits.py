"""Columns are bounded like rows and cells: rows (or mode objects) with a different key each, a CSV header of
thousands of columns, or thousands of unknown keys in one row are refused, or cut to the columns that are
read, before any table of rows x columns is built; the errors name the field and the limit."""

from __future__ import annotations

import json

import pytest
from jetpredict.models import profile_files as pf
from jetpredict.models import profile_rows as pr
from jetpredict.models.catalogue import MODE_FIELDS
from jetpredict.models.errors import InputError

from jetpredict.cli import main

ROW = {"device": "agx-xavier", "workload": "w", "mode": "a", "cpu_cores": 8, "cpu_mhz": 1190.4,
       "gpu_mhz": 675.75, "emc_mhz": 1600, "num_workers": 4, "batch_size": 16, "minibatches_per_epoch": 100,
       "epoch_time_s": 10.0}
MODE = {"mode": "m", "cpu_cores": 8, "cpu_mhz": 2265.6, "gpu_mhz": 1377, "emc_mhz": 2133}


def test_the_limit_leaves_room_for_every_known_column_and_a_users_own():
    assert len(pr.COLUMNS) + len(pr.PASS_THROUGH_COLUMNS) + 20 <= pr.MAX_COLUMNS


def _counting_matches(monkeypatch) -> list[str]:
    """The names :func:`unknown_columns` looks up a close match for (the costly part of an unknown column)."""
    looked_up: list[str] = []
    real = pr.difflib.get_close_matches

    def counting(word, *args, **kwargs):
        looked_up.append(word)
        return real(word, *args, **kwargs)

    monkeypatch.setattr(pr.difflib, "get_close_matches", counting)
    return looked_up


def test_thousands_of_unknown_columns_are_named_up_to_a_fixed_number_and_counted(monkeypatch):
    looked_up = _counting_matches(monkeypatch)
    unknown = [f"x{i}" for i in range(3000)]
    out = pr.unknown_columns([{**ROW, **dict.fromkeys(unknown, 1)}, {**ROW, **dict.fromkeys(unknown, 2)}])
    named = [k for k in out if k != "rows"]
    assert named == [f"rows.0.{name}" for name in unknown[:pr.MAX_UNKNOWN_NAMED]]
    assert out["rows"] == [f"and {3000 - pr.MAX_UNKNOWN_NAMED} more unknown column(s), not named here"]
    assert len(looked_up) == pr.MAX_UNKNOWN_NAMED


def test_each_unknown_column_is_named_once_at_its_first_row_whatever_its_name():
    out = pr.unknown_columns([{**ROW, "a.b": 1}, {**ROW, "b": 1, "a.b": 2}, {**ROW, "epoch_tme_s": 1}])
    assert list(out) == ["rows.0.a.b", "rows.1.b", "rows.2.epoch_tme_s"]
    assert "did you mean 'epoch_time_s'?" in out["rows.2.epoch_tme_s"][0] and "rows" not in out
    assert pr.unknown_columns([ROW, {**ROW, "power_meter": "x"}]) == {}


def test_rows_with_a_different_key_each_are_refused_naming_the_limit():
    rows = [{**ROW, "mode": f"m{i}", "epoch_time_s": 10 + i / 100, f"note{i}": "x"} for i in range(300)]
    with pytest.raises(pr.ProfileRowsError) as err:
        pr.validate_records(rows)
    problem = err.value.problems[-1]
    first_over = pr.MAX_COLUMNS - len(ROW) + 1  # the row (from 1) whose key is one column too many
    assert (problem.line, problem.field) == (first_over, "columns") and err.value.field == "columns"
    assert f"more than {pr.MAX_COLUMNS} distinct columns" in problem.message
    # Up to the limit, extra columns pass through as before.
    within = rows[:pr.MAX_COLUMNS - len(ROW)]
    assert len(pr.validate_records(within).columns) == len(pr.COLUMNS) + len(within)


def test_a_json_profile_file_of_rows_with_a_different_key_each_exits_2(tmp_path, capsys):
    path = tmp_path / "rows.json"
    path.write_text(json.dumps([{**ROW, "mode": f"m{i}", f"k{i}": 1} for i in range(2000)]))
    code = main(["fit", "--device", "agx-xavier", "--profiles", str(path), "--out", str(tmp_path / "m.json")])
    err = capsys.readouterr().err
    assert code == 2 and f"more than {pr.MAX_COLUMNS} distinct columns" in err and "Traceback" not in err


def _header(width: int) -> str:
    return ",".join([*ROW, *(f"x{i}" for i in range(width - len(ROW)))])


def test_a_csv_header_wider_than_the_limit_is_refused_before_any_row_is_read(tmp_path):
    path = tmp_path / "wide.csv"
    # The row after it is unreadable: refusing the header must not read on to it.
    path.write_text(_header(pr.MAX_COLUMNS + 1) + "\n" + "x" * (pr.MAX_CELL_CHARS + 10) + "\n")
    with pytest.raises(pr.ProfileRowsError) as err:
        pf.read_profile_csv(path)
    assert [(p.line, p.field) for p in err.value.problems] == [(1, "header")]
    assert f"{pr.MAX_COLUMNS + 1} columns; a file holds at most {pr.MAX_COLUMNS}" in str(err.value)
    at_limit = tmp_path / "at-limit.csv"
    values = [str(v) for v in ROW.values()]
    at_limit.write_text(_header(pr.MAX_COLUMNS) + "\n" + ",".join(values) + "," * (pr.MAX_COLUMNS - len(values)) + "\n")
    assert len(pf.read_profile_csv(at_limit).columns) == len(pr.COLUMNS) + pr.MAX_COLUMNS - len(ROW)


def test_duplicate_header_columns_are_named_once_each(tmp_path):
    path = tmp_path / "dup.csv"
    path.write_text(",".join([*ROW, "x", "mode", "x", "x"]) + "\n")
    with pytest.raises(pr.ProfileRowsError, match=r"duplicate column\(s\): mode, x$"):
        pf.read_profile_csv(path)


def test_a_json_mode_list_of_objects_with_a_different_key_each_keeps_the_mode_columns(tmp_path):
    path = tmp_path / "modes.json"
    path.write_text(json.dumps({"modes": [{**MODE, "mode": f"m{i}", f"z{i}": 1} for i in range(5000)]}))
    df = pf.read_mode_table(path, "modes")
    assert list(df.columns) == ["mode", *MODE_FIELDS] and len(df) == 5000
    assert df["mode"].iloc[-1] == "m4999"
    devices = tmp_path / "devices.json"
    devices.write_text(json.dumps([{**MODE, "device": "nano", "predicted_time_s": 3}, {**MODE, "mode": None}]))
    df = pf.read_mode_table(devices, "modes")
    assert list(df.columns) == ["mode", *MODE_FIELDS, "device"] and df["mode"].iloc[0] == "m"


def test_a_csv_mode_list_with_a_wide_header_keeps_the_mode_columns_and_its_lines(tmp_path):
    path = tmp_path / "modes.csv"
    header = ",".join([*MODE, *(f"x{i}" for i in range(20_000))])
    path.write_text(header + "\n0,8,2265.6,1377,2133\n\n1,4,1200,900,1600,extra\n")
    df = pf.read_mode_table(path, "modes")
    assert list(df.columns) == list(MODE) and df["mode"].tolist() == ["0", "1"]
    assert df.attrs[pf.MODE_LINES_ATTR] == [2, 4]


def test_a_mode_list_that_is_no_list_of_objects_is_still_refused(tmp_path):
    path = tmp_path / "modes.json"
    path.write_text(json.dumps([MODE, 3]))
    with pytest.raises(InputError, match="must hold a JSON list of mode objects"):
        pf.read_mode_table(path, "modes")


def test_a_csv_mode_list_of_none_of_the_mode_columns_says_so(tmp_path):
    path = tmp_path / "modes.csv"
    path.write_text("foo,bar\n1,2\n")
    with pytest.raises(InputError, match="has none of the mode columns mode, cpu_cores") as err:
        pf.read_mode_table(path, "candidates")
    assert err.value.field == "candidates"


@pytest.mark.parametrize("row, cells", [("x,8,2265.6,1377,2133,99", 6), ("x,8,2265.6,1377,2133,99,98", 7),
                                        ('"a,b",8,2265.6,1377,2133', None), ("a,b,8,2265.6,1377,2133", 6)])
def test_a_csv_mode_row_with_more_cells_than_the_header_is_refused_naming_its_line(tmp_path, row, cells):
    """pandas took the surplus as an index: one cell more shifted the row (its label became the cores),
    two more failed with a TypeError out of the reader. A quoted label with a comma is one cell."""
    path = tmp_path / "modes.csv"
    path.write_text(f"mode,{','.join(MODE_FIELDS)}\ny,8,2265.6,1377,1600\n{row}\n")
    if cells is None:
        assert list(pf.read_mode_table(path, "modes")["mode"]) == ["y", "a,b"]
        return
    with pytest.raises(InputError) as err:
        pf.read_mode_table(path, "modes")
    assert err.value.field == "modes"
    assert f"line 3: {cells} cells under a header of 5 columns" in err.value.message


def test_trailing_empty_cells_of_a_spreadsheet_export_are_no_surplus(tmp_path):
    path = tmp_path / "modes.csv"
    path.write_text(f"mode,{','.join(MODE_FIELDS)}\nx,8,2265.6,1377,2133,\ny,2,1200,670,1333,,\n")
    table = pf.read_mode_table(path, "modes")
    assert list(table["mode"]) == ["x", "y"] and list(table["cpu_cores"]) == [8, 2]


def test_a_csv_mode_list_longer_than_the_row_limit_is_refused_before_its_table(tmp_path, monkeypatch):
    monkeypatch.setattr(pf, "MAX_ROWS", 5)
    path = tmp_path / "modes.csv"
    path.write_text(f"mode,{','.join(MODE_FIELDS)}\n" + "\n" * 10)  # blank lines are rows of the table
    with pytest.raises(InputError, match="more than 5 lines of modes"):
        pf.read_mode_table(path, "modes")


def test_a_csv_mode_list_of_exactly_the_row_limit_is_read_and_one_more_line_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(pf, "MAX_ROWS", 3)
    head, row = f"mode,{','.join(MODE_FIELDS)}\n", "x,8,2265.6,1377,2133\n"
    (tmp_path / "three.csv").write_text(head + row * 3)
    assert len(pf.read_mode_table(tmp_path / "three.csv", "modes")) == 3
    (tmp_path / "four.csv").write_text(head + row * 4)
    with pytest.raises(InputError, match="more than 3 lines of modes"):
        pf.read_mode_table(tmp_path / "four.csv", "modes")
