"""The files of the predictor's verbs: reading ``--profiles``/``--model`` (saying what a wrong file is),
checking ``--out``/``--plot`` before the work, and writing ``--out`` whole once the answer is complete."""

from __future__ import annotations

import argparse
import contextlib
import errno
import io
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from jetpredict.models.atomic_files import PairWriteError, out_folder_error, write_out_file
from jetpredict.models.catalogue import MODE_FIELDS
from jetpredict.models.errors import InputError, say

if TYPE_CHECKING:
    import pandas as pd
    from jetpredict.predictor.model import WorkloadModel


#: Errors of the ``--out`` path itself (bad input, exit 2); any other OSError is a failure to write (exit 1).
#: EEXIST: a folder of the path is a file (creating the missing folders meets it). ENXIO: a FIFO no process
#: reads (atomic_files.write_into).
_PATH_ERRNOS = frozenset({errno.EEXIST, errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EACCES, errno.EPERM,
                          errno.EROFS, errno.ENAMETOOLONG, errno.ELOOP, errno.ENXIO})


def out_error(path: str | Path, exc: OSError, flag: str = "out") -> Exception:
    """What to raise when ``--out PATH`` (or ``--FLAG``) could not be written: InputError naming the flag for a
    path that cannot take a file, an OSError (exit 1) for a failure while writing (a full disk, a size limit)."""
    # A FIFO holds no previous file to speak of; a model's pair writer says what became of its files.
    said = exc.errno == errno.ENXIO or isinstance(exc, PairWriteError)
    kept = "" if said else "; any previous file is unchanged"
    # A library's reason may be a sentence with its full stop ("... out of bounds."): not followed by ".;".
    reason = str(exc.strerror or exc).rstrip(". ")
    message = f"cannot write --{flag} {path}: {reason}{kept}"
    return InputError(message, flag) if exc.errno in _PATH_ERRNOS else OSError(message)


@contextlib.contextmanager
def output_to(path: str | None) -> Iterator[TextIO]:
    """Standard output, or ``--out PATH`` written whole once the answer is complete (an error or Ctrl-C
    part-way leaves the previous file, never a cut-off one that reads as a shorter table)."""
    if path is None:
        yield sys.stdout
        return
    text = io.StringIO(newline="")
    yield text
    try:
        write_out_file(path, text.getvalue().encode("utf-8"))
    except OSError as exc:
        raise out_error(path, exc) from None


#: Flags whose files a verb reads.
INPUT_FLAGS = ("profiles", "reference", "after", "candidates", "modes", "model")


#: The files a table verb's ``--out`` takes, in its "--out is empty" error.
TABLE_FILES = "FILE.csv or FILE.json (or no --out, for standard output)"


def check_outputs(args: argparse.Namespace, written: tuple[str, ...] = ("",), out_files: str = TABLE_FILES) -> None:
    """The files a verb writes (``--out``, whose ``out_files`` an error names, and ``--plot``) are named, are
    none of the files it reads (``written``: the suffixes of the files ``--out`` writes), nor each other,
    and no existing part of their folders is a file: refused here, before the work, not after it."""
    from jetpredict.models.profile_files import check_not_empty, check_out_spares_inputs

    out, plot = getattr(args, "out", None), getattr(args, "plot", None)
    check_not_empty(out, "out", out_files)
    check_not_empty(plot, "plot", "FILE.svg or FILE.png")
    for flag, path in (("out", out), ("plot", plot)):
        named = None if path is None else out_folder_error(path)
        if named is not None:
            raise out_error(path, named, flag)
    inputs = {flag: getattr(args, flag, None) for flag in INPUT_FLAGS}
    outputs = check_out_spares_inputs(out, inputs, written)  # resolved there, reused for --out vs --plot
    plots = check_out_spares_inputs(plot, inputs, out_flag="plot")
    if "" in outputs and outputs[""] == plots.get(""):
        raise InputError(f"--out {out} is also --plot: the plot would overwrite the answer", "out")


