"""The one range check of the ``profile`` command line, naming the flag as a person types it
(:func:`models.errors.cli_flag`).

Checks deeper in the profiler (the DataLoader settings, the run settings) are handed field names such as
``batch_size``; their errors keep that name as :attr:`InputError.field` (the HTTP service's key) and say
the flag, ``--batch-size``, in the message a person reads.
"""

from __future__ import annotations

import math
from typing import TypeVar

from jetpredict.models.errors import InputError, cli_flag

Number = TypeVar("Number", int, float)


def check_range(field: str, value: Number, low: float, high: float = math.inf, unit: str = "",
                per: str = "") -> Number:
    """``value`` when ``low <= value <= high``; else :class:`InputError` naming the flag of ``field``, the
    rule and the value. ``unit`` follows each bound (``s``, ``minibatches``), ``per`` the upper one
    (``per mode``). NaN, None and a bool (Python counts True as 1; no flag is one) fail."""
    unit = f" {unit}" if unit else ""
    if value is None or isinstance(value, bool) or not value >= low:
        raise InputError(f"{cli_flag(field)} must be >= {low:g}{unit}, got {value}", field)
    if not value <= high:
        per = f" {per}" if per else ""
        raise InputError(f"{cli_flag(field)} must be <= {high:g}{unit}{per}, got {value}", field)
    return value

