"""CLI input is bounded and explicit: cell/row/file limits, regular files only, conflicting rows reported,
physical bounds, and CSV output that no spreadsheet runs as a formula."""

from __future__ import annotations

import csv
import io
import os
import threading

import pandas as pd
import pytest
from jetpredict.models import profile_files as pf
from jetpredict.models import profile_rows as pr
from jetpredict.models.errors import InputError
from jetpredict.models.tables import write_table

from jetpredict.cli import main

HEADER = ("device,workload,mode,cpu_cores,cpu_mhz,gpu_mhz,emc_mhz,num_workers,batch_size,"
          "minibatches_per_epoch,epoch_time_s")


def _csv(path, *rows: str) -> str:
    path.write_text("\n".join([HEADER, *rows]) + "\n")
    return str(path)


def _fit(path: str, tmp_path, capsys) -> tuple[int, str]:
    code = main(["fit", "--device", "agx-xavier", "--profiles", path, "--out", str(tmp_path / "m.json")])
    return code, capsys.readouterr().err


def test_a_50_mb_cell_is_a_clear_error_with_exit_2(tmp_path, capsys):
    path = tmp_path / "big.csv"
    with path.open("w") as f:
        f.write(HEADER + "\n")
        f.write("agx-xavier,w," + "x" * 50_000_000 + ",8,1190.4,675.75,1600,4,16,100,10\n")
    code, err = _fit(str(path), tmp_path, capsys)
    assert code == 2
    assert f"longer than {pr.MAX_CELL_CHARS} characters" in err and "Traceback" not in err


