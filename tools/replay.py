"""Replaying a measured sweep as a device: the adaptive loop (``predictor.adaptive``) run on real data, where
each mode it asks for answers with the sweep's row. Scaffolding for ``bench/adaptive_replay.py`` and the
tests, not part of the package."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd
from jetpredict.models.catalogue import MODE_FIELDS, SAME_CLOCK_REL
from jetpredict.models.errors import InputError
from jetpredict.predictor.adaptive import AdaptiveChooser


class SweepReplay:
    """A "device" whose profiled rows come from a measured sweep: asking for a mode returns the sweep's
    row at the same knobs (within :data:`~models.catalogue.SAME_CLOCK_REL`), so the adaptive loop can be
    replayed on real data."""

    def __init__(self, sweep: pd.DataFrame) -> None:
        if sweep.empty:
            raise InputError("the sweep to replay has no rows", "rows")
        self.sweep = sweep.reset_index(drop=True)
        self._knobs = self.sweep[list(MODE_FIELDS)].to_numpy(dtype=float)

    def modes(self) -> pd.DataFrame:
        """The sweep's modes (the only ones it can answer)."""
        return self.sweep[["mode", *MODE_FIELDS]].copy()

    def measure(self, mode: Mapping[str, Any]) -> dict[str, Any]:
        want = np.array([float(mode[k]) for k in MODE_FIELDS])
        hit = np.flatnonzero(np.all(np.abs(self._knobs / want - 1.0) <= SAME_CLOCK_REL, axis=1))
        if hit.size == 0:
            raise InputError(f"mode {mode.get('mode')!r} ({want.tolist()}) is not in the sweep", "mode")
        return self.sweep.iloc[int(hit[0])].to_dict()


def run_loop(chooser: AdaptiveChooser, measure: Callable[[Mapping[str, Any]], dict[str, Any]]
             ) -> list[dict[str, Any]]:
    """Drive ``chooser`` with ``measure`` (mode -> profile row) until it stops; returns the rows."""
    rows: list[dict[str, Any]] = []
    while (mode := chooser.next_mode(rows)) is not None:
        rows.append(measure(mode))
    return rows
