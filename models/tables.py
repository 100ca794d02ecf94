"""Writing tables for the command line: pure CSV, JSON or an aligned text table.

``--format csv`` output is only CSV (one header line, LF line ends, no comments): logs go to stderr.
Importing it loads no pandas (every verb's parser takes :data:`FORMATS`); writing a table does.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    import pandas as pd

FORMATS = ("table", "csv", "json")


#: Characters a ``table`` line may take (a terminal); wider columns are left to ``csv`` and ``json``.
TABLE_WIDTH = 120


def _render(df: pd.DataFrame) -> str:
    return df.to_string(index=False, na_rep="-", float_format=lambda v: f"{v:.6g}")


def narrow(df: pd.DataFrame, columns: Sequence[str] | None = None, width: int = TABLE_WIDTH) -> pd.DataFrame:
    """``df`` for a ``table``: only ``columns`` (those present, in that order; default all), then columns
    dropped from the right until every line fits in ``width`` characters (the first column always stays).
    Says on standard error what was left out."""
    shown = df[[c for c in columns if c in df.columns]] if columns is not None else df
    while shown.shape[1] > 1 and not shown.empty and max(map(len, _render(shown).splitlines())) > width:
        shown = shown.iloc[:, :-1]
    if shown.shape[1] < df.shape[1]:
        print(f"(table: {shown.shape[1]} of {df.shape[1]} columns, within {width} characters; --format csv "
              "or json writes all of them)", file=sys.stderr)
    return shown


def write_table(df: pd.DataFrame, fmt: str = "table", out: TextIO | None = None,
                float_digits: int = 10, table_columns: Sequence[str] | None = None) -> None:
    """Write ``df`` to ``out`` (stdout by default) as ``table``, ``csv`` or ``json`` (a list of objects).

    A ``table`` is at most :data:`TABLE_WIDTH` characters wide: ``table_columns`` first (see :func:`narrow`)."""
    from jetpredict.models.csv_text import write_frame_csv
    from jetpredict.models.jsonsafe import json_safe

    out = out or sys.stdout
    if fmt == "csv":
        # Names (workloads, labels) come from users: no cell may run as a spreadsheet formula. An infinite
        # figure (no bound) is an empty cell, as it is null in JSON.
        write_frame_csv(df, out, float_format=f"%.{float_digits}g")
    elif fmt == "json":
        records = json_safe(df.to_dict(orient="records"))
        json.dump(records, out, indent=2)
        out.write("\n")
    elif fmt == "table":
        if df.empty:
            out.write("(no rows)\n")
        else:
            out.write(_render(narrow(df, table_columns)))
            out.write("\n")
    else:
        raise ValueError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