@pytest.mark.parametrize("special", ["/dev/zero", "fifo", "dir"])
def test_only_regular_files_are_read(tmp_path, capsys, special):
    if special == "fifo":
        path = str(tmp_path / "pipe.csv")
        os.mkfifo(path)
    elif special == "dir":
        path = str(tmp_path)
    else:
        path = special
    done: list[tuple[int, str]] = []
    # A FIFO with no writer would block an open() forever: run in a thread so a regression fails, not hangs.
    worker = threading.Thread(target=lambda: done.append(_fit(path, tmp_path, capsys)), daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert done, f"reading {special} did not return"
    code, err = done[0]
    assert code == 2 and "not a regular file" in err


def test_file_and_row_limits(tmp_path, monkeypatch):
    path = _csv(tmp_path / "rows.csv", *[f"agx-xavier,w,m{i},8,1190.4,675.75,1600,4,16,100,{10 + i / 10}"
                                         for i in range(5)])
    monkeypatch.setattr(pr, "MAX_ROWS", 3)
    with pytest.raises(pr.ProfileRowsError, match="more than 3 rows"):
        pf.read_profile_csv(path)
    monkeypatch.setattr(pr, "MAX_ROWS", 100)
    with pytest.raises(InputError, match="the limit is 100"):
        pf.open_regular_file(path, max_bytes=100)
    assert len(pf.read_profile_csv(path)) == 5


def test_same_knobs_with_contradicting_times_are_reported(tmp_path):
    path = _csv(tmp_path / "dup.csv",
                "agx-xavier,w,a,8,1190.4,675.75,1600,4,16,100,509",
                "agx-xavier,w,b,8,1190.4,675.75,1600,4,16,100,668",
                "agx-xavier,w,c,8,1190.4,905.25,1600,4,16,100,400")
    with pytest.raises(pr.ProfileRowsError) as err:
        pf.read_profile_csv(path)
    message = str(err.value)
    assert "lines 2, 3 measure the same mode" in message and "509..668 s" in message
    # Repeated runs that agree are fine; so are the same knobs with another batch size.
    ok = _csv(tmp_path / "repeat.csv",
              "agx-xavier,w,a,8,1190.4,675.75,1600,4,16,100,509",
              "agx-xavier,w,a,8,1190.4,675.75,1600,4,16,100,520",
              "agx-xavier,w,b,8,1190.4,675.75,1600,4,32,100,800")
    assert len(pf.read_profile_csv(ok)) == 3


def test_a_row_without_workers_conflicts_with_one_of_the_default_workers(tmp_path):
    """A blank num_workers is read as the default 4, so these are the same mode measured twice."""
    path = _csv(tmp_path / "dup.csv",
                "agx-xavier,w,a,8,1190.4,675.75,1600,,16,100,509",
                f"agx-xavier,w,a,8,1190.4,675.75,1600,{pr.DEFAULT_NUM_WORKERS},16,100,1018")
    with pytest.raises(pr.ProfileRowsError) as err:
        pf.read_profile_csv(path)
    assert [(p.line, p.field) for p in err.value.problems] == [(3, "epoch_time_s")]
    assert "lines 2, 3 measure the same mode" in str(err.value)


def test_one_label_with_different_knobs_is_an_error_but_custom_is_generic(tmp_path):
    path = _csv(tmp_path / "label.csv",
                "agx-xavier,w,a,8,1190.4,675.75,1600,4,16,100,509",
                "agx-xavier,w,a,4,1190.4,675.75,1600,4,16,100,600")
    with pytest.raises(pr.ProfileRowsError, match="label 'a' has knobs"):
        pf.read_profile_csv(path)
    custom = _csv(tmp_path / "custom.csv",
                  "agx-xavier,w,custom,8,1190.4,675.75,1600,4,16,100,509",
                  "agx-xavier,w,custom,4,1190.4,675.75,1600,4,16,100,600")
    assert len(pf.read_profile_csv(custom)) == 2


def test_physical_bounds(tmp_path):
    path = _csv(tmp_path / "huge.csv", "agx-xavier,w,a,8,1190.4,675.75,1600,4,16,100,1e308")
    with pytest.raises(pr.ProfileRowsError, match="epoch_time_s: must be <= 1e\\+08 s"):
        pf.read_profile_csv(path)


def test_csv_output_is_safe_against_formula_injection(tmp_path):
    df = pd.DataFrame({"workload": ["=HYPERLINK(\"http://x\")", "+1", "@SUM(A1)", "\tx", "-2", "plain"],
                       "epoch_time_s": [-1.5, 2.0, 3.0, 4.0, 5.0, 6.0]})
    out = io.StringIO()
    write_table(df, "csv", out)
    cells = list(csv.reader(io.StringIO(out.getvalue())))[1:]
    assert [c[0] for c in cells] == ["'=HYPERLINK(\"http://x\")", "'+1", "'@SUM(A1)", "'\tx", "'-2", "plain"]
    assert cells[0][1] == "-1.5"  # numbers untouched
    # Profile rows written by us read back with their original names.
    rows = [{"device": "agx-xavier", "workload": "=cmd|' /C calc'!A0", "mode": "a", "cpu_cores": 8,
             "cpu_mhz": 1190.4, "gpu_mhz": 675.75, "emc_mhz": 1600, "batch_size": 16,
             "minibatches_per_epoch": 100, "epoch_time_s": 10.0}]
    pf.write_profile_csv(rows, tmp_path / "rows.csv")
    assert "'=cmd" in (tmp_path / "rows.csv").read_text()
    assert pf.read_profile_csv(tmp_path / "rows.csv")["workload"].iloc[0] == "=cmd|' /C calc'!A0"


TRICKY_TEXTS = ["=x", "'=x", "''=x", "'x", "'", "-1", "+a", "@", "'@", "plain"]


def test_every_text_cell_reads_back_as_written_through_the_formula_escape(tmp_path):
    """A user's own leading quote is kept: ``'=x`` once read back as ``=x`` (and ``'x`` would, were any leading
    quote taken off)."""
    rows = [{"device": "agx-xavier", "workload": text, "mode": "a", "cpu_cores": 8, "cpu_mhz": 1190.4,
             "gpu_mhz": 675.75, "emc_mhz": 1600, "batch_size": 16, "minibatches_per_epoch": 100,
             "epoch_time_s": 10.0} for text in TRICKY_TEXTS]
    pf.write_profile_csv(rows, tmp_path / "rows.csv")
    assert list(pf.read_profile_csv(tmp_path / "rows.csv")["workload"]) == TRICKY_TEXTS
    cells = [c[1] for c in list(csv.reader((tmp_path / "rows.csv").open()))[1:]]
    assert not any(c.startswith(pr.FORMULA_PREFIXES) for c in cells)  # still nothing a spreadsheet runs


def test_a_cell_an_older_version_escaped_reads_as_before():
    assert [pr.unescape_formula(c) for c in ("'=x", "'-1", "'x", "x", "'")] == ["=x", "-1", "'x", "x", "'"]


def _row_lines(n: int) -> list[str]:
    return [f"agx-xavier,w,m{i},8,1190.4,675.75,1600,4,16,100,{10 + i / 10}" for i in range(n)]


def test_the_row_limit_takes_exactly_that_many_rows_and_refuses_one_more(tmp_path, monkeypatch):
    """MAX_ROWS is the most rows a file or a set of records may hold: the limit itself passes, one more is
    refused (naming ``rows`` and the line of the first row too many). The CSV reader stops at it before
    the validator sees the rows, and the validator holds records from elsewhere (JSON) to it: each on its own."""
    at_limit, over = _csv(tmp_path / "three.csv", *_row_lines(3)), _csv(tmp_path / "four.csv", *_row_lines(4))
    monkeypatch.setattr(pf, "MAX_ROWS", 3)  # the reader's limit alone
    assert len(pf.read_profile_csv(at_limit)) == 3
    with pytest.raises(pr.ProfileRowsError, match="more than 3 rows") as err:
        pf.read_profile_csv(over)
    assert [(p.line, p.field) for p in err.value.problems] == [(5, "rows")]  # line 1 is the header
    monkeypatch.setattr(pf, "MAX_ROWS", 100)
    monkeypatch.setattr(pr, "MAX_ROWS", 3)  # the validator's alone
    records = list(csv.DictReader(io.StringIO("\n".join([HEADER, *_row_lines(4)]))))
    assert len(pr.validate_records(records[:3], first_line=2)) == 3
    with pytest.raises(pr.ProfileRowsError, match="more than 3 rows") as err:
        pr.validate_records(records, first_line=2)
    assert [(p.line, p.field) for p in err.value.problems] == [(5, "rows")]


def _row_with_meter(label: str, meter: str) -> str:
    return f"agx-xavier,w,{label},8,1190.4,675.75,1600,4,16,100,10,{meter}"


def _rows_with_meter_text(*rows: str) -> io.StringIO:
    return io.StringIO("\n".join([f"{HEADER},power_meter", *rows]) + "\n")


@pytest.mark.parametrize("line", [2, 4])
def test_an_over_long_cell_names_its_own_line(line):
    """The DictReader's line_num moves on only once a row has parsed: the error named the line before."""
    rows = [_row_with_meter(f"m{i}", "ina3221:VDD_IN") for i in range(line - 2)]
    text = _rows_with_meter_text(*rows, _row_with_meter("big", "x" * 50_000))
    with pytest.raises(pr.ProfileRowsError) as err:
        pf.read_profile_csv(text)
    assert [(p.line, p.field) for p in err.value.problems] == [(line, "file")]
    assert f"line {line}: file: not a readable CSV: a cell is longer than {pr.MAX_CELL_CHARS}" in err.value.message


@pytest.mark.parametrize("quote", ["", '"'], ids=["bare", "quoted"])
def test_a_cell_of_the_limit_is_read_and_one_more_character_is_refused(quote):
    """MAX_CELL_CHARS is the longest cell, quoted or not (the csv module does not count a cell's quotes)."""
    at_limit = "x" * pr.MAX_CELL_CHARS
    df = pf.read_profile_csv(_rows_with_meter_text(_row_with_meter("a", f"{quote}{at_limit}{quote}")))
    assert df.loc[0, "power_meter"] == at_limit
    over = _rows_with_meter_text(_row_with_meter("a", f"{quote}{at_limit}x{quote}"))
    with pytest.raises(pr.ProfileRowsError, match=f"a cell is longer than {pr.MAX_CELL_CHARS} characters") as err:
        pf.read_profile_csv(over)
    assert [(p.line, p.field) for p in err.value.problems] == [(2, "file")]


def test_a_json_profile_file_nested_too_deeply_exits_2_naming_the_flag(tmp_path, capsys):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000, encoding="utf-8")
    code, err = _fit(str(path), tmp_path, capsys)
    assert code == 2, err
    assert f"--profiles file {path} is nested too deeply" in err and "recursion" not in err


