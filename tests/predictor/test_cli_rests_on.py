"""What a model rests on, said where a user reads it: `fit`'s summary names the kind of the workload's rows
(with counts when they mix), and `recommend --plot` titles the picture with the reference's and the rows'
kinds and whether the prediction crosses devices."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from jetpredict.predictor.reference import REFERENCE_DIR

from jetpredict.cli import main

MODES = ("MAXN", "MODE_10W", "MODE_15W", "MODE_30W_ALL", "MODE_30W_2CORE", "MODE_15W_DESKTOP")


def _rows(tmp_path: Path, kinds: list[str]) -> Path:
    """AGX Xavier ResNet-18 preset rows of the committed twin sweep, the i-th labelled ``kinds[i]``; a row
    called measured carries a board's meter instead of the twin's."""
    with (REFERENCE_DIR / "agx-xavier-simulated.csv").open(newline="") as f:
        reader = csv.DictReader(f)
        header = list(reader.fieldnames or [])
        rows = [r for r in reader if r["workload"] == "resnet18-cifar10" and r["mode"] in MODES]
    assert len(rows) >= len(kinds)
    out = tmp_path / "rows.csv"
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, header, lineterminator="\n")
        writer.writeheader()
        for row, kind in zip(rows, kinds, strict=False):
            if kind == "measured":
                row = {**row, "power_meter": "ina3221:VDD_IN"}
            writer.writerow({**row, "source": kind, "workload": "mine"})
    return out


def _fit(tmp_path: Path, kinds: list[str], capsys) -> tuple[Path, str]:
    model = tmp_path / "m.json"
    assert main(["fit", "--device", "agx-xavier", "--profiles", str(_rows(tmp_path, kinds)), "--out",
                 str(model)]) == 0
    return model, next(line for line in capsys.readouterr().err.splitlines() if line.startswith("fitted"))


def test_fit_names_the_rows_kind_with_counts_when_they_mix(tmp_path, capsys):
    _, line = _fit(tmp_path, ["measured"] * 3 + ["simulated"] * 3, capsys)
    assert "rows: 3 measured, 3 simulated" in line, line


@pytest.mark.parametrize("kind", ["simulated", "measured"])
def test_fit_names_one_kind_plainly(tmp_path, capsys, kind):
    _, line = _fit(tmp_path, [kind] * 6, capsys)
    assert f"{kind} rows" in line and "rows:" not in line, line


def test_the_plot_title_says_the_model_rests_on_simulated_rows_and_crosses_devices(tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="--plot needs the [plot] extra (in [dev])")
    model, _ = _fit(tmp_path, ["simulated"] * 6, capsys)
    out = tmp_path / "p.svg"
    assert main(["recommend", "--model", str(model), "--device", "orin-agx", "--objective", "min-energy",
                 "--plot", str(out)]) == 0
    svg = out.read_text()
    assert "reference: simulated" in svg and "workload rows: simulated" in svg
    assert "on agx-xavier (cross-device)" in svg
    same = tmp_path / "same.svg"
    assert main(["recommend", "--model", str(model), "--objective", "min-energy", "--plot", str(same)]) == 0
    svg = same.read_text()
    assert "workload rows: simulated" in svg and "cross-device" not in svg
