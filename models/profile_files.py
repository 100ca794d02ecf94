"""Profile-row files: reading CSV/JSON files and streams of profile rows (size- and cell-limited, regular
files only, never executing anything) and writing them back as CSV safe to open in a spreadsheet; the
names of ``profile --out`` and its JSON kept within the readers' limit.

The row format and its validation live in :mod:`jetpredict.models.profile_rows`.
"""

from __future__ import annotations

import contextlib
import csv
import difflib
import errno
import io
import math
import os
import stat
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from jetpredict.models.catalogue import MODE_FIELDS
from jetpredict.models.csv_text import write_frame_csv
from jetpredict.models.errors import InputError, ModeRowError, cli_flag
from jetpredict.models.jsonsafe import json_safe
from jetpredict.models.numbers import is_blank
from jetpredict.models.profile_rows import (
    COLUMNS,
    COUNT_COLUMNS,
    FIELD_BY_NAME,
    FIELDS,
    PASS_THROUGH_COLUMNS,
    PASS_THROUGH_NUMBERS,
    ProfileRowsError,
    RowProblem,
    validate_records,
)
from jetpredict.models.reader_limits import MAX_CELL_CHARS, MAX_COLUMNS, MAX_FILE_BYTES, MAX_ROWS


def open_regular_file(path: str | Path, flag: str = "profiles", max_bytes: int = MAX_FILE_BYTES):
    """Open ``path`` for binary reading if it is a regular file of at most ``max_bytes``.

    Devices (``/dev/zero``), FIFOs (which would block), sockets and directories are refused with an
    :class:`InputError` naming ``flag``; the check is on the opened file (no race with a rename).
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise InputError(f"--{flag} file {path} does not exist", flag) from None
    except OSError as exc:
        raise InputError(f"--{flag} file {path} cannot be opened: {exc.strerror}", flag) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"--{flag} {path} is not a regular file (a device, FIFO, socket or directory); "
                             "give a CSV or JSON file", flag)
        if st.st_size > max_bytes:
            raise InputError(f"--{flag} file {path} is {st.st_size} bytes; the limit is {max_bytes}", flag)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


@contextlib.contextmanager
def _cell_limit(chars: int):
    # The csv module's limit is process-wide: raise it to ours for this read only.
    previous = csv.field_size_limit(chars)
    try:
        yield
    finally:
        csv.field_size_limit(previous)


def misspelt_as(name: str, header: Sequence[str]) -> str | None:
    """The column of ``header`` that is no known column and is closest to ``name`` (a column the header
    lacks), by :func:`difflib.get_close_matches`' rule; None when none is close."""
    unknown = [h for h in header if h not in FIELD_BY_NAME and h not in PASS_THROUGH_COLUMNS]
    close = difflib.get_close_matches(name, unknown, n=1)
    return close[0] if close else None


def read_profile_csv(source: str | Path | io.TextIOBase, flag: str = "profiles") -> pd.DataFrame:
    """Read and validate a profile-row CSV file (path or open text stream), streaming it row by row.

    Limits: :data:`MAX_FILE_BYTES` per file, :data:`MAX_ROWS` rows and :data:`MAX_CELL_CHARS` per cell;
    anything beyond is a :class:`ProfileRowsError` / :class:`InputError` (CLI exit status 2). ``flag``: the
    command-line flag (or field) the file came from, named by file errors.
    """
    what = str(source) if isinstance(source, str | Path) else "profile rows"
    if isinstance(source, str | Path):
        with open_regular_file(source, flag) as raw, \
                io.TextIOWrapper(raw, encoding="utf-8-sig", newline="") as text:
            return _read_csv_stream(text, what, flag)
    return _read_csv_stream(source, what, flag)


