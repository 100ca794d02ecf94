"""`jetpredict profile --device sim:DEVICE`: the issue's done-criterion, end to end through the CLI."""

from __future__ import annotations

import json

from jetpredict.models.catalogue import load_device
from jetpredict.models.profile_rows import read_profile_csv

from jetpredict.cli import main


def test_profile_presets_on_the_twin(tmp_path, capsys):
    out = tmp_path / "s.csv"
    rc = main(["profile", "--device", "sim:orin-agx", "--workload", "resnet18-cifar10", "--modes", "presets",
               "--out", str(out), "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    df = read_profile_csv(out)
    assert list(df["mode"]) == [p.mode for p in load_device("orin-agx").presets]
    assert set(df["source"]) == {"simulated"} and set(df["power_meter"]) == {"sim:orin-agx"}
    assert df["avg_power_w"].notna().all() and df["base_power_w"].notna().all()
    maxn = df.set_index("mode").loc["MAXN"]
    assert maxn["epoch_time_s"] == df["epoch_time_s"].min()
    # The raw sidecar holds the simulated minibatches and power samples of every mode.
    doc = json.loads((tmp_path / "s.csv.json").read_text())
    assert len(doc["modes"]) == len(df) and doc["modes"][0]["power"]["meter"] == "sim:orin-agx"
