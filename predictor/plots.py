"""``recommend --plot FILE.svg|png``: the time-energy picture of the page at ``/``, drawn with matplotlib.

Every mode of the device is a faint point (grey over the caps, blue within), the Pareto front within
the caps is the red line, the chosen mode is ringed, and the chosen mode's 90% intervals are drawn as
error bars. The nvpmodel presets are labelled diamonds (filled when they meet the caps), and the preset
the recommendation is compared with (``preset_comparison``) is ringed in their colour. Axes are logarithmic (epoch time in s, energy per epoch in J), as on the page. matplotlib is
the ``[plot]`` extra; it is imported only here, with the non-interactive Agg backend.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
from jetpredict.models.atomic_files import write_out_file
from jetpredict.models.errors import InputError

#: The suffixes --plot accepts; the file format comes from the suffix.
PLOT_SUFFIXES = (".svg", ".png")
FEASIBLE_COLOUR = "#0b6bcb"
INFEASIBLE_COLOUR = "#8a8a8a"
FRONT_COLOUR = "#d1495b"
PRESET_COLOUR = "#2e7d32"
#: matplotlib's ``svg.hashsalt`` for --plot SVGs: fixed, so element ids follow from the drawing alone.
SVG_HASH_SALT = "jetpredict-recommend-plot"


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise InputError("--plot needs matplotlib: pip install 'jetpredict[plot]'", "plot") from None
    matplotlib.use("Agg", force=True)  # files only: no display, no GUI toolkit
    import matplotlib.pyplot as plt

    return plt


def check_plot_path(path: str | Path) -> Path:
    """``path`` if it ends in .svg or .png (case-insensitive); InputError naming ``plot`` otherwise."""
    path = Path(path)
    if path.suffix.lower() not in PLOT_SUFFIXES:
        raise InputError(f"--plot {path}: the file must end in .svg or .png (the format comes from it)", "plot")
    return path


def pareto_plot(modes: pd.DataFrame, feasible: np.ndarray, result: dict, path: str | Path,
                title: str = "", presets: pd.DataFrame | None = None,
                presets_feasible: np.ndarray | None = None) -> Path:
    """Write the picture for ``modes`` (every mode: ``epoch_time_s``, ``epoch_energy_j``), the boolean
    ``feasible`` mask of the caps, and a :func:`predictor.service.recommend` ``result`` (``best``,
    ``pareto`` rows, ``preset_comparison``). ``presets``: the presets' prediction rows (``mode`` names
    them), with ``presets_feasible`` their mask of the caps. ``title``: what was asked and what the model
    rests on (simulated rows or reference, another device's rows: ``recommend --plot``). Returns the path."""
    path = check_plot_path(path)
    plt = _pyplot()
    t = modes["epoch_time_s"].to_numpy(float)
    e = modes["epoch_energy_j"].to_numpy(float)
    feasible = np.asarray(feasible, dtype=bool)
    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=120)
    try:
        ax.scatter(t[~feasible], e[~feasible], s=2, c=INFEASIBLE_COLOUR, alpha=0.15, linewidths=0,
                   label=f"over the cap ({int((~feasible).sum()):,} modes)", rasterized=True)
        ax.scatter(t[feasible], e[feasible], s=2, c=FEASIBLE_COLOUR, alpha=0.25, linewidths=0,
                   label=f"within the cap ({int(feasible.sum()):,} modes)", rasterized=True)
        front = sorted(result.get("pareto") or [], key=lambda r: r["epoch_time_s"])
        if front:
            ax.plot([r["epoch_time_s"] for r in front], [r["epoch_energy_j"] for r in front], "-o",
                    color=FRONT_COLOUR, markersize=3, linewidth=1.5, label=f"Pareto front ({len(front)} modes)")
        if presets is not None and len(presets):
            _presets(ax, presets, presets_feasible, result.get("preset_comparison"))
        best = result.get("best")
        if best:
            xerr = _err(best, "epoch_time_s")
            yerr = _err(best, "epoch_energy_j")
            ax.errorbar([best["epoch_time_s"]], [best["epoch_energy_j"]], xerr=xerr, yerr=yerr, fmt="none",
                        ecolor="black", elinewidth=1, capsize=3)
            ax.scatter([best["epoch_time_s"]], [best["epoch_energy_j"]], s=120, facecolors="none",
                       edgecolors="black", linewidths=2,
                       label=f"chosen: {best['mode']} ({best['avg_power_w']:.3g} W)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("epoch time (s)")
        ax.set_ylabel("energy per epoch (J)")
        ax.grid(True, which="both", alpha=0.25)
        plain = plt.FuncFormatter(lambda v, _pos: f"{v:g}")  # 500, 1000, 2000 rather than 5x10^2
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_formatter(plain)
            axis.set_minor_formatter(plain)
        ax.tick_params(which="minor", labelsize=7)
        legend = ax.legend(loc="upper left", fontsize=8, framealpha=0.9)
        for handle in legend.legend_handles[:2]:  # the faint clouds' markers, legible in the legend
            handle.set_sizes([20])
            handle.set_alpha(0.8)
        if title:
            ax.set_title(title, fontsize=9)  # two lines: the question, then what the model rests on
        fig.tight_layout()
        # Drawn in memory, then written as every --out is: whole, its folder created, a FIFO no one reads refused.
        drawn = io.BytesIO()
        fmt = path.suffix.lower().lstrip(".")
        # The same question draws the same bytes: SVG element ids hashed with a fixed salt (else a fresh
        # uuid4 per file), no date. Set for this file only: the process's rcParams stay as they were.
        with plt.rc_context({"svg.hashsalt": SVG_HASH_SALT}):
            fig.savefig(drawn, format=fmt, metadata={"Date": None} if fmt == "svg" else None)
        write_out_file(path, drawn.getvalue())  # an OSError: the caller words it as every --out's (cli.out_error)
    finally:
        plt.close(fig)
    return path


def _presets(ax, presets: pd.DataFrame, feasible: np.ndarray | None, comparison: dict | None) -> None:
    """The presets as labelled diamonds (filled: within the caps) and the compared one ringed."""
    t = presets["epoch_time_s"].to_numpy(float)
    e = presets["epoch_energy_j"].to_numpy(float)
    ok = np.ones(len(presets), dtype=bool) if feasible is None else np.asarray(feasible, dtype=bool)
    ax.scatter(t, e, s=36, marker="D", c=np.where(ok, PRESET_COLOUR, "white"), edgecolors=PRESET_COLOUR,
               linewidths=1.2, zorder=3, label=f"nvpmodel presets ({int(ok.sum())} of {len(presets)} within the cap)")
    for x, y, name in zip(t, e, presets["mode"].astype(str), strict=True):
        ax.annotate(name, (x, y), xytext=(4, 4), textcoords="offset points", fontsize=7, color=PRESET_COLOUR)
    if comparison and comparison.get("preset"):
        ax.scatter([comparison["epoch_time_s"]], [comparison["epoch_energy_j"]], s=160, facecolors="none",
                   edgecolors=PRESET_COLOUR, linewidths=1.5, zorder=3,
                   label=f"compared preset: {comparison['preset']}")


def _err(row: dict, column: str):
    """Asymmetric error bar ``[[below], [above]]`` from ``column_low``/``column_high``, None if absent."""
    low, high = row.get(f"{column}_low"), row.get(f"{column}_high")
    if low is None or high is None or not np.isfinite([low, high]).all():
        return None
    return [[max(row[column] - low, 0.0)], [max(high - row[column], 0.0)]]
