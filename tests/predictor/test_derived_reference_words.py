"""A board without reference sweeps of its own gets a reference derived from another board's
(``bundled.DERIVE_FROM``); fit and predict say so, where they said ``reference: published`` as for a board
with its own published sweeps. The six shipped boards all have their own: their words are unchanged."""

from __future__ import annotations

import pandas as pd
import pytest
from jetpredict.models.catalogue import device_ids, load_device
from jetpredict.predictor import bundled, cli
from jetpredict.predictor.bundled import load_reference
from jetpredict.predictor.transfer import derive_reference

#: One prediction's provenance columns, as the summaries read them.
ROW = pd.DataFrame([{"profiled_modes": 4, "cross_device": False, "reference_source": "published",
                     "workload_source": "measured", "model_version": "v"}])


def test_a_derived_reference_is_named_with_the_board_it_came_from(monkeypatch):
    """orin-nano's bundled reference derived from AGX Xavier's sweeps (as a board without sweeps gets it): the
    summary finds it through the bundled references, as for a board the catalogue gives no sweeps."""
    derived = derive_reference(load_reference(load_device("agx-xavier")), load_device("orin-nano"))
    words = bundled.derivation_words([derived])
    assert words == " (orin-nano's derived from agx-xavier's through device physics: no sweeps of its own)"
    own = bundled.load_reference
    monkeypatch.setattr(bundled, "load_reference", lambda d: derived if d.id == "orin-nano" else own(d))
    summary = cli.provenance_summary(ROW, "orin-nano")
    assert "reference: published (orin-nano's derived from agx-xavier's through device physics: no sweeps" in summary


@pytest.mark.parametrize("device", sorted(device_ids()))
def test_a_catalogued_board_with_its_own_sweeps_reads_as_before(device):
    """Every catalogued board whose reference is its own (the six shipped ones): no derivation words, and the
    summary reads as it did."""
    ref = load_reference(load_device(device))
    if ref.derived_from is not None:
        pytest.skip(f"{device} has no sweeps of its own")
    assert bundled.derivation_words([ref]) == ""
    assert bundled.reference_derivations(device) == []
    assert cli.provenance_summary(ROW, device) == (
        f", from 4 profiled mode(s) on {device}; reference: published, workload rows: measured, model v")
