"""The profiler's own JSON document (``profile --out X.json``) is a mode list for ``predict --modes`` and
``plan --candidates``: its rows are read, as DESIGN.md's ``--modes FILE`` takes rows (other columns ignored)."""

from __future__ import annotations

import io
import json

import pandas as pd

from jetpredict.cli import main


def test_profile_json_feeds_predict_modes_and_plan_candidates(tmp_path, capsys, work):
    plan = tmp_path / "plan.csv"
    assert main(["plan", "--device", "agx-xavier", "--budget", "2", "--out", str(plan)]) == 0
    doc = tmp_path / "r18.json"
    assert main(["profile", "--device", "sim:agx-xavier", "--workload", "resnet18-cifar10", "--modes", str(plan),
                 "--warmup", "1", "--minibatches", "2", "--no-progress", "--out", str(doc)]) == 0
    profiled = json.loads(doc.read_text())
    assert profiled["rows"] and profiled["modes"]
    capsys.readouterr()
    model = work / "resnet.json"
    assert main(["predict", "--model", str(model), "--modes", str(doc), "--format", "csv"]) == 0
    from_doc = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert main(["predict", "--model", str(model), "--modes", str(plan), "--format", "csv"]) == 0
    from_plan = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert from_doc["mode"].tolist() == [r["mode"] for r in profiled["rows"]] == from_plan["mode"].tolist()
    pd.testing.assert_series_equal(from_doc["epoch_time_s"], from_plan["epoch_time_s"])
    assert main(["plan", "--device", "agx-xavier", "--candidates", str(doc), "--budget", "1",
                 "--format", "csv"]) == 0
    assert pd.read_csv(io.StringIO(capsys.readouterr().out))["mode"].iloc[0] in set(from_plan["mode"])
