"""`jetpredict profile --device sim:DEVICE`: the issue's done-criterion, end to end through the CLI."""

from __future__ import annotations

import json

import pytest
from jetpredict.models.catalogue import load_device
from jetpredict.models.profile_files import read_profile_csv

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


@pytest.mark.slow
def test_a_seeded_twin_profile_is_byte_identical_across_processes(tmp_path):
    """Two processes, one seed: the CSV and its JSON sidecar are the same bytes (the simulated clock
    starts at 0 s, and a simulated campaign records no wall-clock start)."""
    import subprocess
    import sys

    outputs = []
    for run in ("first", "second"):
        cwd = tmp_path / run
        cwd.mkdir()
        subprocess.run([sys.executable, "-m", "jetpredict", "profile", "--device", "sim:agx-xavier",
                        "--workload", "resnet18-cifar10", "--modes", "presets", "--out", "X.csv",
                        "--no-progress"], cwd=cwd, check=True, capture_output=True, text=True)
        outputs.append(((cwd / "X.csv").read_bytes(), (cwd / "X.csv.json").read_bytes()))
    assert outputs[0][0] == outputs[1][0]
    assert outputs[0][1] == outputs[1][1]
    doc = json.loads(outputs[0][1])
    assert doc["started_utc"] is None and doc["clock"].startswith("simulated")
    assert len(read_profile_csv(tmp_path / "first" / "X.csv")) == len(load_device("agx-xavier").presets)


FACTORY_WITH_BATCHES_ONLY = '''
import torch
from torch import nn


def make():
    def batches():
        for _ in range(100):
            yield torch.randn(16, 8), torch.randint(0, 3, (16,))

    return {"model": nn.Linear(8, 3), "batches": batches, "loss": nn.functional.cross_entropy,
            "minibatches_per_epoch": 100}
'''


def test_a_factory_of_ready_batches_gets_an_epoch_on_the_twin(tmp_path, capsys, monkeypatch):
    # Its own minibatch count and no dataset size: the twin once simulated 0 minibatches (0 s, 0 J).
    (tmp_path / "batches_only.py").write_text(FACTORY_WITH_BATCHES_ONLY)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "b.csv"
    rc = main(["profile", "--device", "sim:nano", "--workload", "batches_only:make", "--modes", "MAXN",
               "--minibatches", "3", "--warmup", "1", "--out", str(out), "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    row = read_profile_csv(out).iloc[0]
    assert row["minibatches_per_epoch"] == 100 and row["source"] == "simulated"
    assert row["epoch_time_s"] > 0 and row["epoch_energy_j"] > 0