def read_rows(path: str, flag: str) -> pd.DataFrame:
    """The profile rows of ``--flag``, with a warning per unknown column: the fit ignores it, and a misspelt
    ``avg_pwer_w`` would leave the model on the reference's power unsaid (an upload refuses it)."""
    from jetpredict.models.profile_files import read_profile_rows
    from jetpredict.models.profile_rows import unknown_columns

    rows = read_profile_rows(path, flag)
    for messages in unknown_columns([dict.fromkeys(rows.columns)]).values():
        say(f"warning: --{flag} {path}: {messages[0]} (the fit ignores it)")
    return rows


#: Bytes of a ``--model`` file read to recognise a CSV given in its place (a header line fits easily).
SNIFF_BYTES = 4096


def _profile_rows_hint(path: str, what: str) -> str | None:
    """For a ``--model`` file holding profile rows (``what`` says how they look): fit's own refusal of them
    (host rows, mixed devices), else how to fit them, with ``DEVICE`` for a CSV whose rows cannot be read (its
    header already said what it is); None for a JSON file holding no rows fit would read."""
    from jetpredict.models.profile_files import is_json_path, read_profile_rows
    from jetpredict.predictor.terms import check_device

    try:
        device_id = check_device(read_profile_rows(path, "model"))[0].id
    except InputError as exc:
        if exc.field != "model":
            return f"--model {path} {what}, not a model, and fit refuses them: {exc}"
        if is_json_path(path):
            return None
        device_id = "DEVICE"
    return (f"--model {path} {what}; fit it first: jetpredict fit --device {device_id} --profiles {path} --out "
            "model.json, then --model model.json")


def _not_a_model(path: str) -> str | None:
    """Why ``path``, which the loader refused, is a table rather than a model file (a profile CSV or
    sidecar, a mode list), or None."""
    from jetpredict.models.profile_files import is_json_path, open_regular_file

    if is_json_path(path):  # a profile's JSON sidecar holds its rows as {"rows": [...]}, which fit reads
        return _profile_rows_hint(path, "holds profile rows (a profile's JSON sidecar)")
    try:
        with open_regular_file(path, "model") as f:
            head = f.read(SNIFF_BYTES).decode("utf-8-sig", errors="replace")
    except InputError:
        return None  # the loader names a missing or irregular file in its own words
    header = {cell.strip() for cell in head.splitlines()[0].split(",")} if head.strip() else set()
    if {"device", "workload", "epoch_time_s"} <= header:
        return _profile_rows_hint(path, "looks like a profile CSV (its header has device, workload, epoch_time_s)")
    if {"mode", *MODE_FIELDS} <= header:
        return (f"--model {path} looks like a CSV of power modes; give it as --modes {path}, and as --model "
                "a file written by `jetpredict fit --out`")
    return None


def load_model_flag(path: str) -> WorkloadModel:
    """The model of ``--model PATH``; a table given in its place is named for what it is."""
    from jetpredict.models.profile_files import resolve_flag_path
    from jetpredict.predictor.bundled import load_model

    if not Path(path).exists():
        resolve_flag_path(path, "model")  # a symlink loop is named as one, not as a missing file
        raise InputError(f"model file {path} does not exist (write one with `jetpredict fit`)", "model")
    try:
        return load_model(path)
    except InputError:
        # Every table given as the model fails to load; only then is it read to say what it is, so a
        # good model is read once, not also as profile rows.
        why = _not_a_model(path)
        if why:
            raise InputError(why, "model") from None
        raise


#: ``--out`` extensions that choose the format when ``--format`` is not given (anything else: table).
OUT_FORMATS = {".csv": "csv", ".json": "json"}
FORMAT_HELP = "csv | json | table (default: from the --out extension, .csv or .json; else table)"


def out_format(fmt: str | None, out: str | None) -> str:
    """``--format`` if given, else the format of the ``--out`` extension, else ``table``."""
    if fmt is not None:
        return fmt
    return OUT_FORMATS.get(Path(out).suffix.lower(), "table") if out else "table"
