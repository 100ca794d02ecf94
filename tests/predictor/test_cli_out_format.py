"""``plan --out`` and ``predict --out`` take their format from the file's extension unless ``--format``
says otherwise, so ``plan --out plan.csv`` feeds ``profile --modes plan.csv`` directly."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from jetpredict.cli import main

REFERENCE = Path(__file__).resolve().parents[2] / "models" / "reference" / "agx-xavier-published.csv"


def test_plan_csv_feeds_profile_modes(tmp_path, capsys):
    plan = tmp_path / "plan.csv"
    assert main(["plan", "--device", "agx-xavier", "--budget", "2", "--out", str(plan)]) == 0
    modes = pd.read_csv(plan)
    assert list(modes.columns[:5]) == ["mode", "cpu_cores", "cpu_mhz", "gpu_mhz", "emc_mhz"] and len(modes) == 2
    rows = tmp_path / "p.csv"
    assert main(["profile", "--device", "sim:agx-xavier", "--workload", "lenet5-mnist", "--modes", str(plan),
                 "--warmup", "1", "--minibatches", "2", "--no-progress", "--out", str(rows)]) == 0
    assert list(pd.read_csv(rows)["mode"]) == list(modes["mode"])


def test_predict_out_extension_chooses_the_format(tmp_path, capsys):
    rows = tmp_path / "rows.csv"
    df = pd.read_csv(REFERENCE)
    df[df["workload"] == "resnet18-cifar10"].to_csv(rows, index=False)
    model = tmp_path / "m.json"
    assert main(["fit", "--device", "agx-xavier", "--profiles", str(rows), "--out", str(model)]) == 0
    for name in ("x.csv", "x.json", "x.txt", "y.csv", "z.CSV"):
        extra = ["--format", "table"] if name == "y.csv" else []
        assert main(["predict", "--model", str(model), "--presets", "--out", str(tmp_path / name), *extra]) == 0
    for name in ("x.csv", "z.CSV"):  # the extension in any case (mutation audit: .CSV was written as a table)
        assert pd.read_csv(tmp_path / name)["epoch_time_s"].gt(0).all()
    parsed = json.loads((tmp_path / "x.json").read_text())
    assert parsed  # JSON whatever its top-level shape
    for name in ("x.txt", "y.csv"):  # no known extension, or --format given: the table
        text = (tmp_path / name).read_text()
        assert "," not in text.splitlines()[0] and "epoch_time_s" in text.splitlines()[0]
