"""Limits and choices of the predictor's operations, defined once.

The service checks them, and the HTTP schemas (``api.schemas``) and the command line import them, so a
request the schema accepts is one the service accepts. No other imports: this module is cheap to load.
"""

from __future__ import annotations

#: Objective name -> the predicted column it minimises.
OBJECTIVES: dict[str, str] = {"min-time": "epoch_time_s", "min-energy": "epoch_energy_j"}
#: Modes in one user-supplied table or request. The largest catalogue space (AGX Xavier) has 29,232
#: modes; a table far larger is a mistake or abuse, and would cost seconds of work per request.
MAX_MODES = 50_000
#: Clients in one fleet plan (the plan costs one all-modes prediction per device *type*, so the limit is
#: about response size: ~10,000 client rows is a few MB of JSON).
MAX_CLIENTS = 10_000
#: Epochs for time/energy-to-accuracy (and local epochs of a fleet round).
MAX_EPOCHS = 1_000_000
#: Default coverage of every interval, and the level at which caps and deadlines must hold: a cap is
#: met when the upper end of the two-sided ``confidence`` interval is within it.
DEFAULT_CONFIDENCE = 0.9
#: Accepted confidence range: below 0.5 an "upper bound" is below the median; 0.999 is about as far as
#: a normal tail on a few profiled modes can be believed.
MIN_CONFIDENCE, MAX_CONFIDENCE = 0.5, 0.999
