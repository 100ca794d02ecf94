"""Benches take their scaffolding from tools/, never from tests/; the sweep replay lives there too; the build
tools give what is committed; the tests' one wait fails past its bound."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from jetpredict.models import catalogue
from jetpredict.models.errors import InputError
from jetpredict.models.profiling_protocol import BATCH_SIZE
from jetpredict.predictor import calibration
from jetpredict.profiler.sim import kernel_costs

from tools import calibrate_intervals, calibrate_twin, replay, retrace_workloads
from tools.testing import published_rows, wait_until
from tools.twin_calibration_report import RESULTS_PATH, write_results

ROOT = Path(__file__).resolve().parent.parent


def test_benches_import_nothing_from_tests():
    for path in sorted((ROOT / "bench").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert "from api_fixtures" not in text and "import api_fixtures" not in text, path.name


def test_published_rows_from_tools():
    rows = published_rows(as_id="x", n=3)
    assert len(rows) == 3 and {r["workload"] for r in rows} == {"x"}
    assert isinstance(rows[0]["epoch_time_s"], float)


def test_wait_until_returns_once_its_condition_holds_and_fails_past_its_bound_in_its_words():
    polls = []
    wait_until(lambda: polls.append(1) or len(polls) >= 3, 5.0, "never", poll_s=0.001)
    assert len(polls) == 3
    with pytest.raises(AssertionError, match="^nothing came$"):
        wait_until(lambda: False, 0.02, "nothing came", poll_s=0.001)
    seen = []
    with pytest.raises(AssertionError, match=r"^\d+ polls$"):  # words made when it fails, not before
        wait_until(lambda: seen.append(1), 0.02, lambda: f"{len(seen)} polls", poll_s=0.001)
    assert len(seen) > 1


def test_replay_is_not_in_the_package_and_matches_clocks_as_the_catalogue_does(monkeypatch):
    assert not (ROOT / "predictor" / "replay.py").exists()
    sweep = pd.DataFrame([{"mode": "a", "cpu_cores": 4, "cpu_mhz": 1000.0, "gpu_mhz": 500.0, "emc_mhz": 1600.0,
                           "epoch_time_s": 10.0}])
    assert replay.SAME_CLOCK_REL is catalogue.SAME_CLOCK_REL  # the catalogue's tolerance, not a copy
    off = {"mode": "a", "cpu_cores": 4, "cpu_mhz": 1005.0, "gpu_mhz": 500.0, "emc_mhz": 1600.0}  # 0.5% off
    monkeypatch.setattr(replay, "SAME_CLOCK_REL", 1e-2)
    assert replay.SweepReplay(sweep).measure(off)["epoch_time_s"] == 10.0


def test_replay_answers_with_the_measured_row_not_the_asked_knobs_and_refuses_an_empty_sweep():
    sweep = pd.DataFrame([{"mode": "a", "cpu_cores": 4, "cpu_mhz": 1000.0, "gpu_mhz": 500.0, "emc_mhz": 1600.0,
                           "epoch_time_s": 10.0}])
    near = {"mode": "b", "cpu_cores": 4, "cpu_mhz": 1000.0 * (1 + catalogue.SAME_CLOCK_REL / 2), "gpu_mhz": 500.0,
            "emc_mhz": 1600.0}
    assert replay.SweepReplay(sweep).measure(near) == sweep.iloc[0].to_dict()  # the row as measured, knobs too
    with pytest.raises(InputError) as err:
        replay.SweepReplay(sweep.iloc[:0])
    assert err.value.field == "rows"


def test_the_twin_report_regenerates_the_committed_tables_from_the_committed_constants(tmp_path):
    """docs/twin-calibration.md's criteria, rows and facts (errors in %, times in s, power in W) are what
    write_results gives for the committed constants (the shared constants' line is left out: the doc
    prints the fit's full precision, the TOML six digits)."""
    rows, facts = calibrate_twin.load_calibration_rows(), calibrate_twin.load_ratio_facts()
    physics = {d: calibrate_twin.DevicePhysics(catalogue.load_device(d))
               for d in sorted({r.device for r in rows} | {f.device for f in facts})}
    cal = calibrate_twin.Calibration({d: p.constants for d, p in physics.items()},
                                     next(iter(physics.values())).shared)
    out = tmp_path / "twin-calibration.md"
    write_results(cal, calibrate_twin.simulate_rows(cal, rows), out, facts=calibrate_twin.simulate_facts(cal, facts))
    committed = set(RESULTS_PATH.read_text(encoding="utf-8").splitlines())
    tables = [line for line in out.read_text(encoding="utf-8").splitlines() if line.startswith(("| ", "- "))]
    assert len(tables) > len(rows) and [line for line in tables if line not in committed] == []


def test_a_retrace_prints_gb_and_ms_per_sample_in_those_units(monkeypatch, capsys):
    """The retrace line's units: with the cached costs standing for a fresh trace (the ratios are then 1),
    the printed GFLOP, GB and ms CPU per sample are the cache's own figures."""
    monkeypatch.setattr(kernel_costs, "measure_workload", kernel_costs.load_complexity)
    assert retrace_workloads.main(["--workload", "resnet18-cifar10"]) == 0
    line = capsys.readouterr().out.splitlines()[0]
    got = re.search(r"([\d.]+) GFLOP and ([\d.]+) GB per minibatch of (\d+), ([\d.]+) ms CPU per sample", line)
    wc = kernel_costs.load_complexity("resnet18-cifar10")
    assert got is not None and int(got[3]) == BATCH_SIZE, line
    assert float(got[1]) == pytest.approx(wc.kernel_flops(BATCH_SIZE).sum() / 1e9, abs=0.005)
    assert float(got[2]) == pytest.approx(wc.kernel_bytes(BATCH_SIZE).sum() / 1e9, abs=0.005)
    assert float(got[4]) == pytest.approx(wc.data_cpu_s_per_sample * 1e3, abs=5e-4)
    assert "GFLOP x1, GB x1, CPU per sample x1" in line


def test_calibrate_intervals_prints_the_scales_in_the_order_interval_scales_takes_them(monkeypatch, capsys):
    """The first line is pasted into ``INTERVAL_SCALES`` (positional: time, power, energy); on one target's
    one-mode cells (their scales differ per output) each number is its own output's."""
    cells = calibration.residual_cells(sizes=(1,), targets=["lenet5-mnist"])
    monkeypatch.setattr(calibrate_intervals, "residual_cells", lambda: cells)
    assert calibrate_intervals.main([]) == 0
    out = capsys.readouterr().out.splitlines()
    (scales,) = calibration.calibrate(cells).values()
    assert len({scales.time, scales.power, scales.energy}) == 3
    pasted = re.fullmatch(r"INTERVAL_SCALES = \{1: IntervalScales\(([\d.]+), ([\d.]+), ([\d.]+)\)\}", out[0])
    assert pasted is not None and tuple(map(float, pasted.groups())) == (scales.time, scales.power, scales.energy)
    assert f"power, 1 mode(s): scale {scales.power}," in "\n".join(out)