def _read_csv_stream(text: io.TextIOBase, what: str, flag: str = "profiles") -> pd.DataFrame:
    reader = csv.DictReader(text)
    records, lines = [], []
    try:
        with _cell_limit(MAX_CELL_CHARS):  # the csv module counts a cell's text, not the quotes around it
            fieldnames = reader.fieldnames
            if not fieldnames:
                raise ProfileRowsError([RowProblem(0, "file", "is empty: expected a CSV header and rows")], what)
            header = [h.strip() for h in fieldnames]
            if len(header) > MAX_COLUMNS:  # before any row: each would be filled out to the whole header
                raise ProfileRowsError([RowProblem(1, "header", f"has {len(header)} columns; a file holds at most "
                                                                f"{MAX_COLUMNS}")], what)
            reader.fieldnames = header  # " cpu_mhz" is the cpu_mhz column, not an unknown extra one
            if duplicates := _duplicates(header):
                raise ProfileRowsError([RowProblem(1, "header", f"duplicate column(s): {', '.join(duplicates)}")],
                                       what)
            missing = [f.name for f in FIELDS if f.required and f.name not in header
                       and f.name not in MODE_FIELDS]
            if missing:
                named = [name if (near := misspelt_as(name, header)) is None
                         else f"{name} (the header has {near!r}: the same, misspelt?)" for name in missing]
                raise ProfileRowsError(
                    [RowProblem(1, "header", f"missing required column(s): {', '.join(named)}")], what)
            short: list[RowProblem] = []
            for record in reader:
                if len(records) >= MAX_ROWS:
                    raise ProfileRowsError([RowProblem(reader.line_num, "rows",
                                                       f"more than {MAX_ROWS} rows; split the file")], what)
                # DictReader fills the cells a row lacks with None: a file cut off inside its last row would
                # read as a row of empty cells, its blank source "measured".
                if (absent := sum(value is None for key, value in record.items() if key is not None)):
                    short.append(RowProblem(reader.line_num, "_row", f"has {len(header) - absent} cells, the "
                                            f"header {len(header)}: is the file cut off?"))
                records.append(record)
                lines.append(reader.line_num)  # physical line of the record's last line, blank lines counted
            if short:
                raise ProfileRowsError(short, what)
    except csv.Error as exc:
        # The csv reader's own count: the DictReader's moves on only once a row has parsed (the line before).
        line = reader.reader.line_num
        message = str(exc)
        if "field larger than field limit" in message:
            message = f"a cell is longer than {MAX_CELL_CHARS} characters"
        raise ProfileRowsError([RowProblem(line, "file", f"not a readable CSV: {message}")], what) from None
    except UnicodeDecodeError:
        raise InputError(f"--{flag} file {what} is not UTF-8 text", flag) from None
    return validate_records(records, what=what, line_numbers=lines)


#: How errors name a JSON file's rows (:func:`validate_records`' ``names``): by their 0-based index, as its mode
#: lists' errors name theirs (``--modes FILE item 3``).
ITEM_NAMES = ("item", "items", -1)


def read_profile_json(payload: object, path: str | Path | None = None, flag: str = "profiles") -> pd.DataFrame:
    """Validate rows given as JSON: a list of row objects, or ``{"rows": [...]}``. ``path``: the file of
    ``--flag`` they came from, which errors then name, with each bad row as its ``item N`` (from 0)."""
    return _validate_json_rows(_json_rows(payload), path, flag)


def _json_rows(payload: object) -> object:
    """The rows of a JSON payload: ``{"rows": [...]}``'s, or the payload itself (a non-list is refused by
    :func:`_validate_json_rows`)."""
    return payload.get("rows") if isinstance(payload, Mapping) else payload


def _validate_json_rows(rows: object, path: str | Path | None, flag: str) -> pd.DataFrame:
    """Validate the unwrapped rows of :func:`read_profile_json`'s payload (its ``path`` and ``flag``)."""
    if not isinstance(rows, list):
        if path is None:
            raise InputError("profile rows must be a JSON list of row objects", "rows")
        raise InputError(f"--{flag} file {path} holds no profile rows: expected a JSON list of row objects "
                         "or {\"rows\": [...]}", flag)
    if path is None:
        return validate_records(rows)
    return validate_records(rows, what=f"--{flag} {path}", names=ITEM_NAMES)


def _duplicates(header: Sequence[str]) -> list[str]:
    """The names (stripped) that ``header`` holds more than once, sorted."""
    return sorted(name for name, count in Counter(header).items() if count > 1)


def read_profile_rows(path: str | Path, flag: str = "profiles") -> pd.DataFrame:
    """Read a ``.csv`` or ``.json`` profile-row file (a regular file within the readers' limits).

    ``flag``: the command-line flag the path came from (``profiles``, ``after``, ``reference``), so that
    an error about the file names the flag the user typed.
    """
    if is_json_path(path):
        return _validate_json_rows(_nan_numbers_as_text(_json_rows(_read_json_file(path, flag))), path, flag)
    return read_profile_csv(path, flag)


