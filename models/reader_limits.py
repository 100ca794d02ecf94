"""Input limits of the readers (CLI files), apart from the row fields so that a verb's parser can name them in
its help without loading pandas (every verb builds every parser, ``restore``'s after a crash included)."""

from __future__ import annotations

#: Bytes of a file, rows, characters of one cell, distinct columns of a set of rows (a CSV header; the keys of
#: JSON rows, of training rows: the FIELDS and pass-through columns, 49 together, and a user's own). Rows of a
#: key each are rows x keys cells: more columns are refused first.
MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_ROWS = 200_000
MAX_CELL_CHARS = 10_000
MAX_COLUMNS = 100
