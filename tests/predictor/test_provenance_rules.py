"""The provenance rules: the rows' own trust order, the weakest split, and the merge over several parts."""

from __future__ import annotations

from jetpredict.models import profile_rows
from jetpredict.predictor import limits, provenance


def test_trust_order_is_the_rows_own():
    assert provenance.least_trusted(["published", "simulated", "measured"]) == "simulated"
    assert provenance.least_trusted(["published", "measured"]) == "measured"
    assert provenance.least_trusted([]) == profile_rows.source_kind(None)


#: One part's provenance, as service.provenance states it.
PART = {"reference_source": "published", "workload_source": "measured", "split_source": "components",
        "profiled_modes": 9, "model_version": "mech-17"}


def test_merged_provenance_is_the_weakest_of_every_part():
    weak = {**PART, "reference_source": "simulated", "split_source": "epoch_totals", "profiled_modes": 3}
    for parts in ([PART, weak], [weak, PART]):
        assert provenance.merged_provenance(parts) == {
            "reference_source": "simulated", "workload_source": "measured", "split_source": "epoch_totals",
            "profiled_modes": 3}


def test_a_part_silent_on_a_field_is_left_out_of_it_and_no_statement_is_none():
    silent = dict.fromkeys(PART)
    parts = [silent, {**PART, "profiled_modes": 4}, {"workload_source": "simulated"}]
    assert provenance.merged_provenance(parts) == {
        "reference_source": "published", "workload_source": "simulated", "split_source": "components",
        "profiled_modes": 4}
    assert provenance.merged_provenance([silent]) == provenance.merged_provenance([]) == dict.fromkeys(
        ("reference_source", "workload_source", "split_source", "profiled_modes"))


def test_weakest_split_ranks_by_the_split_sources_order_and_an_unknown_one_as_the_weakest():
    best, weakest = limits.SPLIT_SOURCES[0], limits.SPLIT_SOURCES[-1]
    assert provenance.weakest_split([best, weakest]) == provenance.weakest_split([weakest, best]) == weakest
    assert provenance.weakest_split([best, best]) == provenance.weakest_split([]) == best
    # A value no jetpredict writes (a newer service's kind, a typo) claims no measured split.
    assert provenance.weakest_split([best, "partial"]) == provenance.weakest_split([None]) == weakest
