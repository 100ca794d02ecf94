"""Writing tables for the command line: pure CSV, JSON or an aligned text table.

``--format csv`` output is only CSV (one header line, LF line ends, no comments): logs go to stderr.
"""

from __future__ import annotations

import json
import math
import sys
from typing import TextIO

import pandas as pd

FORMATS = ("table", "csv", "json")


def _json_value(value: object) -> object:
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item"):
        return _json_value(value.item())
    return value


def write_table(df: pd.DataFrame, fmt: str = "table", out: TextIO | None = None,
                float_digits: int = 10) -> None:
    """Write ``df`` to ``out`` (stdout by default) as ``table``, ``csv`` or ``json`` (a list of objects)."""
    out = out or sys.stdout
    if fmt == "csv":
        df.to_csv(out, index=False, lineterminator="\n", float_format=f"%.{float_digits}g")
    elif fmt == "json":
        records = [{k: _json_value(v) for k, v in r.items()} for r in df.to_dict(orient="records")]
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