def test_the_file_size_limit_takes_exactly_max_bytes_and_refuses_one_more(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_bytes(b"x" * 1000)
    with pf.open_regular_file(path, max_bytes=1000) as f:
        assert len(f.read()) == 1000
    with pytest.raises(InputError, match=f"{path} is 1000 bytes; the limit is 999") as err:
        pf.open_regular_file(path, max_bytes=999)
    assert err.value.field == "profiles"


@pytest.mark.parametrize("column", ["power_meter", "my_note"])
def test_a_json_row_holds_no_longer_text_cell_than_a_csv_row(column):
    """A text pass-through (or unknown) column of a JSON row had no length check: 50,000 characters were kept
    where the CSV reader and the HTTP schema refuse more than MAX_CELL_CHARS."""
    row = dict(zip(HEADER.split(","), _row_with_meter("a", "").split(",")[:-1], strict=True))
    at_limit = pr.validate_records([{**row, column: "x" * pr.MAX_CELL_CHARS}])
    assert at_limit.loc[0, column] == "x" * pr.MAX_CELL_CHARS
    with pytest.raises(pr.ProfileRowsError) as err:
        pf.read_profile_json([{**row, column: "x" * (pr.MAX_CELL_CHARS + 1)}])
    assert [(p.line, p.field) for p in err.value.problems] == [(1, column)]
    assert f"characters long; at most {pr.MAX_CELL_CHARS}" in err.value.message
