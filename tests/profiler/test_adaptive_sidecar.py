"""An adaptive profile keeps in its sidecar why its modes were profiled: under ``adaptive`` the budget, objective,
caps, confidence, target width and candidates, the modes profiled first and why, and per round the mode picked,
why, the recommended mode's predicted interval that drove it and the provenance of the model that chose; a fixed
list keeps ``"adaptive": false``. The readers of profile documents take either, and an old sidecar's
``"adaptive": true``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from jetpredict.models.catalogue import MODE_FIELDS
from jetpredict.models.profile_files import read_mode_table, read_profile_csv, read_profile_rows
from jetpredict.predictor.adaptive import AdaptiveChooser
from jetpredict.predictor.limits import PROVENANCE_FIELDS

from jetpredict.cli import main

CANDIDATES = ("mode,cpu_cores,cpu_mhz,gpu_mhz,emc_mhz\n"
              "a,4,1200,670,1333\nb,8,1200,670,1333\nc,8,1200,900,1333\nd,8,1200,900,1600\n"
              "e,8,2100,900,1600\nf,2,2100,900,1600\ng,8,2265,1377,2133\nh,8,2265,1377,1066\n")


def _adaptive_run(tmp_path: Path, capsys, *extra: str, rc: int = 0) -> tuple[dict, list[str], Path]:
    """A twin AGX Xavier run choosing among :data:`CANDIDATES`, ending in exit status ``rc``: (its sidecar, its
    ``adaptive:`` lines, --out)."""
    cands = tmp_path / "cands.csv"
    cands.write_text(CANDIDATES)
    out = tmp_path / "p.csv"
    status = main(["profile", "--device", "sim:agx-xavier", "--workload", "lenet5-mnist", "--adaptive", "--budget",
                   "4", "--candidates", str(cands), "--warmup", "1", "--minibatches", "3", "--no-progress", "--out",
                   str(out), *extra])
    err = capsys.readouterr().err
    assert status == rc, err
    lines = [line.removeprefix("adaptive: ") for line in err.splitlines() if line.startswith("adaptive: ")]
    return json.loads(Path(f"{out}.json").read_text()), lines, out


def test_the_sidecar_keeps_the_settings_and_every_rounds_pick_and_why(tmp_path, capsys):
    doc, lines, out = _adaptive_run(tmp_path, capsys, "--objective", "min-energy", "--max-power-w", "25",
                                    "--max-epoch-time-s", "900", "--target-width", "0.2", "--confidence", "0.8")
    record = doc["adaptive"]
    assert {k: record[k] for k in ("budget", "objective", "max_power_w", "max_epoch_time_s", "target_width",
                                   "confidence")} == {"budget": 4, "objective": "min-energy", "max_power_w": 25.0,
                                                      "max_epoch_time_s": 900.0, "target_width": 0.2,
                                                      "confidence": 0.8}
    assert record["candidates"] == 8 and doc["config"]["candidates"] == str(tmp_path / "cands.csv")
    rows = read_profile_csv(out)
    start = record["start"]
    assert start["modes"] == list(rows["mode"][:len(start["modes"])]) and "D-optimal plan" in start["why"]
    steps = record["steps"]
    assert [s["line"] for s in steps] == lines and lines  # what standard error said, round by round
    for step in steps[:-1]:  # each pick: the mode profiled next, and why
        assert step["stop"] is None and step["reason"] and set(step["next_mode"]) == {"mode", *MODE_FIELDS}
    picked = [s["next_mode"]["mode"] for s in steps if s["next_mode"] is not None]
    assert start["modes"] + picked == list(rows["mode"])
    assert steps[-1]["next_mode"] is None and steps[-1]["stop"] and record["stop"] == steps[-1]["stop"]
    for step in steps:
        assert step["profiled"] == list(rows["mode"][:len(step["profiled"])])
        assert set(step["model"]) == set(PROVENANCE_FIELDS) and step["model"]["profiled_modes"] == len(
            step["profiled"]) and step["model"]["workload_source"] == "simulated"
        rec = step["recommended"]
        if rec is None:
            assert step["no_pick"]
            continue
        assert f"recommended {rec['mode']} " in step["line"]
        assert rec["epoch_time_s_low"] <= rec["epoch_time_s"] <= rec["epoch_time_s_high"]
        assert rec["time_width"] == pytest.approx((rec["epoch_time_s_high"] - rec["epoch_time_s_low"])
                                                  / rec["epoch_time_s"])
        assert {"rival_gain", "objective_width", "uncertainty", "avg_power_w_high", "epoch_energy_j"} <= set(rec)


def test_the_modes_given_first_are_said_to_be_given(tmp_path, capsys):
    doc, _, _ = _adaptive_run(tmp_path, capsys, "--modes", "MAXN")
    assert doc["adaptive"]["start"] == {"modes": ["MAXN"], "why": "given with --modes"}
    assert doc["adaptive"]["objective"] == "min-time" and doc["adaptive"]["max_power_w"] is None
    assert doc["config"]["candidates"] == str(tmp_path / "cands.csv")



def test_an_adaptive_run_stopped_mid_way_keeps_the_rounds_of_the_modes_it_profiled(tmp_path, capsys, monkeypatch):
    """Ctrl-C as the chooser weighs its third row: the sidecar, written as each mode ends, holds g and the round
    that picked it (a stopped run loses at most the mode in progress)."""
    choose = AdaptiveChooser.next_mode

    def stopped_at_the_third_row(self, rows):
        if len(rows) == 3:
            raise KeyboardInterrupt
        return choose(self, rows)

    monkeypatch.setattr(AdaptiveChooser, "next_mode", stopped_at_the_third_row)
    doc, _, _ = _adaptive_run(tmp_path, capsys, rc=130)
    assert [m["mode"] for m in doc["modes"]] == ["a", "h", "g"]
    assert [s["next_mode"]["mode"] for s in doc["adaptive"]["steps"]] == ["g"], doc["adaptive"]

def test_a_fixed_list_keeps_adaptive_false(tmp_path):
    out = tmp_path / "p.csv"
    assert main(["profile", "--device", "sim:agx-xavier", "--workload", "lenet5-mnist", "--modes", "MAXN",
                 "--warmup", "1", "--minibatches", "3", "--no-progress", "--out", str(out)]) == 0
    assert json.loads(Path(f"{out}.json").read_text())["adaptive"] is False


def test_readers_take_a_new_sidecar_and_an_old_one_with_adaptive_true(tmp_path, capsys):
    doc, _, out = _adaptive_run(tmp_path, capsys)
    old = tmp_path / "old.json"
    old.write_text(json.dumps({**doc, "adaptive": True}))
    new = Path(f"{out}.json")
    expected = list(read_profile_csv(out)["mode"])
    for path in (new, old):
        assert list(read_profile_rows(path)["mode"]) == expected
        assert list(read_mode_table(path, "modes")["mode"]) == expected


def test_an_adaptive_run_whose_standard_error_is_gone_still_profiles_and_records(tmp_path):
    """Its per-round lines to a closed pipe (the reader quit, the terminal hung up under nohup) neither end the
    run nor turn it into exit 0 without rows: the sidecar keeps every round the lines would have said."""
    cands = tmp_path / "cands.csv"
    cands.write_text(CANDIDATES)
    out = tmp_path / "p.csv"
    child = subprocess.Popen(
        [sys.executable, "-m", "jetpredict", "profile", "--device", "sim:agx-xavier", "--workload", "lenet5-mnist",
         "--adaptive", "--budget", "4", "--candidates", str(cands), "--warmup", "1", "--minibatches", "3",
         "--no-progress", "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])})
    child.stderr.close()  # before its first line: every write to it fails
    assert child.wait(timeout=240) == 0
    doc = json.loads(Path(f"{out}.json").read_text())
    last = doc["adaptive"]["steps"][-1]  # the round that stopped the loop, with every profiled mode
    assert last["stop"] and list(read_profile_csv(out)["mode"]) == last["profiled"]
