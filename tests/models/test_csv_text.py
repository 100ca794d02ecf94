"""The CSV we write (``--format csv``, profile CSVs): every cell as a spreadsheet opens it, in a locale that
separates lists with ``,`` or with ``;``."""

from __future__ import annotations

import csv
import io
import math

import numpy as np
import pandas as pd
from jetpredict.models import profile_files as pf
from jetpredict.models import profile_rows as pr
from jetpredict.models.csv_text import csv_text_cell, write_frame_csv
from jetpredict.models.tables import write_table

NAMES = ["x;=1+2", "a,b", 'say "hi"', "two\nlines", "=cmd", "plain"]


def _row(workload: str) -> dict:
    return {"device": "agx-xavier", "workload": workload, "mode": "a", "cpu_cores": 8, "cpu_mhz": 1190.4,
            "gpu_mhz": 675.75, "emc_mhz": 1600, "batch_size": 16, "minibatches_per_epoch": 100,
            "epoch_time_s": 10.0}


def test_no_cell_runs_as_a_formula_where_a_spreadsheet_splits_at_semicolons():
    """``x;=1+2`` unquoted is two cells in such a locale, the second a formula (pandas' to_csv left it so)."""
    out = io.StringIO()
    write_table(pd.DataFrame({"workload": NAMES, "epoch_time_s": 1.5}), "csv", out)
    for separator in ",;":
        cells = [c for line in csv.reader(io.StringIO(out.getvalue()), delimiter=separator) for c in line]
        assert not any(c.startswith(pr.FORMULA_PREFIXES) for c in cells), (separator, cells)
    rows = list(csv.reader(io.StringIO(out.getvalue())))
    assert [r[0] for r in rows[1:]] == ["x;=1+2", "a,b", 'say "hi"', "two\nlines", "'=cmd", "plain"]


def test_profile_csvs_read_back_every_name_as_written(tmp_path):
    pf.write_profile_csv([_row(name) for name in NAMES], tmp_path / "rows.csv")
    assert '"x;=1+2"' in (tmp_path / "rows.csv").read_text(encoding="utf-8")
    assert list(pf.read_profile_csv(tmp_path / "rows.csv")["workload"]) == NAMES


def test_each_kind_of_value_is_written_as_python_writes_it_and_unknowns_are_empty():
    df = pd.DataFrame({"f": [1.5, math.nan, math.inf], "i": [1, 2, 3], "n": pd.array([4, None, 6], dtype="Int64"),
                       "b": [True, False, True], "o": [None, 2.25, "t;u"], "mixed": [7, False, -math.inf]})
    out = io.StringIO()
    write_frame_csv(df, out, float_format="%.3g")
    assert out.getvalue() == 'f,i,n,b,o,mixed\n1.5,1,4,True,,7\n,2,,False,2.25,False\n,3,6,True,"t;u",\n'
    assert csv_text_cell(None) == "" and csv_text_cell("@x") == "'@x"


def test_a_frame_without_rows_is_its_header_line(tmp_path):
    write_frame_csv(pd.DataFrame(columns=["mode", "epoch_time_s"]), tmp_path / "empty.csv")
    assert (tmp_path / "empty.csv").read_text(encoding="utf-8") == "mode,epoch_time_s\n"


def test_a_lone_column_keeps_its_unknown_cells_as_rows_and_float32_its_own_digits(tmp_path):
    """One column: an empty line would be skipped by every reader (pandas' read_csv too), losing the row."""
    out = io.StringIO()
    write_frame_csv(pd.DataFrame({"workload": ["a", None, "b"]}), out)
    assert out.getvalue() == 'workload\na\n""\nb\n'
    assert pd.read_csv(io.StringIO(out.getvalue()), keep_default_na=False)["workload"].tolist() == ["a", "", "b"]
    write_frame_csv(pd.DataFrame({"w": np.array([0.1, np.nan, 1e-7], dtype=np.float32)}), tmp_path / "f.csv")
    assert (tmp_path / "f.csv").read_bytes() == b'w\n0.1\n""\n1e-07\n'
    out = io.StringIO()
    write_frame_csv(pd.DataFrame({"o": pd.Series([np.float32(0.1), "x"], dtype=object), "n": 1}), out)
    assert out.getvalue() == "o,n\n0.1,1\nx,1\n"  # in a column of mixed values too