#: The literal a JSON file writes NaN as, which Python's reader takes though strict JSON has none.
JSON_NAN = "NaN"


#: The row columns that hold numbers (typed fields and the numeric pass-through columns).
_NUMBER_COLUMNS = frozenset({name for name, field in FIELD_BY_NAME.items() if field.kind is not str}
                            | set(PASS_THROUGH_NUMBERS))


def _nan_numbers_as_text(rows: object) -> object:
    """``rows`` (unwrapped by :func:`_json_rows`) with a NaN in a row's number column put back as its literal
    ``NaN``, which the rules refuse as the CSV reader's ``nan`` ("must be a finite number"): in a file it
    can only be written, but as a float the rules read it as an empty cell ("is required and empty"). Text
    columns keep the float."""
    if not isinstance(rows, list):
        return rows  # _validate_json_rows names what the file lacks
    return [{key: JSON_NAN if key in _NUMBER_COLUMNS and isinstance(value, float) and math.isnan(value) else value
             for key, value in row.items()} if isinstance(row, Mapping) else row for row in rows]


def is_json_path(path: str | Path) -> bool:
    """Whether a file given on the command line is read (and written) as JSON: its name ends in .json."""
    return str(path).lower().endswith(".json")


def _read_json_file(path: str | Path, flag: str) -> object:
    """The JSON document of a regular file within the readers' limits; InputError naming ``--flag``."""
    import json

    with open_regular_file(path, flag) as raw:
        data = raw.read()
    try:
        return json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise InputError(f"--{flag} file {path} is not UTF-8 text", flag) from None
    except RecursionError:
        raise InputError(f"--{flag} file {path} is nested too deeply", flag) from None
    except ValueError as exc:
        # JSONDecodeError is a ValueError; so is an integer past Python's int-string digit limit.
        raise InputError(f"--{flag} file {path} is not valid JSON: {exc}", flag) from None


#: ``DataFrame.attrs`` key of a CSV mode list's line numbers in its file, one per row (header = line 1).
MODE_LINES_ATTR = "lines"
#: The columns a mode list is read for: the label, the device it is for and the knobs. Others (a plan's
#: predictions) are dropped before the table is built: objects of a key each would make it objects x keys.
MODE_LIST_COLUMNS = ("mode", *MODE_FIELDS, "device")
#: The text columns of a mode list, read stripped (a number's spaces pandas ignores itself).
MODE_TEXT_COLUMNS = frozenset({"mode", "device"})


