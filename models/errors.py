"""Errors raised for bad input anywhere in jetpredict.

Every error names the field it is about and the rule it broke, so the CLI can print it and the HTTP
service can turn it into a 400/422 body ``{"code", "message", "errors": {field: [..]}}``.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Container
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the service imports this module; only command lines load argparse
    from argparse import Namespace


def cli_flag(field: str) -> str:
    """The command-line flag that sets ``field``, as messages name it: ``settle_s`` -> ``--settle-s``."""
    return "--" + field.replace("_", "-")


def flag_named(err: InputError, fields: Container[str]) -> InputError:
    """``err`` with the field its message starts with written as that field's flag (``max_power_w must be``
    -> ``--max-power-w must be``; ``max_power_w=15000 W`` -> ``--max-power-w 15000 W``) when its field is one
    of ``fields`` (a command line's flags); else ``err`` itself. Class, field and attributes are kept.

    For a command line that calls checks it shares with the HTTP service, whose messages name JSON fields."""
    field = err.field
    if field is None or field not in fields:
        return err
    if err.message.startswith(f"{field} "):
        message = cli_flag(field) + err.message[len(field):]
    elif err.message.startswith(f"{field}="):
        message = f"{cli_flag(field)} {err.message[len(field) + 1:]}"
    else:
        return err
    # Built without __init__: a subclass's own arguments (ModeRowError's row) need not be restated.
    named = type(err).__new__(type(err), message)
    named.__dict__.update(vars(err))
    named.message = message
    return named


def naming_flags(verb: Callable[[Namespace], int]) -> Callable[[Namespace], int]:
    """``verb`` (a command-line verb's handler) with its InputErrors naming the flag a person typed
    (:func:`flag_named`: ``--max-power-w``) where the checks it shares with the HTTP service name that flag's
    field (``max_power_w``, the JSON field); the parsed flags' names are the fields they set."""
    def run(args: Namespace) -> int:
        try:
            return verb(args)
        except InputError as err:
            named = flag_named(err, vars(args))
            if named is err:
                raise
            raise named from err

    return run


def say(line: str) -> None:
    """``line`` to standard error, for a person; dropped once that is gone (a closed pipe, a hung-up terminal:
    the usual case of SIGHUP), so a failed write neither ends a run nor changes its exit status."""
    with contextlib.suppress(OSError):
        print(line, file=sys.stderr, flush=True)


def say_above_bars(line: str) -> None:
    """:func:`say` above any progress bar (tqdm clears it and redraws it below), so that a line said while a
    profile runs starts a line of its own, in a log file too; plainly where tqdm is not installed."""
    try:
        from tqdm import tqdm
    except ImportError:
        say(line)
        return
    with contextlib.suppress(OSError):
        tqdm.write(line, file=sys.stderr)


class InputError(ValueError):
    """Bad input: ``field`` names what was wrong (``None`` when it is the whole input)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def as_errors(self) -> dict[str, list[str]]:
        """The ``errors`` member of the JSON error body."""
        return {self.field or "_schema": [self.message]}


class UnknownDeviceError(InputError):
    """A device id that is not in the catalogue."""


class ModeOutOfRangeError(InputError):
    """A power-mode knob outside the device's range."""


class ModeRowError(InputError):
    """A problem in row ``row`` (0-based) of a list of modes, worded ``modes[row]`` + ``detail`` (``detail``
    reads ``" (label): rule"`` or ``": rule"``), so that a command line can name its file's line instead."""

    def __init__(self, row: int, detail: str, field: str) -> None:
        super().__init__(f"modes[{row}]{detail}", field)
        self.row = row
        self.detail = detail


class ModeRowOutOfRangeError(ModeRowError, ModeOutOfRangeError):
    """A knob of one row of a list of modes outside the device's range."""


class UnknownWorkloadError(InputError):
    """A workload id that is neither built in nor stored."""
