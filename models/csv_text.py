"""CSV text that a spreadsheet opens as written: the one cell rule of the CLI's ``--format csv``, the profile
CSVs we write and the API's CSV answers.

pandas' ``to_csv`` quotes a cell only where it holds a comma, a quote or a line end; a spreadsheet whose locale
separates lists with ``;`` splits an unquoted cell there, and a formula after it (``x;=cmd|...``) would run.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TextIO

import numpy as np
import pandas as pd
from jetpredict.models.profile_rows import escape_formula

#: Characters that put a text cell in quotes: the separators a spreadsheet may split at, the quote, line ends.
QUOTED_CHARS = frozenset(',;"\n\r')


def csv_text_cell(value: object) -> str:
    """A text cell: formula-safe (:func:`escape_formula`), quoted when it holds one of :data:`QUOTED_CHARS`;
    empty for an unknown value (None)."""
    if value is None:
        return ""
    text = str(escape_formula(value))
    if not QUOTED_CHARS.isdisjoint(text):
        return '"' + text.replace('"', '""') + '"'
    return text


def _number_text(value: float | np.floating, float_format: str | None) -> str:
    """A float as text (``float_format``, else the shortest text that reads back as it, at its own precision:
    a float32 0.1 is ``0.1``); empty where it is NaN or infinite (no value)."""
    if not math.isfinite(value):
        return ""
    return float_format % value if float_format else str(value)


def _cell(value: object, float_format: str | None) -> str:
    """One cell of an object column: numbers and booleans as in numeric columns, anything else as text."""
    if value is None or value is pd.NA or value is pd.NaT:
        return ""
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        return _number_text(value, float_format)
    return csv_text_cell(value)


def _column_cells(column: pd.Series, float_format: str | None) -> list[str]:
    """``column`` as CSV cells: floats with ``float_format`` (NaN and infinities empty), whole and boolean values
    as Python writes them, text through :func:`csv_text_cell`."""
    values = column.to_numpy(dtype=object) if column.dtype.kind not in "fiub" else column.to_numpy()
    if values.dtype.kind == "f":
        # numpy scalars below double precision keep theirs (tolist() would widen them: 0.10000000149011612)
        return [_number_text(v, float_format) for v in (values.tolist() if values.itemsize == 8 else values)]
    if values.dtype.kind in "iub":
        return list(map(str, values.tolist()))
    return [_cell(v, float_format) for v in values.tolist()]


def write_frame_csv(df: pd.DataFrame, out: str | Path | TextIO, float_format: str | None = None) -> None:
    """Write ``df`` as CSV (a header line, LF line ends, no index) to a text stream or a file, overwritten: text
    cells (and the header) by :func:`csv_text_cell`'s rule, numbers and booleans as :func:`_column_cells` writes
    them."""
    columns = [_column_cells(df.iloc[:, i], float_format) for i in range(df.shape[1])]
    if len(columns) == 1:  # an empty line would be no row to a reader: an unknown lone cell is written ""
        columns = [[cell or '""' for cell in columns[0]]]
    lines = [",".join(map(csv_text_cell, map(str, df.columns)))]
    lines += [",".join(row) for row in zip(*columns, strict=True)]
    text = "\n".join(lines) + "\n"
    if isinstance(out, str | Path):
        Path(out).write_text(text, encoding="utf-8", newline="")
    else:
        out.write(text)
