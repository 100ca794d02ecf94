"""Errors raised for bad input anywhere in jetpredict.

Every error names the field it is about and the rule it broke, so the CLI can print it and the HTTP
service can turn it into a 400/422 body ``{"code", "message", "errors": {field: [..]}}``.
"""

from __future__ import annotations

import contextlib
import sys


def cli_flag(field: str) -> str:
    """The command-line flag that sets ``field``, as messages name it: ``settle_s`` -> ``--settle-s``."""
    return "--" + field.replace("_", "-")


def say(line: str) -> None:
    """``line`` to standard error, for a person; dropped once that is gone (a closed pipe, a hung-up terminal:
    the usual case of SIGHUP), so a failed write neither ends a run nor changes its exit status."""
    with contextlib.suppress(OSError):
        print(line, file=sys.stderr, flush=True)


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
