"""Errors raised for bad input anywhere in jetpredict.

Every error names the field it is about and the rule it broke, so the CLI can print it and the HTTP
service can turn it into a 400/422 body ``{"code", "message", "errors": {field: [..]}}``.
"""

from __future__ import annotations


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


class UnknownWorkloadError(InputError):
    """A workload id that is neither built in nor stored."""
