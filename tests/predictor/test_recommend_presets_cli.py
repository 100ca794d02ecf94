"""``jetpredict recommend`` compares its answer with the best nvpmodel preset under the same cap: in the
JSON (the HTTP answer's ``preset_comparison``) and in one line on standard error."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest

from jetpredict.cli import main


@pytest.fixture(scope="module")
def model(resnet_cli_fit) -> Path:
    return resnet_cli_fit() / "resnet.json"


def test_json_states_the_preset_and_the_saving(model, capsys):
    assert main(["recommend", "--model", str(model), "--objective", "min-time", "--max-power-w", "20",
                 "--format", "json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    c = answer["preset_comparison"]
    assert c["preset"] and c["objective"] == "min-time"
    assert c["avg_power_w_high"] <= 20  # it meets the same cap at the same confidence
    assert c["time_saving_s"] == pytest.approx(c["epoch_time_s"] - answer["best"]["epoch_time_s"])
    assert c["time_saving_s"] >= 0  # never slower than a preset that meets the cap (an in-range one here)


def test_stderr_states_the_comparison_and_csv_stays_best_and_front(model, capsys):
    assert main(["recommend", "--model", str(model), "--objective", "min-energy", "--max-power-w", "20",
                 "--format", "json"]) == 0
    c = json.loads(capsys.readouterr().out)["preset_comparison"]
    assert main(["recommend", "--model", str(model), "--objective", "min-energy", "--max-power-w", "20"]) == 0
    err = capsys.readouterr().err
    assert f"vs the best preset under the same caps, {c['preset']} ({c['epoch_time_s']:.4g} s/epoch" in err
    assert f"{c['energy_saving_j']:.4g} J ({c['energy_saving_share']:.1%})" in err
    assert main(["recommend", "--model", str(model), "--objective", "min-energy", "--max-power-w", "20",
                 "--format", "csv"]) == 0
    table = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert set(table["role"]) == {"best", "pareto"}  # the CSV's rows are as before


def test_an_out_of_range_preset_does_not_displace_the_in_range_pick(resnet_cli_fit, capsys):
    """ResNet-18 profiled on e,f,i,j, min-energy: the space mode 5c-1113.6-675.75-1065.6 (7,556 J, up to
    8,317 J) lies outside the profiled ranges and not below the best in-range point (2c-2112-905.25-1331.2,
    7,984 J) beyond its interval, so the in-range mode is chosen. MODE_15W (7,768 J, up to 8,469 J), outside
    the CPU and GPU ranges and worse on both, falls to the same rule (it used to be chosen on its point
    alone); the comparison names the best preset that stands, MODE_30W_2CORE (in range)."""
    model = str(resnet_cli_fit(("e", "f", "i", "j")) / "resnet.json")
    assert main(["recommend", "--model", model, "--objective", "min-energy", "--format", "json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert main(["predict", "--model", model, "--presets", "--format", "json"]) == 0
    presets = {p["mode"]: p for p in json.loads(capsys.readouterr().out)}
    best, c = answer["best"], answer["preset_comparison"]
    assert best["mode"] == "2c-2112-905.25-1331.2" and best["extrapolated_knobs"] == ""
    assert answer["preferred_in_range"] and not answer["preferred_preset"]
    # The preset the old rule chose: below the pick on its point, not beyond its interval.
    old = presets["MODE_15W"]
    assert old["extrapolated"] and old["epoch_energy_j"] < best["epoch_energy_j"]
    assert best["epoch_energy_j"] <= old["epoch_energy_j_high"]
    assert c["preset"] == "MODE_30W_2CORE" and presets["MODE_30W_2CORE"]["extrapolated_knobs"] == ""
    assert not c["chosen_is_preset"] and c["energy_saving_j"] > 0


def test_no_preset_under_the_cap_is_said(model, capsys):
    # 6 W: below every AGX Xavier preset's power, but a low custom mode may still meet it.
    code = main(["recommend", "--model", str(model), "--objective", "min-time", "--max-power-w", "6",
                 "--format", "json"])
    answer = json.loads(capsys.readouterr().out)
    assert answer["preset_comparison"]["preset"] is None
    assert "no nvpmodel preset meets max_power_w=6" in answer["preset_comparison"]["reason"]
    assert code in (0, 1)


def test_a_negative_saving_reads_as_a_cost():
    """A min-time pick that draws more energy than the preset says what it costs, not "saves -337.6 J"."""
    from jetpredict.predictor.cli import preset_summary

    line = preset_summary({"preset": "MAXN", "chosen_is_preset": False, "epoch_time_s": 500.0,
                           "epoch_energy_j": 8200.0, "avg_power_w": 16.4, "time_saving_s": 37.21,
                           "time_saving_share": 0.074, "energy_saving_j": -337.6, "energy_saving_share": -0.041})
    assert "saves 37.21 s (7.4%) and costs 337.6 J (4.1%) more per epoch" in line
    assert "-" not in line.split("):")[1]
