"""Writing tables for the command line: pure CSV, JSON or an aligned text table.

``--format csv`` output is only CSV (one header line, LF line ends, no comments): logs go to stderr.
"""

from __future__ import annotations

import json
import sys
from typing import TextIO

import pandas as pd
from jetpredict.models.jsonsafe import json_safe
from jetpredict.models.profile_rows import csv_safe

FORMATS = ("table", "csv", "json")


def write_table(df: pd.DataFrame, fmt: str = "table", out: TextIO | None = None,
                float_digits: int = 10) -> None:
    """Write ``df`` to ``out`` (stdout by default) as ``table``, ``csv`` or ``json`` (a list of objects)."""
    out = out or sys.stdout
    if fmt == "csv":
        # Names (workloads, labels) come from users: no cell may run as a spreadsheet formula.
        csv_safe(df).to_csv(out, index=False, lineterminator="\n", float_format=f"%.{float_digits}g")
    elif fmt == "json":
        records = json_safe(df.to_dict(orient="records"))
        json.dump(records, out, indent=2)
        out.write("\n")
    elif fmt == "table":
        if df.empty:
            out.write("(no rows)\n")
        else:
            out.write(df.to_string(index=False, na_rep="-", float_format=lambda v: f"{v:.6g}"))
            out.write("\n")
    else:
        raise ValueError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
