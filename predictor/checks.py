"""Checks of the inputs every operation shares against :mod:`~.limits` (caps, epochs, confidence, objective),
each an InputError naming the field and the rule.

Imports only ``jetpredict.models`` (numpy, not pandas) and :mod:`~.limits`, so the command line and the
Flower planners check a value without loading the prediction tables' stack.
"""

from __future__ import annotations

import numpy as np
from jetpredict.models.errors import InputError
from jetpredict.models.numbers import checked_number
from jetpredict.predictor.limits import MAX_CONFIDENCE, MAX_EPOCHS, MIN_CONFIDENCE, OBJECTIVES


def check_limit(value: float | None, field_name: str) -> float | None:
    """A constraint must be a finite number > 0 (or absent)."""
    return None if value is None else checked_number(value, field_name)


def check_epochs(epochs: int | None, field: str = "epochs") -> int | None:
    """``epochs`` must be a whole number in 1..MAX_EPOCHS (or absent); InputError naming ``field``."""
    if epochs is None:
        return None
    if isinstance(epochs, bool) or not isinstance(epochs, int | np.integer) or not 1 <= epochs <= MAX_EPOCHS:
        raise InputError(f"{field} must be a whole number from 1 to {MAX_EPOCHS}, got {epochs!r}", field)
    return int(epochs)


def check_confidence(confidence: float) -> float:
    """``confidence`` must be a number in [MIN_CONFIDENCE, MAX_CONFIDENCE] (a share, not a percentage)."""
    return checked_number(confidence, "confidence", low=MIN_CONFIDENCE, high=MAX_CONFIDENCE, low_inclusive=True,
                          hint=" (e.g. 0.9 for 90%)")


def check_objective(objective: str) -> str:
    if objective not in OBJECTIVES:
        raise InputError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}", "objective")
    return objective