def read_mode_table(path: str | Path, flag: str) -> pd.DataFrame:
    """A mode list (``--modes``, ``--candidates``): a CSV, or a JSON list of objects (``{"modes": [...]}``
    too, or the rows of a profile document: ``{"rows": [...]}`` as ``profile --out X.json`` writes, whose
    ``modes`` are measurement details), with the mode columns; ``plan --out`` writes either format. An
    object with ``rows`` beside a ``modes`` list of mode objects is refused (which is meant is a guess).
    Labels stay text ("0" is a preset id, not a number); the knobs are checked by whoever takes the modes.
    In a CSV only an empty cell is missing (``N/A`` is text, refused as a knob by the mode checks); its rows
    keep their file lines in ``attrs[MODE_LINES_ATTR]``, for errors that name them. Only the
    :data:`MODE_LIST_COLUMNS` are read; a CSV row with none of them is blank."""
    if is_json_path(path):
        payload = _read_json_file(path, flag)
        if isinstance(payload, Mapping):
            # A profile document's "modes" hold per-mode measurement details; its rows carry the knobs.
            if isinstance(payload.get("rows"), list) and _mode_objects(payload.get("modes")):
                raise InputError(f"--{flag} file {path} holds both \"rows\" and a \"modes\" list of mode "
                                 "objects: give one list (a profile document's \"modes\" are its per-mode "
                                 "measurement records, each with \"requested\")", flag)
            payload = payload["rows"] if "rows" in payload else payload.get("modes")
        if not isinstance(payload, list) or not all(isinstance(m, Mapping) for m in payload):
            raise InputError(f"--{flag} file {path} must hold a JSON list of mode objects", flag)
        df = pd.DataFrame([{k: v for k, v in m.items() if k in MODE_LIST_COLUMNS} for m in payload])
        if "mode" in df.columns:
            # A label is text or a preset id; an object, list or boolean is not one (HTTP refuses them too).
            bad = next((i for i, m in enumerate(df["mode"]) if isinstance(m, bool | Mapping | list)), None)
            if bad is not None:
                raise InputError(f"--{flag} file {path} item {bad}: mode must be a text label or a preset id, "
                                 f"got {type(df['mode'].iloc[bad]).__name__}", flag)
            # A mode object without a label is missing here (NaN in the frame), not the label "nan".
            df["mode"] = [None if m is None or (isinstance(m, float) and m != m) else str(m) for m in df["mode"]]
        return df
    try:
        text = _checked_mode_csv(path, flag)
        # Only an empty cell is missing, as in profile rows: with pandas' NA strings a knob written "N/A"
        # was "required and empty" and a label "NA" no label.
        # Names are matched stripped, as in profile rows: "mode, cpu_cores" has a cpu_cores column.
        df = pd.read_csv(io.StringIO(text), dtype={"mode": str}, skip_blank_lines=False, index_col=False,
                         usecols=lambda name: name.strip() in MODE_LIST_COLUMNS, keep_default_na=False,
                         na_values=[""])
        df.columns = [name.strip() for name in df.columns]
        for name in MODE_TEXT_COLUMNS.intersection(df.columns):  # " agx-xavier" after ", ": as profile rows
            df[name] = [(v.strip() or None) if isinstance(v, str) else v for v in df[name]]
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"--{flag} file {path} is not a readable CSV: {exc}", flag) from None
    if df.columns.empty:  # not "no modes": its rows were read for none of their cells
        header = text.partition("\n")[0]
        if "," not in header and set(MODE_LIST_COLUMNS).intersection(header.split()):
            # `plan --out plan.txt` writes a space-aligned table: its header names the columns, unread as CSV.
            raise InputError(f"--{flag} file {path} is not CSV or JSON: its first line names mode columns apart by "
                             "spaces, as a text table does (`plan --out` writes one for a name ending in neither "
                             ".csv nor .json); write the modes with --out FILE.csv or FILE.json", flag)
        raise InputError(f"--{flag} file {path} has none of the mode columns {', '.join(MODE_LIST_COLUMNS[:-1])}",
                         flag)
    # Blank lines are read (as empty rows) and dropped here, so that each row keeps its line in the file.
    lines = df.index.to_numpy() + 2
    kept = df.notna().any(axis=1).to_numpy()
    df = df[kept].reset_index(drop=True)
    df.attrs[MODE_LINES_ATTR] = [int(n) for n in lines[kept]]
    return df


def _mode_objects(modes: object) -> bool:
    """Whether a JSON ``modes`` value is a (non-empty) list of mode objects, not the records of a profile
    document (``profile --out X.json``: each holds ``requested``, the knobs asked for, and none of its own)."""
    return (isinstance(modes, list) and bool(modes) and all(isinstance(m, Mapping) for m in modes)
            and not all("requested" in m for m in modes))


def _checked_mode_csv(path: str | Path, flag: str) -> str:
    """The text of a CSV mode list, once its header names no column twice (pandas renamed the second copy,
    which was then dropped), no row holds more cells than the header but empty ones (pandas read such a row
    shifted, or failed on it) and it has at most :data:`MAX_ROWS` lines (blank ones are rows)."""
    with open_regular_file(path, flag) as f:
        text = f.read().decode("utf-8-sig")
    reader = csv.reader(io.StringIO(text))
    header = next(reader, [])
    # Unnamed columns (a spreadsheet's trailing commas) are read for nothing: only named ones can clash.
    if duplicates := _duplicates([name.strip() for name in header if name.strip()]):
        raise InputError(f"--{flag} file {path} header: duplicate column(s): {', '.join(duplicates)}", flag)
    width = len(header)
    for cells in reader:
        if reader.line_num > MAX_ROWS + 1:
            raise InputError(f"--{flag} file {path} has more than {MAX_ROWS} lines of modes; split it", flag)
        if any(cell.strip() for cell in cells[width:]):  # trailing empty cells (a spreadsheet's commas) pass
            raise InputError(f"--{flag} {path} line {reader.line_num}: {len(cells)} cells under a header of "
                             f"{width} columns (a label with a comma needs quotes)", flag)
    return text


