"""``plan --after`` under caps no mode can meet exits 1 and still writes a document a script can parse, as
``recommend`` does: CSV keeps its header (the provenance columns), JSON is an empty list."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest

from jetpredict.cli import main


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_caps_no_mode_meets_leave_an_empty_answer_not_nothing(resnet_cli_fit, capsys, fmt):
    profiles = resnet_cli_fit(("g", "a"))
    assert main(["plan", "--device", "agx-xavier", "--after", str(profiles / "resnet.csv"),
                 "--objective", "min-time", "--max-power-w", "1", "--format", fmt]) == 1
    out, err = capsys.readouterr()
    assert "relax them (profiling more cannot help)" in err
    if fmt == "json":
        assert json.loads(out) == []
    else:
        table = pd.read_csv(io.StringIO(out))
        assert table.empty and {"mode", "reference_source", "profiled_modes"} <= set(table.columns)


def test_a_table_under_such_caps_prints_no_empty_table(resnet_cli_fit, capsys):
    profiles = resnet_cli_fit(("g", "a"))
    assert main(["plan", "--device", "agx-xavier", "--after", str(profiles / "resnet.csv"),
                 "--max-power-w", "1"]) == 1
    assert capsys.readouterr().out == ""
