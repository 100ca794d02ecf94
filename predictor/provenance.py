"""Provenance rules, defined once: what an answer's rows and split rest on, and the merge over several parts.

- the trust order of the rows' provenance kinds (``published`` / ``measured`` / ``simulated``) and the
  least trusted of several (:func:`least_trusted`, :func:`source_of`, :func:`workload_source`);
- what a time fit's stall/compute split rests on (:func:`split_source`) and the weakest of several
  (:func:`weakest_split`);
- the merge of every provenance field over the parts of one answer (:func:`merged_provenance`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from jetpredict.models.profile_rows import SOURCE_KINDS, UNSAID_SOURCE_KIND, source_kind
from jetpredict.predictor.limits import SPLIT_SOURCES

if TYPE_CHECKING:
    import pandas as pd

#: Provenance kinds from most to least trustworthy (the rows' own list, kept in that order).
SOURCE_TRUST: tuple[str, ...] = SOURCE_KINDS


def least_trusted(kinds: Iterable[str]) -> str:
    """The least trustworthy of ``published`` / ``measured`` / ``simulated`` (unknown kinds rank last);
    with none, what a row that says nothing is."""
    rank = {kind: i for i, kind in enumerate(SOURCE_TRUST)}
    kinds = list(kinds)
    return max(kinds, key=lambda s: rank.get(s, len(rank))) if kinds else UNSAID_SOURCE_KIND


def weakest_split(sources: Iterable[str | None]) -> str:
    """The least measured of several answers' ``split_source`` in :data:`SPLIT_SOURCES`' order (one split from
    totals makes a merged one so); a value outside it (None included) counts as the weakest, none as the best."""
    rank = {s: i for i, s in enumerate(SPLIT_SOURCES)}
    return SPLIT_SOURCES[max((rank.get(s, len(rank) - 1) for s in sources), default=0)]


#: How each merged provenance field of several parts is taken: the weakest part's (fewest profiled modes).
PROVENANCE_MERGES: dict[str, Callable[[list[Any]], Any]] = {
    "reference_source": least_trusted, "workload_source": least_trusted, "split_source": weakest_split,
    "profiled_modes": min}


def merged_provenance(parts: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """What an answer resting on several parts (client devices, models) rests on: ``reference_source`` and
    ``workload_source`` the least trusted of the parts', ``split_source`` the weakest, ``profiled_modes`` the
    fewest (:data:`PROVENANCE_MERGES`). A part silent on a field (None or absent) is left out of it; a field
    no part states is None."""
    parts = list(parts)
    out: dict[str, Any] = {}
    for key, weakest in PROVENANCE_MERGES.items():
        known = [p[key] for p in parts if p.get(key) is not None]
        out[key] = weakest(known) if known else None
    return out


class _FittedRows(Protocol):
    """A fitted model as :func:`workload_source` reads it (``predictor.model.WorkloadModel``, which sits above
    this module): the profile rows it was fitted on."""

    training_rows: Any


def workload_source(model: _FittedRows) -> str:
    """Where the workload's own profile rows came from: ``measured``, ``simulated`` (the twin) or
    ``published`` (the least trusted kind among its rows' ``source``)."""
    # Read straight from the stored rows: this runs on every HTTP answer, a DataFrame costs ~1 ms there.
    return least_trusted(source_kind(row.get("source")) for row in model.training_rows)


def source_of(rows: pd.DataFrame) -> str:
    """The provenance kind of a set of rows: the least trustworthy kind present (``measured`` if unsaid)."""
    return least_trusted({source_kind(s) for s in rows["source"]} if "source" in rows.columns else ())


def split_source(fits: Mapping[str, object]) -> str:
    """What :func:`~.terms.split_compute` rests on (:data:`~.limits.SPLIT_SOURCES`): fitted components, or a
    total's. ``fits``: a model's time fits by component (``compute``/``stall``/``rest``, or ``total``); only
    their names are read, so this module sits below :mod:`~.terms`."""
    return SPLIT_SOURCES[0] if "compute" in fits else SPLIT_SOURCES[1]
