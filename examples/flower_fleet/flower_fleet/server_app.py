"""The ServerApp: fits (or loads) the planner's workload models, then runs each arm of the run config in
turn on the same nodes and logs, per arm, deadline misses, energy, interval coverage and accuracy.

Run config (``pyproject.toml``, or ``flwr run --run-config 'deadline-s=5 arms="plan"'``): see
:class:`flower_fleet.fleet.FleetConfig`. ``results-out``: a JSON file for the per-arm figures.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp
from jetpredict.models.errors import InputError

from .fleet import FleetConfig, fit_fleet_models, load_fleet_models, run_arms
from .summary import summary_line

app = ServerApp()
log = logging.getLogger(__name__)


def check_results_out(cfg: FleetConfig) -> None:
    """Refuse a ``results-out`` whose folder is missing, not a folder or not writable, naming the key: it
    is written after every arm has run, and a run lost at its end costs all of them. Only the ServerApp
    writes it (the nodes build FleetConfig too), so the check is here, not in FleetConfig."""
    if not cfg.results_out:
        return
    folder = Path(cfg.results_out).absolute().parent
    if not folder.is_dir():
        rule = "is not a folder" if folder.exists() else "does not exist"
        raise InputError(f"run config results-out must be a file in an existing folder: {folder} {rule} "
                         f"(got {cfg.results_out!r})", "results-out")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"run config results-out must be a file in a writable folder: {folder} is not writable "
                         f"(got {cfg.results_out!r})", "results-out")


@app.main()
def main(grid: Grid, context: Context) -> None:
    cfg = FleetConfig.from_run_config(context.run_config)
    check_results_out(cfg)  # before any work: the results are written once every arm has run
    models = load_fleet_models(cfg.models) if cfg.models else fit_fleet_models(cfg.seed, cfg.twin_workload)
    runs = run_arms(grid, cfg, models)
    lines = [summary_line(run, cfg.deadline_s) for run in runs]
    for line in lines:
        print(f"jetpredict fleet | {line}", flush=True)
    if cfg.results_out:
        body = {"config": context.run_config, "arms": [{k: v for k, v in run.items() if k != "strategy"}
                                                       for run in runs]}
        Path(cfg.results_out).write_text(json.dumps(body, indent=1), encoding="utf-8")
    empty = {run["arm"]: run["empty_rounds"] for run in runs if run["empty_rounds"]}
    if empty:
        # A round that trains nobody is not a result: say so loudly rather than report the run as fine.
        raise RuntimeError(f"rounds that trained nobody, per arm: {empty}")
