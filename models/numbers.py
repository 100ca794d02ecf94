"""One check for a number given by a user (CLI flag, HTTP field, node config): finite and in range; the
words for a table cell that holds no number; and the hint that names a likely unit mistake when a measured
value is out of its plausible range."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
from jetpredict.models.errors import InputError


def checked_number(value: object, field: str, *, low: float = 0.0, high: float = math.inf,
                   low_inclusive: bool = False, hint: str = "") -> float:
    """``value`` as a float inside ``low``..``high``, else :class:`InputError` naming ``field`` and the rule.

    Booleans are refused (JSON ``true`` is not a number); so are NaN and infinities.
    """
    above = ">=" if low_inclusive else ">"
    rule = f"a finite number {above} {low:g}" if high == math.inf else f"between {low:g} and {high:g}"
    message = f"{field} must be {rule}{hint}, got {value!r}"
    if isinstance(value, bool):
        raise InputError(message, field)
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InputError(message, field) from None
    except OverflowError:  # an integer beyond any float
        raise InputError(f"{field} must be {rule}{hint}, got one too large for a float", field) from None
    in_low = number >= low if low_inclusive else number > low
    if not math.isfinite(number) or not in_low or number > high:
        raise InputError(message, field)
    return number


def checked_share(value: object, field: str) -> float:
    """``value`` as a share of a point (0.12 for 12%), 0 < share < 1, else :class:`InputError` naming ``field``
    and the rule (a percent typed for the share, 12, is refused rather than read as 1,200%)."""
    number = checked_number(value, field)
    if number >= 1:
        raise InputError(f"{field} must be a share between 0 and 1 (e.g. 0.12 for 12%), got {number:g}", field)
    return number


def is_blank(value: object) -> bool:
    """An empty cell: None, NaN, or text of only whitespace."""
    return value is None or (isinstance(value, float) and math.isnan(value)) or (
        isinstance(value, str) and value.strip() == "")


def number_or_nan(value: object) -> float:
    """A cell as a float, NaN when it holds no number (booleans are not numbers)."""
    if isinstance(value, bool | np.bool_) or value is None:
        return math.nan
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return math.nan


#: The rule an empty required cell breaks, worded once for profile rows and mode lists.
REQUIRED_AND_EMPTY = "is required and empty"


def not_a_number_rule(value: object) -> str:
    """The rule a required numeric cell that holds no number breaks: empty, or what it holds."""
    return REQUIRED_AND_EMPTY if is_blank(value) else f"must be a number, got {value!r}"


def unit_hint(value: float, low: float, high: float, unit: str, scales: Mapping[str, float],
              subject: str = "it") -> str:
    """``"; it looks like milliwatts (10.9 W)"`` when ``value`` times one of ``scales`` (a unit name ->
    the factor that converts a value in that unit to ``unit``) lands inside ``low..high``; else ``""``.
    ``subject`` names what looks wrong (a field) when it is not the value itself."""
    for name, factor in scales.items():
        converted = value * factor
        if low <= converted <= high:
            return f"; {subject} looks like {name} ({converted:.4g} {unit})"
    return ""


def finite_or_none(value: object) -> float | None:
    """``value`` as a finite float; None for a missing, non-numeric or non-finite cell (an answer's null),
    an integer beyond float range (10**400, which ``float`` refuses with OverflowError) included."""
    try:
        f = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None
    return f if math.isfinite(f) else None


def json_finite_float(v: object) -> float | None:
    """A JSON number as a finite float (:func:`finite_or_none`); None for a bool or anything not a number."""
    return None if isinstance(v, bool) or not isinstance(v, int | float) else finite_or_none(v)
