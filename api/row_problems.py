"""The problems of JSON profile rows other than their cells' JSON types, by cell, for the 422 that names the
cells of the wrong type (the rows' JSON-type check in :mod:`api.schemas`): a client learns of every problem of its rows
in one answer, not of one kind after each resend.

The rules are :mod:`models.profile_rows`' (unknown columns, then each row's own problems), in the words the
CLI uses for them; the caller names a cell of the wrong JSON type by its type rule alone and drops what is
said of it here.
"""

from __future__ import annotations

from collections.abc import Sequence

from jetpredict.models.profile_rows import INDEX_NAMES, ProfileRowsError, unknown_columns, validate_records

#: Where a problem is: (0-based index of the row, column), or (None, FIELD) for the rows as a whole.
Cell = tuple[int | None, str]


def value_problems(records: Sequence[object]) -> dict[Cell, list[str]]:
    """``{cell: [messages]}`` for ``records``: unknown columns, then each row's problems under the value
    rules. Rows are not compared with each other (:func:`models.profile_rows.mode_conflicts`): the caller
    found cells of the wrong type, and rows are compared once no row has a problem, as the row checks do."""
    out: dict[Cell, list[str]] = {}
    for key, messages in unknown_columns(records).items():
        # Keyed "rows.I.COLUMN" (I 0-based; a column's name may hold dots), or "rows" for those not named.
        _, _, where = key.partition(".")
        index, _, column = where.partition(".")
        out[(int(index), column) if where else (None, key)] = list(messages)
    try:
        validate_records(records, names=INDEX_NAMES, compare=False)
    except ProfileRowsError as exc:
        for p in exc.problems:  # rows are numbered from 1 in the problems; line 0 is the rows as a whole
            out.setdefault((p.line - 1, p.field) if p.line else (None, p.field), []).append(p.message)
    return out
