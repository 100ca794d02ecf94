"""JSON-ready values: the one conversion every JSON writer in jetpredict uses (CLI tables, the profiler's
files and uploads, HTTP answers).

Unknown is ``null`` in JSON, never 0 and never the non-standard ``NaN``; numpy and pandas scalars become
plain Python numbers.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd


def json_safe(value: Any) -> Any:
    """A JSON-ready copy of ``value``: NaN/inf/NA -> None, numpy scalars and arrays -> Python, dict keys
    -> str, tuples -> lists; recursive."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is pd.NA or value is pd.NaT:
        return None
    return value