@contextlib.contextmanager
def rows_named_by_line(flag: str, path: str | Path | None, table: object) -> Iterator[None]:
    """Errors about one row of the ``--flag`` mode file ``table`` (:func:`read_mode_table`) name the file
    and the row: its line in a CSV, its item (from 0, as the service's ``modes.N``) in a JSON list; not
    the service's ``modes[i]`` alone. Errors about the list as a whole (``modes`` is missing a column)
    name the file. ``path`` None: errors pass unchanged."""
    try:
        yield
    except ModeRowError as exc:
        if path is None:
            raise
        raise InputError(f"--{flag} {path} {mode_row_place(table, exc.row)}{exc.detail}", flag) from None
    except InputError as exc:
        if path is None or not str(exc.field or "").startswith("modes"):
            raise
        raise InputError(f"--{flag} {path}: {exc.message}", flag) from None


def mode_row_place(table: object, row: int) -> str:
    """Row ``row`` (0-based) of a mode list :func:`read_mode_table` read, as errors name it: its line in a
    CSV file (``line 4``), its item (from 0, as the service's ``modes.N``) in a JSON list (``item 3``)."""
    lines = table.attrs.get(MODE_LINES_ATTR) if isinstance(table, pd.DataFrame) else None
    return f"line {lines[row]}" if lines and row < len(lines) else f"item {row}"


def frame_records(df: pd.DataFrame, columns: Sequence[str] | None = None) -> list[dict[str, object]]:
    """Rows of ``df`` (the ``columns`` it has, default all) as JSON-ready dicts: NaN and infinities as
    ``None``, numpy values as Python ones. Built column by column: pandas' per-row ``to_dict`` took a sixth
    of a fit's time on four rows."""
    present = list(df.columns) if columns is None else [c for c in columns if c in df.columns]
    values = []
    for c in present:
        col = df[c].to_numpy()
        if col.dtype.kind == "f":
            obj = col.astype(object)
            obj[~np.isfinite(col)] = None
            values.append(obj.tolist())
        elif col.dtype.kind in "iub":
            values.append(col.tolist())
        else:
            values.append([json_safe(v) for v in col.tolist()])
    return [dict(zip(present, row, strict=True)) for row in zip(*values, strict=True)] if present else []


def rows_to_records(df: pd.DataFrame) -> list[dict[str, object]]:
    """Rows as JSON-ready dicts: NaN becomes ``None``, counts become ints."""
    records = []
    for record in frame_records(df):
        out: dict[str, object] = {}
        for key, value in record.items():
            if is_blank(value):
                out[key] = None
            elif key in COUNT_COLUMNS and float(value).is_integer():
                out[key] = int(value)
            else:
                out[key] = value
        records.append(out)
    return records


