"""The one line per arm the ServerApp prints (``jetpredict fleet | ...``), from :func:`~.fleet.run_arms`'
output: what it trained, what failed, missed or was left out and why, energy, coverage and accuracy."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from jetpredict.integrations.flower import summarize_provenance


def summary_line(run: Mapping[str, Any], deadline_s: float) -> str:
    """One line per arm: trained, failed, late, misses, energies (J; "unknown" with the reason when a trained
    client reported none), coverage, final accuracy, what the arm's predictions rest on (least trusted
    sources, fewest profiled modes over the devices), what the plan said of its confidence, and why nodes
    were left out (the commonest :data:`LINE_REASONS` reasons, with how many client-rounds each)."""
    figs = run["rounds"]
    pred = sum(f["predicted"] for f in figs)
    checked = sum(f["energy_checked"] for f in figs)
    acc = run["accuracy"].get(max(run["accuracy"]), float("nan")) if run["accuracy"] else float("nan")
    cover = (f"time interval held {sum(f['time_cover'] for f in figs)}/{pred} (upper bound "
             f"{sum(f['time_upper_cover'] for f in figs)}/{pred})" if pred else "no time predictions")
    cover += (f", energy {sum(f['energy_cover'] for f in figs)}/{checked}" if checked
              else ", no energy interval to check")
    empty = f"; ROUNDS THAT TRAINED NOBODY: {run['empty_rounds']}" if run["empty_rounds"] else ""
    empty = _left_out(run.get("exclusions", {})) + empty
    said = "".join(f"; the plan says: {note}" for note in run.get("confidence_notes", []))
    if run.get("provenance"):
        top = summarize_provenance(list(run["provenance"].values()))
        said = (f"; predictions rest on {top['workload_source']} workload rows ({top['profiled_modes']} profiled "
                f"modes at fewest) and {top['reference_source']} reference data{said}")
    notes = "".join(f" (round {f['round']}: {f['energy_note']})" for f in figs if f["energy_note"])
    return (f"{run['arm']}: trained {sum(f['trained'] for f in figs)} client-rounds, failed "
            f"{sum(f['failed'] for f in figs)}, late "
            f"{sum(f['late'] for f in figs)} (deadline {deadline_s:g} s), misses {sum(f['misses'] for f in figs)}, "
            f"training energy {_joules(figs, 'train_energy_j')}, to round ends {_joules(figs, 'round_energy_j')}"
            f"{notes}; {cover}; final accuracy {acc:.3f}{said}{empty}")


#: Reasons for leaving nodes out that the summary line names; the rest are counted (the results JSON has all).
LINE_REASONS = 3


def _left_out(exclusions: Mapping[int, Mapping[str, Sequence[int]]]) -> str:
    """"; left out N client-rounds: REASON (n), ..." over the rounds, the commonest reasons first, or ""."""
    counts: dict[str, int] = {}
    for why in exclusions.values():
        for reason, nodes in why.items():
            counts[reason] = counts.get(reason, 0) + len(nodes)
    if not counts:
        return ""
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    said = "; ".join(f"{reason} ({n})" for reason, n in ranked[:LINE_REASONS])
    more = len(ranked) - LINE_REASONS
    return (f"; left out {sum(counts.values())} client-rounds: {said}"
            + (f"; and {more} more reason(s) (results JSON: exclusions)" if more > 0 else ""))


def _joules(figs: Sequence[Mapping[str, Any]], key: str) -> str:
    """The total of ``key`` over the rounds in J, or "unknown" when a round's is (never a partial sum)."""
    values = [f[key] for f in figs]
    return "unknown" if any(v is None for v in values) else f"{math.fsum(values):.1f} J"