def _counts_whole(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with its count columns as nullable integers (``2``, not ``2.0``) where every value is whole."""
    out = df.copy()
    for column in COUNT_COLUMNS.intersection(out.columns):
        values = pd.to_numeric(out[column], errors="coerce")
        known = values.dropna()
        if len(known) == out[column].notna().sum() and (known == known.round()).all():
            out[column] = values.astype("Int64")
    return out


def write_profile_csv(rows: pd.DataFrame | list[Mapping[str, object]], path: str | Path | io.TextIOBase) -> None:
    """Write rows as CSV (profile-row columns first, extras after) to a text stream or a file, overwritten."""
    df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    columns = list(COLUMNS) + [c for c in df.columns if c not in FIELD_BY_NAME]
    write_frame_csv(_counts_whole(df.reindex(columns=columns)), path)


def resolve_flag_path(path: str | Path, flag: str) -> Path:
    """``path`` of ``--flag`` made absolute through its symlinks; InputError naming the flag for a symlink
    loop, which Path.resolve raises as RuntimeError (Python 3.11), not OSError: bad input, not a failure."""
    try:
        return Path(path).resolve()
    except RuntimeError:
        raise InputError(f"{cli_flag(flag)} {path}: {os.strerror(errno.ELOOP).lower()} (a symlink loop); "
                         "give the file itself", flag) from None
    except OSError as exc:  # a later Python raises the loop as OSError (ELOOP); or the working folder is gone
        raise InputError(f"{cli_flag(flag)} {path}: {(exc.strerror or str(exc)).lower()}", flag) from None


def check_out_spares_inputs(out: str | None, inputs: Mapping[str, object], written: Sequence[str] = ("",),
                            out_flag: str = "out") -> dict[str, Path]:
    """InputError (``out_flag``) when the ``--out`` file (with each suffix of ``written``: a model's
    manifest, a profile CSV's sidecar are ``PATH.json``) is a file a flag of ``inputs`` (flag name -> path
    or None) reads, or the ``.json`` beside it: ``fit --profiles p.csv --out p.csv`` would replace the
    measured rows by the model. ``out_flag``: the flag that names the written file (``plot``). Returns the
    written files resolved (:func:`resolve_flag_path`), by suffix ({} without ``out``), for further checks."""
    if out is None:
        return {}
    outputs = {suffix: resolve_flag_path(f"{out}{suffix}", out_flag) for suffix in written}
    for flag, path in inputs.items():
        for read in (path, f"{path}.json") if isinstance(path, str) else ():
            if resolve_flag_path(read, flag) in outputs.values():
                raise InputError(f"{cli_flag(out_flag)} {out} would overwrite {read}, which {cli_flag(flag)} "
                                 "reads; write the output to another file", out_flag)
    return outputs


#: The most bytes one number takes in :func:`compact_json`: a finite double's shortest repr has at most 17
#: significant digits, a sign, a point and an exponent (-1.2345678901234567e-308: 24 characters), then a comma.
JSON_NUMBER_BYTES = 25


def compact_json(document: object) -> bytes:
    """``document`` as UTF-8 JSON without indentation (NaN written null): a list of numbers costs its numbers
    and commas only, so a profile's per-minibatch detail stays within the readers' :data:`MAX_FILE_BYTES`."""
    import json

    return (json.dumps(json_safe(document), separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")


def check_json_size(path: Path | None, size: int, what: str, kept: int | None = None) -> None:
    """InputError naming ``--out`` when the ``profile --out FILE.json`` at ``path`` (None: a sidecar, which
    no limit holds) would be ``size`` bytes, past its readers' :data:`MAX_FILE_BYTES`; ``what`` leads up to
    the size, ``kept`` says how many modes the file holds."""
    if path is None or size <= MAX_FILE_BYTES:
        return
    held = "" if kept is None else f"; it holds the {kept} mode(s) measured before"
    raise InputError(f"--out {path}: {what} {size:,} bytes, past the {MAX_FILE_BYTES:,} bytes its readers take "
                     f"(fit --profiles){held}; give fewer --minibatches (or --warmup, or modes), or --out FILE.csv: "
                     "the rows go to the CSV and every minibatch and power sample to its sidecar FILE.csv.json",
                     "out")


def check_not_empty(path: str | None, flag: str, names: str) -> None:
    """InputError naming ``--flag`` when the file it writes is given as empty text (``--out ''``), which
    would otherwise name the working folder; ``names``: the files it takes (``FILE.csv or FILE.json``)."""
    if path is not None and not path.strip():
        raise InputError(f"{cli_flag(flag)} is empty: give a file, {names}", flag)


def output_paths(out: str | Path) -> tuple[Path | None, Path]:
    """(CSV path or None, JSON path) of ``profile --out``: ``X.json`` alone, else ``X`` and its sidecar
    ``X.json`` (``p.csv.json``). InputError for a value that names no file (empty, ``.``, ``/``, ``..``, a trailing ``/``):
    the sidecar's name is made from the file's."""
    text = str(out)
    check_not_empty(text, "out", "FILE.csv or FILE.json")
    if os.path.basename(text) in ("", ".", ".."):  # not Path(text).name: Path drops a trailing "/" or "/."
        raise InputError(f"--out {text} is a directory: give a file in it, FILE.csv or FILE.json", "out")
    out = Path(text)
    return (None, out) if is_json_path(out) else (out, out.with_name(out.name + ".json"))
